"""A searcher for training knobs: few trials on smooth, log-scaled, mostly separable landscapes.

Throughput and cost over batch size are smooth and mostly unimodal in log scale, with a cliff where
memory runs out; precision and layout are categorical with large, mostly separable effects. So:

- each parameter becomes features in [0, 1]: an ``Int``/``Float`` by its position (log-scaled when
  ``log`` or ``power_of_two``), a ``Choice`` of numbers by its rank among them (an ordinal knob:
  a GPU count, a sequence length), any other ``Choice`` one-hot;
- the first ``n_initial_points`` configurations are a space-filling design over the levels:
  seeded, each the untried configuration farthest from every one tried so far (maximin);
- then a Gaussian process on the log of the objective, with a kernel that is the sum of a
  squared-exponential kernel over all features (interactions) and one per parameter (the additive,
  separable part), its length scale and mixing weight chosen by marginal likelihood from a small
  grid; the next configuration maximises expected improvement times the probability of being
  feasible, which a second, kernel-weighted model learns from the out-of-memory (infeasible)
  trials.

Like every searcher here, ``ask()`` is a pure function of the seed and the told history (numpy is
imported at the first model-based ask, not with the module).
"""

from __future__ import annotations

import math
import random
from typing import Any

from autotune.search.params import Choice, Float, Int
from autotune.search.searchers import SCORE_ALL_LIMIT, Direction, Observation, Searcher
from autotune.search.space import Space, Value

#: Length scales (in the unit features) and additive weights tried by marginal likelihood.
_LENGTH_SCALES = (0.25, 0.5, 1.0)
_ADDITIVE = (0.0, 0.5, 0.9)


