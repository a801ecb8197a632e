"""A searcher for training knobs: few trials on smooth, log-scaled, mostly separable landscapes.

Throughput and cost over batch size are smooth and mostly unimodal in log scale, with a cliff where
memory runs out; precision and layout are categorical with large, mostly separable effects. So:

- each parameter becomes features in [0, 1]: an ``Int``/``Float`` by its position (log-scaled when
  ``log`` or ``power_of_two``), a ``Choice`` of numbers or sizes ("760m", "7b") by its rank among
  them (an ordinal knob: a GPU count, a sequence length, a model size), any other ``Choice`` one-hot;
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
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from autotune.search.params import Choice, Float, Int
from autotune.search.prior import Prior, best_predicted
from autotune.search.searchers import ENUMERATE_LIMIT, Direction, Observation, Searcher, derive_seed
from autotune.search.space import Space, Value

#: Length scales (in the unit features) and additive weights tried by marginal likelihood.
_LENGTH_SCALES = (0.25, 0.5, 1.0)
_ADDITIVE = (0.0, 0.5, 0.9)
#: An ``Int`` with more values than this is moved along a grid of ``_GRID_LEVELS`` levels.
_MAX_LEVELS = 64
_GRID_LEVELS = 9
_BATCH_NAME = re.compile(r"batch", re.IGNORECASE)
_PRECISION_NAME = re.compile(r"precision|dtype|amp|mixed", re.IGNORECASE)
#: The order of the coordinate moves, by (ordered, role).
_ORDER = [(False, None), (True, None), (True, "batch"), (False, "precision")]
_REDUCED = re.compile(r"16|half|mixed|amp", re.IGNORECASE)


#: A size written with an SI suffix ("760m", "7b", "16k"): an ordered level, as a number is.
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgbt]?)\s*$", re.IGNORECASE | re.ASCII)
_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "b": 1e9, "t": 1e12}


def magnitude(value: Any) -> float | None:
    """``value`` as a number: itself, or a size with an SI suffix ("760m", "7b"); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    match = _SIZE.match(value) if isinstance(value, str) else None
    return float(match[1]) * _SUFFIX[match[2].lower()] if match else None


def ordered_levels(values: Iterable[Any]) -> tuple[Any, ...] | None:
    """The values in increasing magnitude when each is a number or a size, else None.

    Such a knob is ordered: a GPU count, a sequence length, a model size ("760m", "7b").
    """
    values = tuple(values)
    sizes = [magnitude(v) for v in values]
    if any(size is None for size in sizes):
        return None
    order = sorted(range(len(values)), key=lambda i: sizes[i] or 0.0)
    return tuple(values[i] for i in order)


def _by_magnitude(value: Any) -> float:
    size = magnitude(value)
    assert size is not None
    return size


class Encoder:
    """Configurations as feature vectors in [0, 1], and which features belong to which parameter."""

    def __init__(self, space: Space) -> None:
        self.space = space
        self.groups: list[list[int]] = []
        #: A choice of numbers or sizes: each value's rank among them, in [0, 1].
        self.ranks: dict[str, dict[Any, float]] = {}
        width = 0
        for name, p in space.params.items():
            levels = ordered_levels(p.choices) if isinstance(p, Choice) else None
            if levels is not None:
                self.ranks[name] = {v: i / max(1, len(levels) - 1) for i, v in enumerate(levels)}
            n = len(p.choices) if isinstance(p, Choice) and levels is None else 1
            self.groups.append(list(range(width, width + n)))
            width += n
        self.width = width

    def encode(self, params: dict[str, Value]) -> list[float]:
        """``params`` as features in [0, 1], in parameter order (one-hot for a non-numeric choice)."""
        out: list[float] = []
        for name, p in self.space.params.items():
            v = params[name]
            if isinstance(p, Choice):
                if name in self.ranks:
                    out.append(self.ranks[name][v])
                else:
                    out.extend(1.0 if i == p.index(v) else 0.0 for i in range(len(p.choices)))
            elif isinstance(p, Int | Float):
                lo, hi, x = float(p.low), float(p.high), float(v)
                log = p.log or (isinstance(p, Int) and p.power_of_two)
                if log and lo > 0:
                    lo, hi, x = math.log(lo), math.log(hi), math.log(max(x, p.low))
                out.append(min(1.0, max(0.0, (x - lo) / (hi - lo))) if hi > lo else 0.5)
        return out


