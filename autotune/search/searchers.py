"""Searchers: which configuration to try next, given the trials so far (ask/tell).

A searcher only proposes configurations and learns from outcomes; it knows nothing of how a trial
runs (the study, a trial runner) or how the objective is scored. Three searchers share one
interface, ``Searcher``: ``BayesSearcher`` (scikit-optimize, Gaussian process), ``RandomSearcher``
and ``GridSearcher`` (and :mod:`autotune.search.structured`); ``make_searcher(name, ...)``
(:mod:`autotune.search.registry`) picks one by name.

Every ``ask()`` is a pure function of the seed and the told history: nothing else is kept between
calls. So ``replay(history)`` on a fresh searcher (how a study resumes: nothing is pickled) gives
exactly the next configuration the original would have given, asking twice without a ``tell``
gives the same configuration, and told trials from elsewhere (a baseline run with the user's own
defaults, trials of another searcher) are simply part of the history.

No searcher re-asks a configuration already told while the space (or grid) still has an untried
one; once every configuration of a finite space has been tried, ``done`` is true and ``ask()``
raises ``SearchExhausted``.
"""

from __future__ import annotations

import abc
import hashlib
import math
import random
import warnings
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal, NamedTuple

from autotune.search.prior import Prior, PriorLoss, Shifted, best_predicted, prior_weight
from autotune.search.space import Space, Value

Direction = Literal["maximize", "minimize"]
#: A finite space up to this many configurations is enumerated to find untried ones.
ENUMERATE_LIMIT = 100_000
#: A finite space up to this many configurations has the acquisition function maximised exactly
#: over all its untried configurations (rather than skopt's optimiser over a continuous relaxation).
SCORE_ALL_LIMIT = 10_000
#: Draws from the prior before a searcher falls back to enumerating the untried configurations.
_REJECTION_TRIES = 64


class Observation(NamedTuple):
    """One finished trial as a searcher sees it: ``value`` is the objective (None if unknown).

    ``impossible``: an infeasible configuration known not to exist without running it (a
    micro-batch that cannot split the global batch over the ranks), as opposed to one that ran
    and failed; it says nothing about its neighbours.
    """

    params: dict[str, Value]
    value: float | None
    feasible: bool
    impossible: bool = False


class SearchExhausted(Exception):
    """``ask()`` on a searcher that has tried every configuration it can propose."""


