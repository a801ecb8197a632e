"""A prediction of every configuration (the plan's) as the Bayesian searcher's prior mean.

With a prior, the Gaussian process models what the prediction got wrong, not the objective itself:
it is fitted to ``loss(measured) − loss(predicted)`` and a configuration's expected loss is its
predicted loss plus the fitted residual. Where nothing has been measured near a configuration, the
search therefore follows the prediction; where trials show it is off (a constant factor, a layout
the plan cannot model), the residual corrects it, first near those trials and then everywhere as
the GP's length scales allow. Losses are logarithms when every value is positive: a prediction
off by a constant factor (an uncalibrated device) is then a constant residual, which the GP
(normalised targets) absorbs at once.

Used by :class:`autotune.search.searchers.BayesSearcher` (``prior=``); see ``benchmarks/searchers.py``
for trials-to-target with and without it on the measured demo spaces.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from autotune.search.space import Value

#: Trials before the prior's weight is fitted (with fewer, the prediction is taken as is).
MIN_TRIALS_TO_WEIGH = 3
#: The most weight a prior can get (a prediction whose differences are too small by this factor).
MAX_WEIGHT = 2.0
#: A predicted objective value of a configuration (None: no prediction for it).
Prior = Callable[[Mapping[str, Value]], "float | None"]


class PriorLoss:
    """Losses in the space the GP models, with the prior's loss of each configuration.

    ``maximize``: the objective's direction. Logarithmic when every measured and predicted value
    is positive, linear (the searcher's own ``−value`` or ``value``) otherwise. A configuration the
    prior has no prediction for gets the median of the predicted losses (a neutral guess).
    """

    def __init__(
        self,
        prior: Prior,
        maximize: bool,
        measured: Sequence[float],
        configurations: Sequence[Mapping[str, Value]],
    ) -> None:
        self.maximize = maximize
        predicted = [_finite(prior(p)) for p in configurations]
        known = [v for v in predicted if v is not None]
        self.log = all(v > 0 for v in [*measured, *known])
        losses = [self.loss(v) for v in known]
        neutral = statistics.median(losses) if losses else 0.0
        self._by_position = [neutral if v is None else self.loss(v) for v in predicted]

    def loss(self, value: float) -> float:
        """The loss of an objective value (smaller is better)."""
        x = math.log(value) if self.log else value
        return -x if self.maximize else x

    def prior_losses(self) -> list[float]:
        """The prior's loss of each configuration given, in order."""
        return list(self._by_position)


class Shifted:
    """A fitted regressor of residuals, seen as a model of the loss: ``prior + residual``.

    What skopt's acquisition functions call (``predict(X, return_std=True)``), for the rows of
    ``X`` in the order of ``offsets``.
    """

    def __init__(self, model: Any, offsets: Sequence[float]) -> None:
        self.model = model
        self.offsets = list(offsets)

    def predict(self, x: Any, return_std: bool = False, **_: Any) -> Any:
        """The loss's mean at the rows of ``x`` (and its standard deviation, with ``return_std``)."""
        import numpy as np

        offsets = np.asarray(self.offsets, dtype=float)
        if return_std:
            mean, std = self.model.predict(x, return_std=True)
            return mean + offsets, std
        return self.model.predict(x) + offsets


def best_predicted(
    prior: Prior, candidates: Sequence[Mapping[str, Value]], maximize: bool
) -> Mapping[str, Value] | None:
    """The candidate with the best predicted value (the first of equals), or None without any."""
    scored = [(v, i) for i, p in enumerate(candidates) if (v := _finite(prior(p))) is not None]
    if not scored:
        return None
    _, index = max(scored, key=lambda s: (s[0] if maximize else -s[0], -s[1]))
    return candidates[index]


def prior_weight(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """How much of the prior the mean keeps: the least-squares slope of measured on predicted losses.

    ``measured``: every trial's loss, an infeasible one's penalty included (a configuration
    predicted best that does not run is evidence against the prediction too). 1 (the prediction
    as it is) until :data:`MIN_TRIALS_TO_WEIGH` trials say otherwise;
    then the slope, clipped to [0, :data:`MAX_WEIGHT`]: a prediction that ranks configurations
    the wrong way round gets no weight, and the GP models the objective alone, as without one.
    """
    if len(measured) < MIN_TRIALS_TO_WEIGH:
        return 1.0
    mp, mm = statistics.fmean(predicted), statistics.fmean(measured)
    var = sum((p - mp) ** 2 for p in predicted)
    if var <= 0:
        return 1.0
    slope = sum((p - mp) * (m - mm) for p, m in zip(predicted, measured, strict=True)) / var
    return min(max(slope, 0.0), MAX_WEIGHT)


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


__all__ = [
    "MAX_WEIGHT", "MIN_TRIALS_TO_WEIGH", "Prior", "PriorLoss", "Shifted", "best_predicted", "prior_weight"
]  # fmt: skip