class Knob(NamedTuple):
    """One parameter as the start design sees it.

    ``levels``: its values in increasing order when ``ordered`` (an ``Int``, a ``Float`` as a
    grid, a ``Choice`` of numbers), else in declaration order; ``role``: ``"batch"`` (a batch-size
    knob: largest first), ``"precision"`` (a precision knob: reduced precision first) or None.
    """

    name: str
    levels: tuple[Value, ...]
    ordered: bool
    role: str | None


def knobs(space: Space) -> list[Knob]:
    """The space's parameters as :class:`Knob`, in the space's order."""
    out = []
    for name, p in space.params.items():
        precision = isinstance(p, Choice) and bool(_PRECISION_NAME.search(name) and _preferred(p.choices))
        ordered = ordered_levels(p.choices) if isinstance(p, Choice) else None
        if isinstance(p, Choice) and (precision or ordered is None):  # "16" and "32" too
            levels: tuple[Value, ...] = tuple(p.choices)
            out.append(Knob(name, levels, False, "precision" if precision else None))
            continue
        if ordered is not None:
            levels = ordered
        elif isinstance(p, Int) and p.size <= _MAX_LEVELS:
            levels = tuple(p.values())
        else:
            levels = tuple(p.grid(_GRID_LEVELS))
        role = "batch" if _BATCH_NAME.search(name) and len(levels) > 1 else None
        out.append(Knob(name, levels, True, role))
    return out


def _preferred(levels: tuple[Value, ...]) -> list[Value]:
    """A precision knob's values, fastest first: bf16, then other reduced precisions, then the rest."""

    def rank(v: Value) -> int:
        text = str(v).lower()
        if "bf16" in text:
            return 0
        if _REDUCED.search(text) or v is True:
            return 1
        return 3 if v is False or "32" in text or "full" in text else 2

    return sorted(levels, key=rank) if any(rank(v) < 2 for v in levels) else []