def _is_finite_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def derive_seed(*parts: object) -> int:
    """A 31-bit seed from ``parts``, stable across processes and Python versions (no ``hash()``)."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


class Searcher(abc.ABC):
    """Base of all searchers: ``ask()`` a configuration, ``tell()`` its outcome, ``replay()`` a history.

    ``direction`` says whether larger (``"maximize"``, the default) or smaller objective values
    are better. Subclasses implement ``_suggest()`` and may override ``done``.
    """

    name: ClassVar[str]

    def __init__(self, space: Space, seed: int = 0, direction: Direction = "maximize") -> None:
        if direction not in ("maximize", "minimize"):
            raise ValueError(f"direction must be 'maximize' or 'minimize', got {direction!r}")
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        self.space = space
        self.seed = seed
        self.direction: Direction = direction
        self._history: list[Observation] = []
        self._seen: set[tuple[Any, ...]] = set()
        self._seen_in_space: set[tuple[Any, ...]] = set()

    @property
    def history(self) -> tuple[Observation, ...]:
        """Every told observation, in order."""
        return tuple(self._history)

    @property
    def done(self) -> bool:
        """True once every configuration of a finite space has been told."""
        size = self.space.size
        return size is not None and len(self._seen_in_space) >= size

    def is_seen(self, params: Mapping[str, Value]) -> bool:
        """Whether a configuration has already been told."""
        return self.space.key(params) in self._seen

    def ask(self) -> dict[str, Value]:
        """The next configuration to try; raises ``SearchExhausted`` when ``done``."""
        if self.done:
            raise SearchExhausted(f"{self.name} searcher: every configuration has been tried")
        return self._suggest()

    def tell(
        self,
        params: Mapping[str, Value],
        value: float | None,
        feasible: bool = True,
        impossible: bool = False,
    ) -> None:
        """Record a finished trial: its ``value``, or ``feasible=False`` (out of memory, crashed...).

        ``params`` need not come from ``ask()`` (a baseline may even lie outside the space's
        bounds); a feasible trial needs a finite ``value``; an infeasible trial's value is ignored.
        ``impossible=True`` (infeasible only): the configuration cannot exist and was not run
        (see :class:`Observation`); it is never asked again, and the Bayesian searcher leaves it
        out of its model.
        """
        self.space.check_names(params)
        if feasible and not _is_finite_number(value):
            raise ValueError(f"a feasible trial needs a finite number as its value, got {value!r}")
        if feasible and impossible:
            raise ValueError("an impossible configuration cannot be feasible")
        params = dict(params)
        if not feasible and not _is_finite_number(value):
            value = None
        value = None if value is None else float(value)
        self._history.append(Observation(params, value, bool(feasible), bool(impossible)))
        key = self.space.key(params)
        self._seen.add(key)
        if self.space.contains(params):
            self._seen_in_space.add(key)

    def ask_pending(self, pending: Iterable[Mapping[str, Value]]) -> dict[str, Value]:
        """The next configuration while ``pending`` ones still run: ``ask()`` as if they had ended.

        A constant liar: each pending configuration is told for this ask only with the mean of the
        feasible values so far (none yet: as impossible, so it is only kept out of the proposals),
        so a batch of asks spreads over the space instead of proposing one point N times. The
        history is left as it was. ``SearchExhausted`` when every configuration is tried or pending.
        """
        pending = list(pending)
        if not pending:
            return self.ask()
        saved = (list(self._history), set(self._seen), set(self._seen_in_space))
        values = [o.value for o in self._history if o.feasible and o.value is not None]
        lie = sum(values) / len(values) if values else None
        try:
            for params in pending:
                if lie is None:
                    self.tell(params, None, feasible=False, impossible=True)
                else:
                    self.tell(params, lie)
            return self.ask()
        finally:
            self._history, self._seen, self._seen_in_space = saved

    def replay(
        self,
        history: Iterable[
            Observation
            | tuple[Mapping[str, Value], float | None, bool]
            | tuple[Mapping[str, Value], float | None, bool, bool]
        ],
    ) -> None:
        """Forget everything told so far and tell ``history`` in order (resuming a study)."""
        self._history.clear()
        self._seen.clear()
        self._seen_in_space.clear()
        for observation in history:
            self.tell(*observation)

    @abc.abstractmethod
    def _suggest(self) -> dict[str, Value]:
        """The next configuration (called only when not ``done``)."""

    # ------------------------------------------------------------------ helpers for subclasses

    def _rng(self, salt: str = "") -> random.Random:
        """A generator seeded from the seed and the number of told trials (so ``ask`` is pure)."""
        return random.Random(derive_seed(self.name, self.seed, len(self._history), salt))

    def _loss(self, value: float) -> float:
        """The value as a quantity to minimise."""
        return -value if self.direction == "maximize" else value

    def _untried_points(self) -> list[dict[str, Value]] | None:
        """Every untried configuration of a small finite space, or None if it is too large."""
        size = self.space.size
        if size is None or size > ENUMERATE_LIMIT:
            return None
        return [p for p in self.space.points() if self.space.key(p) not in self._seen]

    def _candidates(self, rng: random.Random, n_candidates: int) -> list[dict[str, Value]]:
        """Every untried configuration of a small finite space, else up to ``n_candidates`` random ones."""
        size = self.space.size
        if size is not None and size <= SCORE_ALL_LIMIT:
            return self._untried_points() or []
        found: dict[tuple[Any, ...], dict[str, Value]] = {}
        for _ in range(n_candidates):
            p = self.space.sample(rng)
            if not self.is_seen(p):
                found.setdefault(self.space.key(p), p)
        return list(found.values())

    def _random_untried(self, rng: random.Random) -> dict[str, Value]:
        """A draw from the prior that has not been tried (uniform over the untried as a fallback)."""
        params = self.space.sample(rng)
        for _ in range(_REJECTION_TRIES):
            if not self.is_seen(params):
                return params
            params = self.space.sample(rng)
        untried = self._untried_points()
        return rng.choice(untried) if untried else params


class RandomSearcher(Searcher):
    """Independent draws from each parameter's prior (log-uniform where ``log``), seeded."""

    name = "random"

    def _suggest(self) -> dict[str, Value]:
        return self._random_untried(self._rng())


