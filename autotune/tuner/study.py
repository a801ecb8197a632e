"""``Study``: run trials of an objective with a searcher, keep every outcome, resume from storage.

The objective is any callable of a params dict: in-process here, and later a trial runner that
starts the user's script in its own process. It returns a number, or a dict of metrics holding the
objective; it raises ``Infeasible`` for a configuration that cannot run (out of memory...); any
other exception marks the trial "crashed". Either way the study goes on.

With ``storage`` every finished trial is written durably (a run store's ``run.db`` or a JSON
Lines file, see :mod:`autotune.tuner.storage`); a new ``Study`` on the same storage replays those
trials into the searcher and continues.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from autotune.tuner.params import is_number
from autotune.tuner.records import INFEASIBLE_STATUSES, Infeasible, Measured, Trial
from autotune.tuner.searchers import Direction, Searcher, make_searcher
from autotune.tuner.space import Space, Value
from autotune.tuner.storage import JsonlStorage, SqliteStorage, TrialStorage, open_storage
from profilers.contract.schema import STATUSES

log = logging.getLogger(__name__)

__all__ = [
    "INFEASIBLE_STATUSES",
    "STATUSES",
    "Infeasible",
    "JsonlStorage",
    "Measured",
    "SqliteStorage",
    "Study",
    "Trial",
    "TrialStorage",
]

Objective = Callable[[dict[str, Value]], "float | Mapping[str, float | None] | Measured"]


class Study:
    """A search for the configuration of ``space`` that maximizes (or minimizes) an objective.

    ``searcher``: "bayes", "random", "grid" or a ``Searcher`` built on the same space (its own
    seed then applies). ``objective``: the key of the objective when the function returns a dict
    of metrics. ``storage``: a path (``*.db``: SQLite run store, else JSON Lines) or a
    ``TrialStorage`` to persist trials to and resume from; resuming checks that the space,
    direction and objective are the same. ``info``: JSON facts stored with the study the first
    time (``stored_info`` gives back what was stored, also on resume).
    """

    def __init__(
        self,
        space: Space,
        direction: Direction = "maximize",
        searcher: str | Searcher = "bayes",
        seed: int = 0,
        storage: str | os.PathLike[str] | TrialStorage | None = None,
        objective: str = "objective",
        info: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(space, Space):
            raise ValueError(f"space must be an autotune.Space, got {type(space).__name__}")
        if direction not in ("maximize", "minimize"):
            raise ValueError(f"direction must be 'maximize' or 'minimize', got {direction!r}")
        self.space = space
        self.direction: Direction = direction
        self.objective = objective
        if isinstance(searcher, Searcher):
            if searcher.space != space or searcher.direction != direction:
                raise ValueError("the searcher was built for another space or direction than the study's")
            self.searcher = searcher
        else:
            self.searcher = make_searcher(searcher, space, seed, direction)
        self._trials: list[Trial] = []
        self._queue: list[dict[str, Value]] = []
        self._info = dict(info or {})
        self.stored_info: dict[str, Any] = dict(self._info)
        self.storage: TrialStorage | None
        if isinstance(storage, str | os.PathLike):
            self.storage = open_storage(storage)
        else:
            self.storage = storage
        if self.storage is not None:
            self._resume(self.storage)

    # ------------------------------------------------------------------ state

    @property
    def trials(self) -> list[Trial]:
        """Every finished trial, in order (resumed ones included)."""
        return list(self._trials)

    @property
    def n_run(self) -> int:
        """Trials that ran (every trial but the "skipped" ones): what ``n_trials`` counts."""
        return sum(t.status != "skipped" for t in self._trials)

    @property
    def best(self) -> Trial:
        """The "ok" trial with the best value (the first of equals); ValueError if there is none."""
        ok = [t for t in self._trials if t.ok and t.value is not None]
        if not ok:
            counts = {s: sum(t.status == s for t in self._trials) for s in STATUSES}
            summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no trials yet"
            first_error = next((t.error for t in self._trials if t.error), None)
            detail = f"; first error: {first_error}" if first_error else ""
            raise ValueError(f"no trial finished ok ({summary}){detail}")
        sign = 1.0 if self.direction == "maximize" else -1.0
        return max(ok, key=lambda t: sign * t.value)  # type: ignore[operator]

    def enqueue(self, params: Mapping[str, Value]) -> None:
        """Evaluate ``params`` before asking the searcher (e.g. a baseline with the user's defaults).

        Skipped if a finished trial already has exactly these params (a resumed study). Values
        may lie outside the space's bounds; the Bayesian model then leaves that trial out.
        """
        self.space.check_names(params)
        for name, v in params.items():
            if not isinstance(v, str | int | float) or (isinstance(v, float) and not math.isfinite(v)):
                raise ValueError(f"enqueued {name}={v!r}: values are str, int, finite float or bool")
        self._queue.append(dict(params))

    # ------------------------------------------------------------------ running

    def optimize(
        self,
        fn: Objective,
        n_trials: int,
        callbacks: Sequence[Callable[[Study, Trial], None]] = (),
    ) -> None:
        """Run trials until the study holds ``n_trials`` trials that ran.

        Resumed trials count; trials the objective skipped without running do not. Stops early
        when the searcher has tried every configuration, or after more than ``max(n_trials, 10)``
        skips in a row.
        ``callbacks`` are called with the study and each new trial once it is recorded (progress).
        """
        if not isinstance(n_trials, int) or n_trials < 0:
            raise ValueError(f"n_trials must be an integer >= 0, got {n_trials!r}")
        skips_in_a_row = 0
        while self.n_run < n_trials and skips_in_a_row <= max(n_trials, 10):
            params = self._next_params()
            if params is None:
                log.info("every configuration has been tried after %d trials", len(self._trials))
                break
            trial = self._evaluate(fn, self.next_id, params)
            self.record(trial)
            skips_in_a_row = skips_in_a_row + 1 if trial.status == "skipped" else 0
            for callback in callbacks:
                callback(self, trial)

    @property
    def next_id(self) -> int:
        """The id the next trial gets (one more than the last stored)."""
        return self._trials[-1].id + 1 if self._trials else 0

    def _next_params(self) -> dict[str, Value] | None:
        while self._queue:
            params = self._queue.pop(0)
            if not any(t.params == params for t in self._trials):
                return params
        return None if self.searcher.done else self.searcher.ask()

    def _evaluate(self, fn: Objective, trial_id: int, params: dict[str, Value]) -> Trial:
        """Call ``fn`` once and turn its outcome (value, metrics, or exception) into a Trial."""
        value: float | None = None
        metrics: dict[str, float | None] = {}
        attrs: dict[str, Any] = {}
        status, error = "ok", None
        start = time.perf_counter()
        try:
            result = fn(dict(params))
        except Infeasible as exc:
            status, error, attrs = exc.status, exc.reason, exc.attrs
        except Exception as exc:
            status, error = "crashed", f"{type(exc).__name__}: {exc}"
        else:
            if isinstance(result, Measured):
                attrs, result = dict(result.attrs), result.metrics
            try:
                value, metrics = self._parse_result(result)
            except ValueError as exc:
                status, error = "crashed", str(exc)
            else:
                if not math.isfinite(value):
                    status, error, value = "diverged", f"the objective is {value}", None
        duration_s = time.perf_counter() - start
        if status == "crashed":
            log.warning("trial %d crashed: %s", trial_id, error)
        return Trial(trial_id, params, status, value, metrics, duration_s, error, _json_safe(attrs))

    def _parse_result(self, result: object) -> tuple[float, dict[str, float | None]]:
        """(objective value, metrics) from what the objective returned; ValueError if malformed."""
        if is_number(result):
            return float(result), {self.objective: float(result)}  # type: ignore[arg-type]
        if not isinstance(result, Mapping):
            raise ValueError(
                f"the objective must return a number or a dict of metrics, got {type(result).__name__}"
            )
        if self.objective not in result:
            raise ValueError(
                f"the metrics returned have no {self.objective!r} (the study's objective); "
                f"keys: {sorted(map(str, result))}"
            )
        metrics: dict[str, float | None] = {}
        for key, v in result.items():
            if v is not None and not is_number(v):
                raise ValueError(f"metric {key!r} must be a number, got {type(v).__name__} {v!r}")
            metrics[str(key)] = None if v is None or not math.isfinite(v) else float(v)
        value = result[self.objective]
        if value is None:
            raise ValueError(f"the objective {self.objective!r} is None")
        return float(value), metrics

    def record(self, trial: Trial) -> None:
        """Store a finished trial and tell the searcher.

        For trials run outside ``optimize`` too, such as a baseline. Its id must be ``next_id``.
        """
        if trial.id != self.next_id:
            raise ValueError(f"trial id {trial.id} out of order: the next id is {self.next_id}")
        if self.storage is not None:
            self.storage.append(trial)
        self._trials.append(trial)
        observation = trial.observation()
        if observation is not None:
            self.searcher.tell(*observation)

    # ------------------------------------------------------------------ storage

    def _meta(self) -> dict[str, Any]:
        return {
            "space": self.space.to_dict(),
            "direction": self.direction,
            "objective": self.objective,
            "searcher": self.searcher.name,
            "seed": self.searcher.seed,
            "info": self._info,
        }

    def _resume(self, storage: TrialStorage) -> None:
        meta, trials = storage.read()
        if meta is None:
            if trials:
                raise ValueError("the storage holds trials but no study record; not resuming")
            storage.write_meta(self._meta())
            return
        mine = json.loads(json.dumps(self._meta()))
        for key in ("direction", "objective"):
            if meta.get(key) != mine[key]:
                raise ValueError(f"the stored study has {key} {meta.get(key)!r}, this one {mine[key]!r}")
        if _search_part(meta.get("space")) != _search_part(mine["space"]):
            raise ValueError(
                f"the stored study searched another space: {meta.get('space')!r}; this one {mine['space']!r}"
            )
        self._trials = trials
        self.stored_info = dict(meta.get("info") or {})
        self.searcher.replay(o for t in trials if (o := t.observation()) is not None)


def _json_safe(value: Any) -> Any:
    """``value`` with non-finite floats as None, so every store can write it as JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def _search_part(space: object) -> object:
    """A serialised space without its delivery fields (``arg``/``env`` do not change the search)."""
    if not isinstance(space, dict):
        return space
    return {n: {k: v for k, v in t.items() if k not in ("arg", "env")} for n, t in space.items()}