def _numeric(values: tuple[Any, ...]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


class Encoder:
    """Configurations as feature vectors in [0, 1], and which features belong to which parameter."""

    def __init__(self, space: Space) -> None:
        self.space = space
        self.groups: list[list[int]] = []
        width = 0
        for p in space.params.values():
            n = len(p.choices) if isinstance(p, Choice) and not _numeric(p.choices) else 1
            self.groups.append(list(range(width, width + n)))
            width += n
        self.width = width

    def encode(self, params: dict[str, Value]) -> list[float]:
        """``params`` as features in [0, 1], in parameter order (one-hot for a non-numeric choice)."""
        out: list[float] = []
        for name, p in self.space.params.items():
            v = params[name]
            if isinstance(p, Choice):
                if _numeric(p.choices):
                    ranks = sorted(float(c) for c in p.choices)
                    out.append(ranks.index(float(v)) / max(1, len(ranks) - 1))
                else:
                    out.extend(1.0 if i == p.index(v) else 0.0 for i in range(len(p.choices)))
            elif isinstance(p, Int | Float):
                lo, hi, x = float(p.low), float(p.high), float(v)
                log = p.log or (isinstance(p, Int) and p.power_of_two)
                if log and lo > 0:
                    lo, hi, x = math.log(lo), math.log(hi), math.log(max(x, p.low))
                out.append(min(1.0, max(0.0, (x - lo) / (hi - lo))) if hi > lo else 0.5)
        return out


class StructuredSearcher(Searcher):
    """Space-filling start, then an additive-plus-joint GP on log(objective) with learned feasibility.

    ``n_initial_points``: configurations of the maximin design before the model (at least 1; the
    model also waits for two feasible trials). ``n_candidates``: random untried configurations
    scored per ask when the space is too large (or infinite) to score every untried one.
    """

    name = "structured"

    def __init__(
        self,
        space: Space,
        seed: int = 0,
        direction: Direction = "maximize",
        *,
        n_initial_points: int = 2,
        n_candidates: int = 2000,
    ) -> None:
        super().__init__(space, seed, direction)
        if not isinstance(n_initial_points, int) or n_initial_points < 1:
            raise ValueError(f"n_initial_points must be an integer >= 1, got {n_initial_points!r}")
        if n_candidates < 1:
            raise ValueError(f"n_candidates must be >= 1, got {n_candidates!r}")
        self.n_initial_points = n_initial_points
        self.n_candidates = n_candidates
        self.encoder = Encoder(space)

    def _candidates(self, rng: random.Random) -> list[dict[str, Value]]:
        size = self.space.size
        if size is not None and size <= SCORE_ALL_LIMIT:
            return self._untried_points() or []
        found: dict[tuple[Any, ...], dict[str, Value]] = {}
        for _ in range(self.n_candidates):
            p = self.space.sample(rng)
            if not self.is_seen(p):
                found.setdefault(self.space.key(p), p)
        return list(found.values())

    def _suggest(self) -> dict[str, Value]:
        rng = self._rng()
        usable = [o for o in self._history if self.space.contains(o.params) and not o.impossible]
        candidates = self._candidates(rng)
        if not candidates:
            return self._random_untried(rng)
        feasible = [o for o in usable if o.feasible and o.value is not None]
        if len(usable) < self.n_initial_points or len(feasible) < 2:
            return self._maximin(usable, candidates, rng)
        return self._model(usable, feasible, candidates)

    def _maximin(
        self, usable: list[Observation], candidates: list[dict[str, Value]], rng: random.Random
    ) -> dict[str, Value]:
        """The candidate farthest from every tried configuration (a seeded random one first)."""
        if not usable:
            return rng.choice(candidates)
        tried = [self.encoder.encode(o.params) for o in usable]

        def gap(p: dict[str, Value]) -> float:
            x = self.encoder.encode(p)
            return min(sum((a - b) ** 2 for a, b in zip(x, t, strict=True)) for t in tried)

        order = list(range(len(candidates)))
        rng.shuffle(order)  # ties broken by the seed
        return candidates[max(order, key=lambda i: gap(candidates[i]))]

    def _model(
        self, usable: list[Observation], feasible: list[Observation], candidates: list[dict[str, Value]]
    ) -> dict[str, Value]:
        import numpy as np

        enc = self.encoder
        xs = np.array([enc.encode(o.params) for o in feasible])
        values = np.array([float(o.value or 0.0) for o in feasible])
        sign = 1.0 if self.direction == "maximize" else -1.0
        y = sign * (np.log(values) if np.all(values > 0) else values)
        mean, std = y.mean(), y.std() or 1.0
        y = (y - mean) / std
        cand = np.array([enc.encode(p) for p in candidates])

        def kernel(a: Any, b: Any, scale: float, additive: float) -> Any:
            d2 = ((a[:, None, :] - b[None, :, :]) ** 2) / scale**2
            joint = np.exp(-0.5 * d2.sum(-1))
            if additive == 0.0:
                return joint
            parts = sum(np.exp(-0.5 * d2[:, :, g].sum(-1)) for g in enc.groups) / len(enc.groups)
            return (1 - additive) * joint + additive * parts

        noise = 1e-3
        best_fit: tuple[float, Any, float, float] | None = None
        for scale in _LENGTH_SCALES:
            for additive in _ADDITIVE:
                k = kernel(xs, xs, scale, additive) + noise * np.eye(len(xs))
                try:
                    chol = np.linalg.cholesky(k)
                except np.linalg.LinAlgError:
                    continue
                alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, y))
                evidence = -0.5 * y @ alpha - np.log(np.diag(chol)).sum()
                if best_fit is None or evidence > best_fit[0]:
                    best_fit = (float(evidence), chol, scale, additive)
        assert best_fit is not None
        _, chol, scale, additive = best_fit
        alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, y))
        ks = kernel(cand, xs, scale, additive)
        mu = ks @ alpha
        v = np.linalg.solve(chol, ks.T)
        sigma = np.sqrt(np.clip(1.0 - (v**2).sum(0), 1e-12, None))
        z = (mu - y.max()) / sigma
        cdf = 0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))
        pdf = np.exp(-0.5 * z**2) / math.sqrt(2 * math.pi)
        ei = sigma * (z * cdf + pdf)
        # feasibility: kernel-weighted share of feasible trials nearby, with a prior of one each way
        if len(feasible) < len(usable):
            xu = np.array([enc.encode(o.params) for o in usable])
            ok = np.array([1.0 if o.feasible and o.value is not None else 0.0 for o in usable])
            w = kernel(cand, xu, scale / 2, 0.0)
            p_ok = (w @ ok + 0.5) / (w.sum(1) + 1.0)
            ei = ei * p_ok
        return candidates[int(np.argmax(ei))]