class GridSearcher(Searcher):
    """Every point of ``space.grid(points_per_dim)``, once each, then ``done``.

    The grid is visited in an order shuffled by the seed (``shuffle=False``: in ``grid()`` order,
    the first parameter slowest), so a study that stops early has covered the grid evenly rather
    than one corner of it.
    """

    name = "grid"

    def __init__(
        self,
        space: Space,
        seed: int = 0,
        direction: Direction = "maximize",
        *,
        points_per_dim: int = 5,
        shuffle: bool = True,
    ) -> None:
        super().__init__(space, seed, direction)
        self.points_per_dim = points_per_dim
        self.grid = space.grid(points_per_dim)
        if shuffle:
            random.Random(derive_seed(self.name, seed, "order")).shuffle(self.grid)

    @property
    def done(self) -> bool:
        """True once every grid point has been told."""
        return all(self.is_seen(p) for p in self.grid)

    def _suggest(self) -> dict[str, Value]:
        return dict(next(p for p in self.grid if not self.is_seen(p)))


class BayesSearcher(Searcher):
    """Bayesian optimisation: a Gaussian process over the trials so far (scikit-optimize).

    The first ``n_initial_points`` configurations are random draws (as ``RandomSearcher``), and so
    is every ask until one trial was feasible. After that, each ask builds a ``skopt.Optimizer``
    (GP with a Matérn kernel on the normalised space, choices one-hot), fits it to every told
    trial inside the space and returns the configuration that maximises the acquisition function
    (``acq_func``: "EI" by default, or "gp_hedge", "LCB", "PI"):

    - in a finite space of up to ``SCORE_ALL_LIMIT`` configurations, exactly: every untried
      configuration is scored (so a configuration is never proposed twice);
    - otherwise by skopt's own optimiser (L-BFGS from the best of ``n_candidates`` random points);
      if that rounds to a configuration already tried, the best of ``n_candidates`` random untried
      configurations is taken instead.

    Rebuilt at each ask: one GP fit per ask, as skopt's own incremental ``tell`` does, and what
    makes ``ask`` a pure function of seed and history. The cost: ``gp_hedge`` keeps no gains from
    one ask to the next, so it picks EI, LCB or PI at random each time (a portfolio rather than a
    hedge); "EI" is the default for that reason.

    Infeasible trials (out of memory, crashed...) are told to the GP as a penalty loss: the worst
    feasible loss so far plus ``penalty_margin`` (0.1) times the spread of the feasible losses (or
    of the worst one's magnitude, or 1, when all feasible losses are equal). Worse than every
    feasible trial, so the model learns where the region ends; only slightly worse, because the
    optimum of a training job often sits right at the cliff (the largest batch that fits), and a
    deep penalty drags the GP's estimate of the configurations beside it down too. Measured in
    ``benchmarks/searchers.py`` (12 seeds, evaluations to 95% of the optimum, median): margin 0.1
    against 0.5 gave 16.5 against 33 on the ``lr-ridge`` landscape and 17 against 19 on
    ``oom-cliff``. The penalty follows the feasible range as it grows (the GP is refitted on
    every ask).

    Impossible configurations (told with ``impossible=True``: a micro-batch that cannot split
    the global batch over a layout's ranks) stay out of the model altogether, and do not count
    among the initial points: a penalty there would tell the GP that their neighbours are poor
    too, while the best configuration often sits right beside them (the largest micro-batch that
    splits). On the demo grids measured on the CPU (``benchmarks/data``), a penalty made the
    searcher slower than random search; see ``benchmarks/searchers.py`` for the figures.

    ``prior``: a prediction of each configuration's objective (the plan's, :mod:`autotune.tuner.
    search_prior`). With one, there is no random initial phase: the first ask takes the best
    predicted configuration, and from the first feasible trial on the GP models the residual
    between measurement and prediction, so untried configurations are scored by their prediction
    corrected by what the trials so far showed. Configurations are then always scored one by one
    (the untried ones of a finite space, else ``n_candidates`` random untried ones).
    """

    name = "bayes"

    def __init__(
        self,
        space: Space,
        seed: int = 0,
        direction: Direction = "maximize",
        *,
        n_initial_points: int = 5,
        acq_func: Literal["EI", "gp_hedge", "LCB", "PI"] = "EI",
        n_candidates: int = 2000,
        penalty_margin: float = 0.1,
        prior: Prior | None = None,
    ) -> None:
        super().__init__(space, seed, direction)
        if not isinstance(n_initial_points, int) or n_initial_points < 1:
            raise ValueError(f"n_initial_points must be an integer >= 1, got {n_initial_points!r}")
        if acq_func not in ("EI", "gp_hedge", "LCB", "PI"):
            raise ValueError(f"acq_func must be 'EI', 'gp_hedge', 'LCB' or 'PI', got {acq_func!r}")
        if n_candidates < 1:
            raise ValueError(f"n_candidates must be >= 1, got {n_candidates!r}")
        if not penalty_margin > 0:
            raise ValueError(f"penalty_margin must be > 0, got {penalty_margin!r}")
        self.n_initial_points = n_initial_points
        self.acq_func = acq_func
        self.n_candidates = n_candidates
        self.penalty_margin = penalty_margin
        self.prior = prior

    def penalty(self, feasible_losses: list[float]) -> float:
        """The loss told to the GP for an infeasible trial (see the class docstring)."""
        worst, best = max(feasible_losses), min(feasible_losses)
        spread = worst - best if worst > best else max(abs(worst), 1.0)
        return worst + self.penalty_margin * spread

    def _suggest(self) -> dict[str, Value]:
        rng = self._rng()
        usable = [o for o in self._history if self.space.contains(o.params) and not o.impossible]
        feasible_losses = [self._loss(o.value) for o in usable if o.feasible and o.value is not None]
        if self.prior is not None:
            return self._prior_suggest(usable, rng)
        if len(usable) < self.n_initial_points or not feasible_losses:
            return self._random_untried(rng)

        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]  # via scikit-learn

        # One BLAS thread: the matrices are tiny, and a second thread spinning on a core that is
        # busy (a trial, a compiler) made each ask about 5 times slower in our measurements.
        with threadpool_limits(limits=1):
            return self._model_suggest(usable, feasible_losses, rng)

    def _model_suggest(
        self, usable: list[Observation], feasible_losses: list[float], rng: random.Random
    ) -> dict[str, Value]:
        """Fit the GP to ``usable`` and return the best untried configuration it proposes."""
        penalty = self.penalty(feasible_losses)
        xs = [self.space.to_skopt_point(o.params) for o in usable]
        ys = [self._loss(o.value) if o.feasible and o.value is not None else penalty for o in usable]
        optimizer = self._optimizer()
        size = self.space.size
        with warnings.catch_warnings():  # GP hyperparameter fits warn about convergence; harmless here
            warnings.simplefilter("ignore")
            if size is not None and size <= SCORE_ALL_LIMIT:  # every untried configuration, exactly
                from sklearn.base import clone  # type: ignore[import-untyped]

                optimizer.tell(xs, ys, fit=False)
                model = clone(optimizer.base_estimator_).fit(optimizer.space.transform(xs), ys)
                return self._best_of(self._untried_points() or [], optimizer, model, min(ys), rng)
            optimizer.tell(xs, ys)
            params = self.space.from_skopt_point(optimizer.ask())
            if not self.is_seen(params):
                return params
            candidates: dict[tuple[Any, ...], dict[str, Value]] = {}
            for _ in range(self.n_candidates):
                p = self.space.sample(rng)
                if not self.is_seen(p):
                    candidates.setdefault(self.space.key(p), p)
            return self._best_of(list(candidates.values()), optimizer, optimizer.models[-1], min(ys), rng)

    def _prior_suggest(self, usable: list[Observation], rng: random.Random) -> dict[str, Value]:
        """The untried configuration best by prediction, corrected by the GP of the residuals."""
        assert self.prior is not None
        candidates = self._candidates(rng, self.n_candidates)
        if not candidates:
            return self._random_untried(rng)
        maximize = self.direction == "maximize"
        feasible = [o for o in usable if o.feasible and o.value is not None]
        if not feasible:  # the prediction's best first; after a failure, as without a prior
            first = best_predicted(self.prior, candidates, maximize) if not usable else None
            return dict(first) if first is not None else self._random_untried(rng)
        measured = [float(o.value) for o in feasible if o.value is not None]
        losses = PriorLoss(self.prior, maximize, measured, [*(o.params for o in usable), *candidates])
        feasible_losses = [losses.loss(v) for v in measured]
        penalty = self.penalty(feasible_losses)
        ys = [losses.loss(o.value) if o.feasible and o.value is not None else penalty for o in usable]
        prior_losses = losses.prior_losses()
        weight = prior_weight(prior_losses[: len(usable)], ys)
        prior_losses = [weight * p for p in prior_losses]
        told, offsets = prior_losses[: len(usable)], prior_losses[len(usable) :]
        residuals = [y - p for y, p in zip(ys, told, strict=True)]

        from threadpoolctl import threadpool_limits  # via scikit-learn: only for a model-based ask

        with threadpool_limits(limits=1), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from sklearn.base import clone  # the search's libraries: only for a model-based ask

            optimizer = self._optimizer()
            xs = optimizer.space.transform([self.space.to_skopt_point(o.params) for o in usable])
            model = clone(optimizer.base_estimator_).fit(xs, residuals)
            return self._best_of(candidates, optimizer, Shifted(model, offsets), min(ys), rng)

    def _optimizer(self) -> Any:
        """A fresh ``skopt.Optimizer`` over the space (GP, no initial points), seeded by the history."""
        from skopt import Optimizer  # type: ignore[import-untyped]  # only for a model-based ask

        return Optimizer(
            self.space.to_skopt(),
            base_estimator="GP",
            n_initial_points=0,
            acq_func=self.acq_func,
            acq_optimizer_kwargs={"n_points": self.n_candidates},
            random_state=derive_seed(self.name, self.seed, len(self._history), "skopt"),
            avoid_duplicates=False,
        )

    def _best_of(
        self,
        candidates: list[dict[str, Value]],
        optimizer: Any,
        model: Any,
        best_loss: float,
        rng: random.Random,
    ) -> dict[str, Value]:
        """The candidate the fitted GP rates best under the acquisition function."""
        if not candidates:
            return self._random_untried(rng)
        from skopt.acquisition import gaussian_ei, gaussian_lcb, gaussian_pi  # type: ignore[import-untyped]

        acq = rng.choice(("EI", "LCB", "PI")) if self.acq_func == "gp_hedge" else self.acq_func
        x = optimizer.space.transform([self.space.to_skopt_point(p) for p in candidates])
        if acq == "LCB":
            scores = -gaussian_lcb(x, model)  # a lower bound of the loss: smaller is better
        elif acq == "PI":
            scores = gaussian_pi(x, model, y_opt=best_loss)
        else:
            scores = gaussian_ei(x, model, y_opt=best_loss)
        best = max(range(len(candidates)), key=lambda i: float(scores[i]))  # first of equals: deterministic
        return candidates[best]
