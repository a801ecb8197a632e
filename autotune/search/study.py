"""``Study``: run trials of an objective with a searcher, keep every outcome, resume from storage.

The objective is any callable of a params dict: in-process here, and later a trial runner that
starts the user's script in its own process. It returns a number, or a dict of metrics holding the
objective; it raises ``Infeasible`` for a configuration that cannot run (out of memory...); any
other exception marks the trial "crashed". Either way the study goes on.

With ``storage`` every finished trial is written durably (a run store's ``run.db`` or a JSON
Lines file, see :mod:`autotune.search.storage`), and every trial is claimed there before it starts;
a new ``Study`` on the same storage replays the finished trials into the searcher, runs the
claimed ones that never finished again under their own ids, and continues.

``optimize(..., parallel=N)`` keeps up to N trials running at once, in worker threads, each
proposed while the others run (:meth:`Searcher.ask_pending`); trials are recorded as they end,
so the searcher's history is in the order they ended.
"""

from __future__ import annotations

import bisect
import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from autotune.search.params import is_number
from autotune.search.records import INFEASIBLE_STATUSES, Infeasible, Measured, StudyRecord, Trial
from autotune.search.registry import DEFAULT_SEARCHER, SEARCHERS, make_searcher
from autotune.search.searchers import Direction, Searcher, SearchExhausted
from autotune.search.space import Space, Value
from autotune.search.storage import (
    InfoStorage,
    JsonlStorage,
    SqliteStorage,
    TrialStorage,
    claim_store,
    open_storage,
)
from profilers.contract.json_checks import JsonObject
from profilers.contract.schema import STATUSES, TrialStatus

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

    ``searcher``: "structured", "bayes", "random", "grid" or a ``Searcher`` built on the same space
    (its own seed then applies); by default the one a resumed study was stored with, else
    "structured". ``objective``: the key of the objective when the
    function returns a dict of metrics. ``storage``: a path (``*.db``: SQLite run store, else JSON Lines) or a
    ``TrialStorage`` to persist trials to and resume from; resuming checks that the space,
    direction and objective are the same. ``info``: JSON facts stored with the study the first
    time (``stored_info`` gives back what was stored, also on resume).

    >>> from autotune import Choice, Space, Study
    >>> study = Study(Space(batch_size=Choice(8, 16, 32, 64)), searcher="grid")
    >>> study.optimize(lambda p: 1000 * p["batch_size"] / (p["batch_size"] + 16), n_trials=4)
    >>> study.best.params
    {'batch_size': 64}
    """

    def __init__(
        self,
        space: Space,
        direction: Direction = "maximize",
        searcher: str | Searcher | None = None,
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
        self.storage: TrialStorage | None
        if isinstance(storage, str | os.PathLike):
            self.storage = open_storage(storage)
        else:
            self.storage = storage
        stored = self.storage.read() if self.storage is not None else None  # read once, here
        if isinstance(searcher, Searcher):
            if searcher.space != space or searcher.direction != direction:
                raise ValueError("the searcher was built for another space or direction than the study's")
            self.searcher = searcher
        else:
            self.searcher = make_searcher(searcher or _stored_searcher(stored), space, seed, direction)
        self._trials: list[Trial] = []
        self._queue: list[dict[str, Value]] = []
        #: Trials started and not yet recorded, by id (this process's).
        self._running: dict[int, dict[str, Value]] = {}
        #: Trials a stopped study had claimed that never finished: run again first, under their ids.
        self.unfinished: dict[int, dict[str, Any]] = {}
        self._local = threading.local()
        self._info = dict(info or {})
        self.stored_info: JsonObject = dict(self._info)
        if self.storage is not None and stored is not None:
            self._resume(self.storage, *stored)

    # ------------------------------------------------------------------ state

    @property
    def trials(self) -> list[Trial]:
        """Every finished trial, in order (resumed ones included)."""
        return list(self._trials)

    @property
    def n_run(self) -> int:
        """Trials that ran (every trial but the "skipped" ones): what ``n_trials`` counts."""
        return sum(t.status != TrialStatus.SKIPPED for t in self._trials)

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
        parallel: int = 1,
        precheck: Callable[[dict[str, Value]], None] | None = None,
        on_abort: Callable[[], None] | None = None,
    ) -> None:
        """Run trials until the study holds ``n_trials`` trials that ran.

        Resumed trials count; trials the objective skipped without running do not. Stops early
        when the searcher has tried every configuration, or after more than ``max(n_trials, 10)``
        skips in a row.
        ``callbacks`` are called with the study and each new trial once it is recorded (progress).
        ``parallel``: up to that many trials at once, ``fn`` in worker threads (it must be
        thread-safe, as a runner that starts a process per trial is; :attr:`current_trial_id`
        tells it its trial). ``precheck``: called here with each configuration before it is
        claimed; an ``Infeasible`` it raises is recorded as the trial, without ``fn``.
        ``on_abort``: called when a callback or an interrupt ends the study while trials still
        run (to stop them), before this waits for them.
        """
        if not isinstance(n_trials, int) or n_trials < 0:
            raise ValueError(f"n_trials must be an integer >= 0, got {n_trials!r}")
        if not isinstance(parallel, int) or parallel < 1:
            raise ValueError(f"parallel must be an integer >= 1, got {parallel!r}")
        skips = [0]  # in a row
        running: dict[Future[Trial], int] = {}
        pool = ThreadPoolExecutor(parallel, thread_name_prefix="trial") if parallel > 1 else None
        try:
            while True:
                while len(running) < parallel and self.n_run + len(running) < n_trials:
                    if skips[0] > max(n_trials, 10):
                        break
                    nxt = self._next_trial()
                    if nxt is None:
                        log.info("every configuration has been tried after %d trials", len(self._trials))
                        break
                    trial_id, params = nxt
                    skipped = self._prechecked(precheck, trial_id, params)
                    if skipped is not None:
                        self._finish(skipped, callbacks, skips)
                        continue
                    self._claim(trial_id, params)
                    if pool is None:
                        self._finish(self._evaluate(fn, trial_id, params), callbacks, skips)
                    else:
                        running[pool.submit(self._evaluate, fn, trial_id, params)] = trial_id
                if not running:
                    break
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: running[f]):
                    del running[future]
                    self._finish(future.result(), callbacks, skips)
        except BaseException:
            if running and on_abort is not None:
                on_abort()
            raise
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)

    @property
    def next_id(self) -> int:
        """The id the next trial gets (one more than the last stored, running or claimed)."""
        ids = [t.id for t in self._trials] + list(self._running) + list(self.unfinished)
        return max(ids) + 1 if ids else 0

    @property
    def current_trial_id(self) -> int:
        """The id of the trial ``fn`` is running for, in the thread that runs it (else ``next_id``)."""
        current = getattr(self._local, "trial_id", None)
        return self.next_id if current is None else int(current)

    @property
    def running(self) -> dict[int, dict[str, Value]]:
        """The trials this study has started and not yet recorded, by id."""
        return dict(self._running)

    def claim_update(self, trial_id: int, **facts: Any) -> None:
        """Add ``facts`` (where the trial runs: host, process group) to its stored claim."""
        store = claim_store(self.storage)
        if store is not None:
            store.claim(trial_id, {**(store.claims().get(trial_id) or {}), **_json_safe(facts)})

    def _next_trial(self) -> tuple[int, dict[str, Value]] | None:
        """The next (id, configuration): a claimed trial that never finished, else a new one."""
        if self.unfinished:
            trial_id = min(self.unfinished)
            record = self.unfinished.pop(trial_id)
            return trial_id, dict(record.get("params") or {})
        params = self._next_params()
        return None if params is None else (self.next_id, params)

    def _next_params(self) -> dict[str, Value] | None:
        while self._queue:
            params = self._queue.pop(0)
            if not any(t.params == params for t in self._trials):
                return params
        if self.searcher.done:
            return None
        try:
            return self.searcher.ask_pending(self._running.values())
        except SearchExhausted:
            return None  # every configuration is tried or running

    def _prechecked(
        self, precheck: Callable[[dict[str, Value]], None] | None, trial_id: int, params: dict[str, Value]
    ) -> Trial | None:
        """The trial ``precheck`` rules out without running it, or None."""
        if precheck is None:
            return None
        try:
            precheck(dict(params))
        except Infeasible as exc:
            return Trial(trial_id, params, exc.status, None, {}, 0.0, exc.reason, _json_safe(exc.attrs))
        return None

    def _claim(self, trial_id: int, params: dict[str, Value]) -> None:
        self._running[trial_id] = dict(params)
        store = claim_store(self.storage)
        if store is not None:
            store.claim(trial_id, {"params": _json_safe(dict(params)), "started_at": time.time()})

    def _finish(
        self, trial: Trial, callbacks: Sequence[Callable[[Study, Trial], None]], skips: list[int]
    ) -> None:
        self.record(trial)
        skips[0] = skips[0] + 1 if trial.status == TrialStatus.SKIPPED else 0
        for callback in callbacks:
            callback(self, trial)

    def _evaluate(self, fn: Objective, trial_id: int, params: dict[str, Value]) -> Trial:
        """Call ``fn`` once and turn its outcome (value, metrics, or exception) into a Trial."""
        value: float | None = None
        metrics: dict[str, float | None] = {}
        attrs: JsonObject = {}
        status, error = TrialStatus.OK, None
        start = time.perf_counter()
        own_s: float | None = None  # the trial's own run, when the objective says it
        self._local.trial_id = trial_id
        try:
            result = fn(dict(params))
        except Infeasible as exc:
            status, error, attrs, own_s = exc.status, exc.reason, exc.attrs, exc.duration_s
        except Exception as exc:
            status, error = TrialStatus.CRASHED, f"{type(exc).__name__}: {exc}"
        finally:
            self._local.trial_id = None
        if status == TrialStatus.OK:
            if isinstance(result, Measured):
                attrs, own_s, result = dict(result.attrs), result.duration_s, result.metrics
            try:
                value, metrics = self._parse_result(result)
            except ValueError as exc:
                status, error = TrialStatus.CRASHED, str(exc)
            else:
                if not math.isfinite(value):
                    status, error, value = TrialStatus.DIVERGED, f"the objective is {value}", None
        duration_s = time.perf_counter() - start if own_s is None else own_s
        if status == TrialStatus.CRASHED:
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

        For trials run outside ``optimize`` too, such as a baseline. Its id must be ``next_id``, or
        that of a trial started and not yet recorded.
        """
        if trial.id != self.next_id and trial.id not in self._running:
            raise ValueError(f"trial id {trial.id} out of order: the next id is {self.next_id}")
        if self.storage is not None:
            self.storage.append(trial)
        self._running.pop(trial.id, None)
        self._trials.insert(bisect.bisect([t.id for t in self._trials], trial.id), trial)
        observation = trial.observation()
        if observation is not None:
            self.searcher.tell(*observation)

    # ------------------------------------------------------------------ storage

    def update_info(self, info: Mapping[str, Any]) -> bool:
        """Store ``info`` in place of the study's stored one (a resumed caller's settings that changed).

        True when it was stored: the storage can replace it (SQLite and JSON Lines stores can) and
        it differs; ``stored_info`` then is ``info``.
        """
        new = json.loads(json.dumps(dict(info), allow_nan=False))
        if new == self.stored_info or not isinstance(self.storage, InfoStorage):
            return False
        self.storage.update_info(new)
        self._info, self.stored_info = dict(new), dict(new)
        return True

    def _meta(self) -> JsonObject:
        return {
            "space": self.space.to_dict(),
            "direction": self.direction,
            "objective": self.objective,
            "searcher": self.searcher.name,
            "seed": self.searcher.seed,
            "info": self._info,
        }

    def _resume(self, storage: TrialStorage, meta: JsonObject | None, trials: list[Trial]) -> None:
        if meta is None:
            if trials:
                raise ValueError("the storage holds trials but no study record; not resuming")
            storage.write_meta(self._meta())
            return
        stored = StudyRecord.from_dict(meta)
        mine = StudyRecord.from_dict(json.loads(json.dumps(self._meta())))
        for key in ("direction", "objective"):
            if getattr(stored, key) != getattr(mine, key):
                raise ValueError(
                    f"the stored study has {key} {getattr(stored, key)!r}, this one {getattr(mine, key)!r}"
                )
        if _search_part(stored.space) != _search_part(mine.space):
            raise ValueError(
                f"the stored study searched another space: {stored.space!r}; this one {mine.space!r}"
            )
        self._trials = trials
        self.stored_info = stored.info
        claimed = claim_store(storage)
        claims = claimed.claims() if claimed is not None else {}
        done = {t.id for t in trials}
        self.unfinished = {i: dict(c) for i, c in claims.items() if i not in done}
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


def _stored_searcher(stored: tuple[JsonObject | None, list[Trial]] | None) -> str:
    """The searcher a resumed study was stored with (``stored``: its storage's read), else the default."""
    meta = stored[0] if stored is not None else None
    name = StudyRecord.from_dict(meta).searcher if meta is not None else None
    return name if name in SEARCHERS else DEFAULT_SEARCHER