class StructuredSearcher(Searcher):
    """A start from what holds for training knobs, coordinate moves, then a GP with learned feasibility.

    1. The first configuration puts each batch-size knob (a name with "batch") at its largest value
       (throughput per device grows with the batch up to the memory cliff), each precision knob at
       reduced precision (bf16 first), every other ordered knob at its middle level and every other
       categorical knob at a seeded choice. While no trial has been feasible, the next steps the
       batch knobs down one level per failure (the memory cliff), as Lightning's batch-size finder
       does from the other side.
    2. Coordinate moves around the incumbent (the best feasible trial): one knob at a time, first
       the knobs the start knew nothing about (categorical, then ordered), then batch, then
       precision, change that knob alone to an untried level (a seeded one for a categorical; for
       an ordered one the level farthest along that line, then, as a golden-section search, the
       middle of the wider open interval between the best level and the nearest ones tried on
       either side, until none is left). Memory changes with the other knobs, so
       a move also lifts each batch knob halfway up to the largest level not known to fail there;
       a batch knob itself bisects upward below its lowest failure, else steps down once. A better
       result moves the incumbent and opens every knob again.
    3. Once every knob has been moved around the incumbent: a Gaussian process on log(objective)
       with a joint + additive kernel (length scale and mixing by marginal likelihood); the next
       configuration maximises expected improvement times the probability of being feasible,
       learned from the out-of-memory trials by a kernel-weighted model.

    ``start``: ``"roles"`` (1–2 above) or ``"maximin"`` (a seeded space-filling start of
    ``n_initial_points``, then 3: the previous design). ``n_candidates``: random untried
    configurations scored per ask when the space is too large to score every untried one.
    ``prior``: a prediction of each configuration's objective (the plan's, as
    :class:`~autotune.search.searchers.BayesSearcher` takes it): its best configuration is asked
    first, once, and the search goes on from what it measured.
    """

    name = "structured"

    def __init__(
        self,
        space: Space,
        seed: int = 0,
        direction: Direction = "maximize",
        *,
        start: str = "roles",
        n_initial_points: int = 2,
        n_candidates: int = 2000,
        prior: Prior | None = None,
    ) -> None:
        super().__init__(space, seed, direction)
        if start not in ("roles", "maximin"):
            raise ValueError(f"start must be 'roles' or 'maximin', got {start!r}")
        if not isinstance(n_initial_points, int) or n_initial_points < 1:
            raise ValueError(f"n_initial_points must be an integer >= 1, got {n_initial_points!r}")
        if n_candidates < 1:
            raise ValueError(f"n_candidates must be >= 1, got {n_candidates!r}")
        self.start = start
        self.n_initial_points = n_initial_points
        self.n_candidates = n_candidates
        self.encoder = Encoder(space)
        self.knobs = knobs(space)
        self.prior = prior
        self._pick: tuple[Prior, dict[str, Value] | None] | None = None  # the prior's pick, once

    def _suggest(self) -> dict[str, Value]:
        rng = self._rng()
        usable = [o for o in self._history if self.space.contains(o.params) and not o.impossible]
        feasible = [o for o in usable if o.feasible and o.value is not None]
        if self.prior is not None:  # the prediction's best configuration, asked once, first
            pick = self._predicted_best()
            if pick is not None and not self.is_seen(pick):
                return pick
        if self.start == "roles":
            planned = self._planned(usable, feasible, rng)
            if planned is not None and not self.is_seen(planned):  # never a configuration twice
                return planned
        candidates = self._candidates(rng, self.n_candidates)
        if not candidates:
            return self._random_untried(rng)
        if len(feasible) < 2 or (self.start == "maximin" and len(usable) < self.n_initial_points):
            return self._maximin(usable, candidates, rng)
        return self._model(usable, feasible, candidates)

    # ------------------------------------------------------------------ start and coordinate moves

    def anchor(self) -> dict[str, Value]:
        """The first configuration (see the class docstring); a function of the seed only."""
        rng = random.Random(derive_seed(self.name, self.seed, "anchor"))
        params: dict[str, Value] = {}
        for k in self.knobs:
            if k.role == "batch":
                params[k.name] = k.levels[-1]
            elif k.role == "precision":
                params[k.name] = _preferred(k.levels)[0]
            elif k.ordered:  # the upper middle level
                params[k.name] = k.levels[len(k.levels) // 2]
            else:
                params[k.name] = rng.choice(k.levels)
        return params

    def _planned(
        self, usable: list[Observation], feasible: list[Observation], rng: random.Random
    ) -> dict[str, Value] | None:
        """The start or the next coordinate move, or None when the model takes over."""
        if not feasible:
            params = self.anchor()
            for k in self.knobs:
                if k.role == "batch":  # bisect (in levels) between the smallest and the failures
                    tops = [_level(k, o.params[k.name]) for o in usable]
                    params[k.name] = k.levels[min([len(k.levels) - 1, *tops]) // 2 if usable else -1]
            if not usable or any(k.role == "batch" for k in self.knobs):
                return None if self.is_seen(params) else params
            return None
        incumbent = self._incumbent(feasible).params
        order = sorted(range(len(self.knobs)), key=lambda i: _ORDER.index(self.knobs[i][2:]))
        batch = [k for k in self.knobs if k.role == "batch"]
        for i in order:
            k = self.knobs[i]
            options = [
                v for v in k.levels if v != incumbent[k.name] and not self._seen_with(incumbent, k.name, v)
            ]
            if k.role == "batch":  # up to the cliff first (bisecting), then one step down once
                line = [o for o in usable if _differs_in(o.params, incumbent, k.name, {k.name})]
                here = _level(k, incumbent[k.name])
                cliff = min([len(k.levels), *(_level(k, o.params[k.name]) for o in line if not o.feasible)])
                up = [v for v in options if here < _level(k, v) < cliff]
                if up:  # the untried level nearest the middle between here and the highest one open
                    middle = (here + max(_level(k, v) for v in up) + 1) // 2
                    return {
                        **incumbent,
                        k.name: min(up, key=lambda v: (abs(_level(k, v) - middle), _level(k, v))),
                    }
                if any(o.feasible for o in line):
                    continue
            else:
                loose = {k.name, *(b.name for b in batch)}
                line = [o for o in usable if _differs_in(o.params, incumbent, k.name, loose)]
                if line:  # moved around the incumbent: an ordered knob bisects toward its peak
                    between = _bracketed(k, incumbent[k.name], line, options) if k.ordered else None
                    if between is None:
                        continue
                    options = [between]
            if not options:
                continue
            move = {**incumbent, k.name: self._move(k, incumbent[k.name], options, rng)}
            if k.role != "batch":  # memory changes with the knob: a larger batch not known to fail
                lifted = dict(move)
                for b in batch:
                    lifted[b.name] = _lifted(b, lifted, usable)
                if not self.is_seen(lifted):
                    return lifted
            return move
        return None

    def _predicted_best(self) -> dict[str, Value] | None:
        """The configuration ``prior`` predicts best, worked out once per prior and kept.

        Of the whole space when it can be listed, else of ``n_candidates`` draws seeded by the seed
        alone: one pick, whatever was told since (a function of the seed and the prior only).
        """
        prior = self.prior
        assert prior is not None
        if self._pick is not None and self._pick[0] is prior:
            return self._pick[1]
        size = self.space.size
        if size is not None and size <= ENUMERATE_LIMIT:
            pool = list(self.space.points())
        else:
            draws = random.Random(derive_seed(self.name, self.seed, "prior"))
            pool = [self.space.sample(draws) for _ in range(self.n_candidates)]
        found = best_predicted(prior, pool, self.direction == "maximize")
        self._pick = (prior, None if found is None else dict(found))
        return self._pick[1]

    def _move(self, k: Knob, current: Value, options: list[Value], rng: random.Random) -> Value:
        if k.role == "precision":
            ranked = _preferred(k.levels)
            return min(options, key=ranked.index)
        if not k.ordered:
            return rng.choice(options)
        pos = {v: i for i, v in enumerate(k.levels)}
        here = _level(k, current)
        if k.role == "batch":  # one step down
            return min(options, key=lambda v: (pos[v] > here, abs(pos[v] - here)))
        return max(options, key=lambda v: (abs(pos[v] - here), pos[v]))

    def _seen_with(self, params: dict[str, Value], name: str, value: Value) -> bool:
        return self.is_seen({**params, name: value})

    def _incumbent(self, feasible: list[Observation]) -> Observation:
        sign = 1.0 if self.direction == "maximize" else -1.0
        return max(feasible, key=lambda o: sign * float(o.value or 0.0))

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


def _level(knob: Knob, value: Value) -> int:
    """The position of ``value`` among an ordered knob's levels (the nearest one, off the grid)."""
    if value in knob.levels:
        return knob.levels.index(value)
    x = _by_magnitude(value)
    return min(range(len(knob.levels)), key=lambda i: abs(_by_magnitude(knob.levels[i]) - x))


def _bracketed(knob: Knob, value: Value, line: list[Observation], options: list[Value]) -> Value | None:
    """The next level of a line search along an ordered knob, or None when it has settled.

    Mostly unimodal along the knob: the incumbent's peak lies between the nearest levels tried
    on either side of it (the range's ends where a side has none), so the next level is the
    middle of the larger of those two open intervals (as a golden-section search probes), among
    ``options`` (the levels not tried with the incumbent's other values).
    """
    here = _level(knob, value)
    tried = {_level(knob, o.params[knob.name]) for o in line}
    below = max([-1, *(t for t in tried if t < here)])
    above = min([len(knob.levels), *(t for t in tried if t > here)])
    open_levels = {_level(knob, v) for v in options}
    sides = [
        [i for i in range(below + 1, here) if i in open_levels],
        [i for i in range(here + 1, above) if i in open_levels],
    ]
    wider = max(sides, key=len)
    return knob.levels[wider[len(wider) // 2]] if wider else None


def _differs_in(a: dict[str, Value], b: dict[str, Value], name: str, loose: set[str]) -> bool:
    """Whether ``a`` differs from ``b`` in ``name`` and, besides, at most in ``loose``."""
    return a[name] != b[name] and all(a[n] == b[n] for n in b if n not in loose)


def _lifted(knob: Knob, params: dict[str, Value], usable: list[Observation]) -> Value:
    """A batch knob's level for ``params`` after another knob moved (memory changed with it).

    Halfway (in levels) from its level up to the largest level below every failure seen with
    ``params``' other values.
    """
    failed = [
        _level(knob, o.params[knob.name])
        for o in usable
        if not o.feasible and all(o.params[n] == v for n, v in params.items() if n != knob.name)
    ]
    here = _level(knob, params[knob.name])
    top = min([len(knob.levels), *failed]) - 1
    return knob.levels[(here + top + 1) // 2] if top > here else params[knob.name]
