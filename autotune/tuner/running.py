"""Trials of a study while they run: their devices, where they run, and stopping them.

``autotune tune --parallel N`` runs up to N trials at once on this machine (the local executor),
each on devices of its own (:mod:`autotune.tuner.devices`). Every trial's claim in the study store
says where it runs (``executor``, ``node``, ``devices``, its process group) as soon as it starts, so
a study killed with trials in flight can stop them on ``--resume`` (each such trial is run again
under its own id, never counted twice); its entry records the same and when it started and ended.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from autotune.search.space import Space, Value
from autotune.search.study import Study
from autotune.tuner.devices import DevicePool, Lease, visible_gpus
from autotune.tuner.trial_facts import TrialFacts
from autotune.tuner.trials import (
    STOPPING,
    TrialOutcome,
    TrialSettings,
    kill_group_of,
    kill_stale_group,
    run_trial,
)
from profilers.contract.lenient import read_fields

EXECUTOR = "local"


@dataclass(frozen=True)
class TrialClaim:
    """A trial's claim as the study stores it while the trial runs: where, and its process group."""

    executor: str | None = None  # "local" or "ray"
    node: str | None = None  # the host
    pgid: int | None = None  # the trial's process group (a local trial's)
    devices: str | None = None  # "cuda:0", "cpu:1"


@dataclass(frozen=True, slots=True)
class TrialRequest:
    """One run of the script a study asks for: how it runs, with which parameters, into which folder."""

    settings: TrialSettings
    space: Space | None  # None: the parameters are the script's own (the baseline's configuration)
    params: dict[str, Value]
    run_dir: Path
    stop_below: float | None = None  # samples/s under which it stops as losing (tuner.early_stop)

    def run(
        self, device_env: Mapping[str, str] | None = None, on_spawn: Callable[[int], None] | None = None
    ) -> TrialOutcome:
        """Run it here (:func:`run_trial`), on ``device_env``'s devices when given."""
        r = self
        return run_trial(r.settings, r.space, r.params, r.run_dir, r.stop_below, device_env, on_spawn)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where and when a run ran, as a trial's entry and a re-measurement's record say it."""

    executor: str | None = None  # "local" or "ray"
    node: str | None = None  # the host
    devices: str | None = None  # "cuda:0", "cpu:1", a Ray resource and its count
    started_at: float | None = None  # unix seconds
    ended_at: float | None = None

    def placed(self, facts: TrialFacts) -> TrialFacts:
        """A trial's ``facts`` with where and when it ran."""
        return replace(
            facts, executor=self.executor, node=self.node, devices=self.devices,
            started_at=self.started_at, ended_at=self.ended_at,
        )  # fmt: skip


@dataclass(frozen=True)
class Ran:
    """A run of the script in a trial's slot (an anchor), and where and when it ran."""

    outcome: TrialOutcome
    placement: Placement


class RunningTrials:
    """The trials of one study that run now: a device each (``parallel`` > 1), and their groups.

    ``ray``: an :class:`autotune.tuner.ray_executor.RayExecutor` that runs each trial as a Ray task
    instead (Ray then places it and gives it its devices).
    """

    def __init__(self, parallel: int, device_kind: str, ray: Any = None) -> None:
        self.parallel = parallel
        self.ray = ray
        gpus = visible_gpus() if device_kind == "cuda" and parallel > 1 and ray is None else []
        self.pool = DevicePool(parallel, gpus=gpus) if parallel > 1 and ray is None else None
        self.node = socket.gethostname()
        self._groups: dict[int, int] = {}  # trial id -> process group
        self._lock = threading.Lock()

    def run(
        self,
        study: Study,
        trial_id: int,
        ranks: int,
        request: TrialRequest,
        anchor: tuple[Path, Callable[[Ran], None]] | None = None,
        stop_below_now: Callable[[], float | None] | None = None,
    ) -> tuple[TrialOutcome, Placement]:
        """Run one trial where it goes; its outcome and where and when it ran.

        ``anchor``: (folder, ended) first runs the baseline's configuration (no parameter set) into
        that folder, in the same slot (the same devices and cores; on Ray, a task of its own), so that
        it is measured where and how the trials it anchors are; ``ended`` gets it before the trial starts.
        ``stop_below_now``: the stop-below again once that anchor ended (its spread counts), in place
        of the request's.
        """
        first = None if anchor is None else TrialRequest(request.settings, None, {}, anchor[0])
        if self.ray is not None:
            study.claim_update(trial_id, executor=self.ray.name)
            if anchor is not None and first is not None:
                anchor[1](Ran(*self.ray.run(trial_id, ranks, first)))
                if stop_below_now is not None:
                    request = replace(request, stop_below=stop_below_now())
            return self.ray.run(trial_id, ranks, request)
        with self.devices(ranks) as lease:
            env = lease.env if lease is not None else None
            note = self.spawned(study, trial_id, lease)
            if anchor is not None and first is not None:
                began = time.time()
                ran = first.run(env, note)
                anchor[1](Ran(ran, self.placement(lease, began)))
                if stop_below_now is not None:
                    request = replace(request, stop_below=stop_below_now())
            started_at = time.time()
            outcome = request.run(env, note)
            self.ended(trial_id)
        return outcome, self.placement(lease, started_at)

    @contextmanager
    def devices(self, ranks: int) -> Iterator[Lease | None]:
        """The devices of one trial of ``ranks`` ranks, held for the block (None: one trial at a time)."""
        if self.pool is None:
            yield None
            return
        with self.pool.lease(ranks) as lease:
            yield lease

    def spawned(self, study: Study, trial_id: int, lease: Lease | None) -> Callable[[int], None]:
        """The ``on_spawn`` of a trial: its group noted here and in its claim."""

        def note(pgid: int) -> None:
            with self._lock:
                self._groups[trial_id] = pgid
            devices = lease.label if lease is not None else None
            study.claim_update(trial_id, executor=EXECUTOR, node=self.node, pgid=pgid, devices=devices)

        return note

    def ended(self, trial_id: int) -> None:
        """The trial's process is gone."""
        with self._lock:
            self._groups.pop(trial_id, None)

    def placement(self, lease: Lease | None, started_at: float) -> Placement:
        """Where and when a run here ran (ending now), on ``lease``'s devices when it had some."""
        devices = lease.label if lease is not None else None
        return Placement(EXECUTOR, self.node, devices, started_at, time.time())

    def stop_all(self) -> None:
        """Kill every running trial's process group, or cancel its Ray task (the study stops)."""
        STOPPING.set()  # a trial waiting to run again for a calmer machine does not
        if self.ray is not None:
            self.ray.cancel_all()
        with self._lock:
            groups = list(self._groups.values())
        for pgid in groups:
            kill_group_of(pgid)

    def stop_stale(self, study: Study) -> list[int]:
        """Kill the trials a stopped study left running on this node; the ids of those it found."""
        found = []
        for trial_id, stored in sorted(study.unfinished.items()):
            claim = TrialClaim(**read_fields(TrialClaim, stored))
            if claim.node == self.node and claim.pgid is not None and kill_stale_group(claim.pgid):
                found.append(trial_id)
        return found
