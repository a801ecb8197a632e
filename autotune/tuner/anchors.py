"""A study's anchors: the baseline's configuration run again during the search, in trials' slots.

Anchor 1 runs before the first search trial, anchor k before search trial 1 + (k−1) ×
``anchor_every``, each in the slot of the trial it precedes (:meth:`RunningTrials.run`'s ``anchor``)
and stored the moment it ends, so a killed study loses none that finished. Their spread is the spread
between processes every search ratio carries (:mod:`profilers.contract.study.spread`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from autotune.search.records import Trial
from autotune.tuner import confirm
from autotune.tuner.running import Ran
from autotune.tuner.tune_summary import anchor_line, anchor_runs
from profilers.contract.schema import TRIALS_DIR, TrialStatus
from profilers.contract.study.spread import AnchorRun


class Anchors:
    """Which anchor is due before a trial, storing each as it ends, and the anchors so far.

    ``store`` is the study's run.db; ``baseline_ranks`` the ranks an anchor needs (a trial on fewer
    leaves the due anchor to the next); ``on_note`` hears each anchor's line.
    """

    def __init__(
        self,
        run_dir: Path,
        store: Path,
        every: int,
        baseline_ranks: int,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        self.run_dir, self.store, self.every, self.baseline_ranks = run_dir, store, every, baseline_ranks
        self.on_note = on_note
        self._lock = threading.Lock()
        self._started = 0  # search trials started by this process, after those stored
        self._in_flight: set[int] = set()  # claimed and not yet stored

    def claim(self, trials: Sequence[Trial], ranks: int) -> int | None:
        """The index of the anchor to run before a trial of ``ranks`` ranks, or None when none is due.

        At most one per trial, so a resumed study catches up one trial at a time; never an index
        stored or running already (an anchor stored out of order, or lost with a killed study).
        """
        if self.every <= 0:
            return None
        with self._lock:
            if self._started == 0:  # the first trial of this process: count what is stored
                self._started = sum(1 for t in trials if not t.baseline and t.status != TrialStatus.SKIPPED)
            ordinal, self._started = self._started, self._started + 1
            taken = {a.round for a in confirm.anchors(confirm.stored(self.store))} | self._in_flight
            if len(taken) >= 1 + ordinal // self.every or self.baseline_ranks > ranks:
                return None
            index = max(taken, default=0) + 1
            self._in_flight.add(index)
            return index

    def folder(self, index: int) -> Path:
        """Where anchor ``index`` writes its profile."""
        return self.run_dir / TRIALS_DIR / confirm.anchor_dir_name(index)

    def ended(self, index: int, trial_id: int) -> Callable[[Ran], None]:
        """What keeps anchor ``index`` (run in trial ``trial_id``'s slot) the moment it ends."""

        def keep(ran: Ran) -> None:
            key = (trial_id, index, confirm.ANCHOR)
            record = confirm.confirmation_of(key, ran.outcome, self.run_dir, ran.placement)
            with self._lock:
                confirm.store(self.store, record)
                self._in_flight.discard(index)
            if self.on_note is not None:
                self.on_note(anchor_line(record))

        return keep

    def release(self, index: int) -> None:
        """Anchor ``index`` will not be stored by this process (its trial failed before it ended)."""
        with self._lock:
            self._in_flight.discard(index)

    def runs(self, baseline: Trial | None, parallel: int) -> list[AnchorRun]:
        """The baseline's processes so far: the baseline trial (anchor 0) and the stored anchors."""
        return anchor_runs(baseline, confirm.anchors(confirm.stored(self.store)), parallel)
