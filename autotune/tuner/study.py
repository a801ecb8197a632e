"""``Study``: run trials of an objective with a searcher, keep every outcome, resume from storage.

The objective is any callable of a params dict: in-process here, and later a trial runner that
starts the user's script in its own process. It returns a number, or a dict of metrics holding the
objective; it raises ``Infeasible`` for a configuration that cannot run (out of memory...); any
other exception marks the trial "crashed". Either way the study goes on.

With ``storage`` every finished trial is appended to a JSON Lines file (flushed and fsync'd); a new
``Study`` on the same file replays those trials into the searcher and continues. Storage sits
behind ``TrialStorage`` (three methods) so the run store can take its place.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from autotune.tuner.searchers import Direction, Observation, Searcher, make_searcher
from autotune.tuner.space import Space, Value

log = logging.getLogger(__name__)

STORAGE_SCHEMA = 1
#: Statuses of a trial; all but "ok" are told to the searcher as infeasible.
STATUSES = ("ok", "infeasible", "oom", "timeout", "diverged", "crashed")
#: Statuses an ``Infeasible`` exception may carry (a trial runner will raise the specific ones).
INFEASIBLE_STATUSES = ("infeasible", "oom", "timeout", "diverged")

Objective = Callable[[dict[str, Value]], "float | Mapping[str, float | None]"]


class Infeasible(Exception):
    """Raised by an objective for a configuration that cannot run (e.g. it runs out of memory).

    The trial is recorded with ``status`` ("infeasible" by default; a trial runner may say "oom",
    "timeout" or "diverged") and ``reason`` as its error, the searcher learns to avoid the
    region, and the study goes on.
    """

    def __init__(self, reason: str, status: str = "infeasible") -> None:
        if status not in INFEASIBLE_STATUSES:
            raise ValueError(f"status must be one of {INFEASIBLE_STATUSES}, got {status!r}")
        super().__init__(reason)
        self.reason = reason
        self.status = status


@dataclass(frozen=True)
class Trial:
    """One finished trial.

    ``value`` is the objective (None unless ``status`` is "ok"); ``metrics`` everything the
    objective returned (the objective included; non-finite numbers stored as None);
    ``duration_s`` the wall-clock seconds of the call; ``error`` why a trial was not "ok".
    """

    id: int
    params: dict[str, Value]
    status: str
    value: float | None
    metrics: dict[str, float | None]
    duration_s: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the trial produced an objective value."""
        return self.status == "ok"

    def observation(self) -> Observation:
        """The trial as its searcher sees it (every status but "ok" counts as infeasible)."""
        return Observation(dict(self.params), self.value, self.ok)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``from_dict`` reads it back)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trial:
        """A trial from ``to_dict()`` output; ValueError if a field is missing or malformed."""
        try:
            trial = cls(
                id=int(data["id"]),
                params=dict(data["params"]),
                status=str(data["status"]),
                value=None if data["value"] is None else float(data["value"]),
                metrics=dict(data["metrics"]),
                duration_s=float(data["duration_s"]),
                error=data.get("error"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed trial record ({type(exc).__name__}: {exc})") from None
        if trial.status not in STATUSES or (trial.ok and trial.value is None):
            raise ValueError(f"malformed trial record (status {trial.status!r}, value {trial.value!r})")
        return trial


class TrialStorage(Protocol):
    """Where a study keeps its metadata and finished trials (JSON Lines now, the run store later)."""

    def read(self) -> tuple[dict[str, Any] | None, list[Trial]]:
        """The study metadata (None for a new store) and every finished trial, in order."""
        ...

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Record the study metadata once, when the store is new."""
        ...

    def append(self, trial: Trial) -> None:
        """Persist one finished trial durably before returning."""
        ...


class JsonlStorage:
    """A JSON Lines file: one ``{"record": "study", ...}`` line, then one ``{"record": "trial"}`` each.

    Every line is written whole, flushed and fsync'd. A last line cut short (the tuner was killed
    mid-write) is ignored with a warning and cut off before the next write; a damaged line before
    the last is an error, since trials would be lost silently.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._cut_at: int | None = None  # byte offset of a damaged tail to cut before the next write
        self._add_newline = False  # the last line is intact but lacks its line end

    def read(self) -> tuple[dict[str, Any] | None, list[Trial]]:
        """The study metadata and trials in the file (None and [] when it does not exist)."""
        self._cut_at, self._add_newline = None, False
        if not self.path.exists():
            return None, []
        chunks = self.path.read_bytes().split(b"\n")
        lines = [(raw, True) for raw in chunks[:-1]] + ([(chunks[-1], False)] if chunks[-1] else [])
        meta: dict[str, Any] | None = None
        trials: list[Trial] = []
        offset = 0
        for number, (raw, has_end) in enumerate(lines, start=1):
            try:
                record = json.loads(raw) if raw.strip() else None
                if record is None:
                    pass
                elif not isinstance(record, dict) or record.get("record") not in ("study", "trial"):
                    raise ValueError("not a study or trial record")
                elif record["record"] == "study":
                    meta = record
                else:
                    trials.append(Trial.from_dict(record))
            except ValueError as exc:  # json.JSONDecodeError is a ValueError
                if number < len(lines):
                    raise ValueError(f"{self.path}: line {number} is damaged ({exc}); not resuming") from None
                warnings.warn(
                    f"{self.path}: ignoring a truncated last line (a write cut off, e.g. by kill -9): "
                    f"{raw[:60]!r}",
                    stacklevel=3,
                )
                self._cut_at = offset
                break
            offset += len(raw) + 1
            self._add_newline = not has_end
        if meta is not None and meta.get("schema") != STORAGE_SCHEMA:
            raise ValueError(f"{self.path}: storage schema {meta.get('schema')!r}, expected {STORAGE_SCHEMA}")
        return meta, trials

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Write the study line (before any trial)."""
        self._write({"record": "study", "schema": STORAGE_SCHEMA, **meta})

    def append(self, trial: Trial) -> None:
        """Append one trial line, fsync'd."""
        self._write({"record": "trial", **trial.to_dict()})

    def _write(self, record: Mapping[str, Any]) -> None:
        line = (json.dumps(record, allow_nan=False) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as f:
            if self._cut_at is not None:
                f.truncate(self._cut_at)
            elif self._add_newline:
                f.write(b"\n")
            self._cut_at, self._add_newline = None, False
            f.write(line)
            f.flush()
            os.fsync(f.fileno())


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


class Study:
    """A search for the configuration of ``space`` that maximizes (or minimizes) an objective.

    ``searcher``: "bayes", "random", "grid" or a ``Searcher`` built on the same space (its own
    seed then applies). ``objective``: the key of the objective when the function returns a dict
    of metrics. ``storage``: a JSON Lines path (or a ``TrialStorage``) to persist trials to and
    resume from; resuming checks that the space, direction and objective are the same.
    """

    def __init__(
        self,
        space: Space,
        direction: Direction = "maximize",
        searcher: str | Searcher = "bayes",
        seed: int = 0,
        storage: str | os.PathLike[str] | TrialStorage | None = None,
        objective: str = "objective",
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
        self.storage: TrialStorage | None
        if isinstance(storage, str | os.PathLike):
            self.storage = JsonlStorage(storage)
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
        """Run trials until the study holds ``n_trials`` in all (resumed trials count).

        Stops early when the searcher has tried every configuration. ``callbacks`` are called
        with the study and each new trial once it is recorded (progress display).
        """
        if not isinstance(n_trials, int) or n_trials < 0:
            raise ValueError(f"n_trials must be an integer >= 0, got {n_trials!r}")
        while len(self._trials) < n_trials:
            params = self._next_params()
            if params is None:
                log.info("every configuration has been tried after %d trials", len(self._trials))
                break
            trial_id = self._trials[-1].id + 1 if self._trials else 0
            trial = self._evaluate(fn, trial_id, params)
            self._record(trial)
            for callback in callbacks:
                callback(self, trial)

    def _next_params(self) -> dict[str, Value] | None:
        while self._queue:
            params = self._queue.pop(0)
            if not self.searcher.is_seen(params):
                return params
        return None if self.searcher.done else self.searcher.ask()

    def _evaluate(self, fn: Objective, trial_id: int, params: dict[str, Value]) -> Trial:
        """Call ``fn`` once and turn its outcome (value, metrics, or exception) into a Trial."""
        value: float | None = None
        metrics: dict[str, float | None] = {}
        status, error = "ok", None
        start = time.perf_counter()
        try:
            result = fn(dict(params))
        except Infeasible as exc:
            status, error = exc.status, exc.reason
        except Exception as exc:
            status, error = "crashed", f"{type(exc).__name__}: {exc}"
        else:
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
        return Trial(trial_id, params, status, value, metrics, duration_s, error)

    def _parse_result(self, result: object) -> tuple[float, dict[str, float | None]]:
        """(objective value, metrics) from what the objective returned; ValueError if malformed."""
        if _is_number(result):
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
            if v is not None and not _is_number(v):
                raise ValueError(f"metric {key!r} must be a number, got {type(v).__name__} {v!r}")
            metrics[str(key)] = None if v is None or not math.isfinite(v) else float(v)
        value = result[self.objective]
        if value is None:
            raise ValueError(f"the objective {self.objective!r} is None")
        return float(value), metrics

    def _record(self, trial: Trial) -> None:
        if self.storage is not None:
            self.storage.append(trial)
        self._trials.append(trial)
        self.searcher.tell(trial.params, trial.value, trial.ok)

    # ------------------------------------------------------------------ storage

    def _meta(self) -> dict[str, Any]:
        return {
            "space": self.space.to_dict(),
            "direction": self.direction,
            "objective": self.objective,
            "searcher": self.searcher.name,
            "seed": self.searcher.seed,
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
        self.searcher.replay(t.observation() for t in trials)


def _search_part(space: object) -> object:
    """A serialised space without its delivery fields (``arg``/``env`` do not change the search)."""
    if not isinstance(space, dict):
        return space
    return {n: {k: v for k, v in t.items() if k not in ("arg", "env")} for n, t in space.items()}
