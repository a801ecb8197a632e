"""Re-measuring the best configuration against the baseline before a study names it.

A study's best trial is the maximum of many noisy measurements, so its own figure is biased upward
(on a shared 2-core machine a "15x" has come out of noise). After the search, the baseline and the
best configuration run again, interleaved (baseline then best in even rounds, best then baseline in
odd ones, so a drift in the machine's load falls on both), and each round gives one ratio of their
throughputs. The speedup's 95% interval is Student's t on the mean log ratio of those fresh rounds
only (the search's own pair is the biased one); the speedup is ``confirmed`` when the interval's
low end is above 1.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profilers.contract.lenient import member
from profilers.contract.reader import Snapshot
from profilers.contract.schema import TrialStatus
from profilers.contract.summarize import ratio_interval

if TYPE_CHECKING:
    from autotune.tuner.running import Placement
    from autotune.tuner.trials import TrialOutcome

ROLES = ("baseline", "best")
#: The role of an anchor: the baseline's configuration run again during the search
#: (:mod:`profilers.contract.spread`); stored beside the re-measurements, never one of their rounds.
ANCHOR = "anchor"
#: Folder of the confirmation runs inside the study's trials folder.
CONFIRM_PREFIX = "confirm"
#: Folder of the anchors inside it.
ANCHOR_PREFIX = "anchor"


@dataclass(frozen=True)
class ConfirmRun:
    """One re-measurement: of the baseline or of the best trial ``best_id``, in round ``round``.

    An anchor (``role`` "anchor") is the baseline's configuration run during the search: ``round`` is
    its index (1, 2...; the baseline trial is anchor 0) and ``best_id`` the trial whose slot it ran in.
    """

    best_id: int  # the best trial this round re-measures against the baseline
    round: int  # 0-based
    role: str  # "baseline", "best" or "anchor"
    status: TrialStatus
    samples_per_s: float | None
    samples_per_s_ci95: list[float | None] | None
    other_load_cores: float | None
    duration_s: float
    run_dir: str  # relative to the study
    error: str | None = None
    started_at: float | None = None  # unix seconds (None in studies from before it was kept)
    ended_at: float | None = None
    executor: str | None = None  # where it ran: "local" or "ray", the host, its devices
    node: str | None = None
    devices: str | None = None
    load_cores: int | None = None  # the cores other_load_cores is over (its own when pinned)
    starved_share: float | None = None  # share of its measured steps it ran short of CPU
    busy_before: float | None = None  # its first run's starved share, when it ran again once calmer

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (run.db and summary.json)."""
        return asdict(self)

    @classmethod
    def of(
        cls,
        key: tuple[int, int, str],
        outcome: TrialOutcome,
        study_dir: Path,
        placed: Placement,
    ) -> ConfirmRun:
        """The record of one run: ``key`` (best id, round, role), its outcome, where and when it ran.

        A run on a machine too busy to measure it (:attr:`TrialOutcome.busy`) is "busy", with no figure
        to compare: the verdict and the anchors leave it out.
        """
        ok = outcome.status == TrialStatus.OK and outcome.throughput is not None and not outcome.busy
        ci = outcome.figures.throughput.samples_per_s_ci95
        try:
            run_dir = str(outcome.run_dir.resolve().relative_to(study_dir.resolve()))
        except ValueError:
            run_dir = str(outcome.run_dir)
        lines = [line for line in (outcome.error or "").splitlines() if line.strip()]
        error = outcome.busy_reason() if outcome.busy else (lines[0] if lines else "no error message")
        status = TrialStatus.BUSY if outcome.busy else outcome.status
        return cls(
            *key, status, outcome.throughput if ok else None,
            list(ci) if ok and ci is not None else None, outcome.other_load_cores, outcome.duration_s,
            run_dir, None if ok else error, placed.started_at, placed.ended_at, placed.executor, placed.node,
            placed.devices, outcome.load_cores, outcome.starved_share, outcome.busy_before,
        )  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ConfirmRun:
        """Back from :meth:`to_dict` (ValueError for a damaged record)."""
        status = member(TrialStatus, data.get("status"))
        if status is None:
            raise ValueError(f"a damaged confirmation record: status {data.get('status')!r}")
        try:
            return cls(**{**data, "status": status})
        except TypeError as exc:
            raise ValueError(f"a damaged confirmation record: {exc}") from None


def plan(rounds: int) -> list[tuple[int, str]]:
    """(round, role) in run order: baseline first in even rounds, best first in odd ones."""
    order: list[tuple[int, str]] = []
    for r in range(rounds):
        roles = ROLES if r % 2 == 0 else ROLES[::-1]
        order += [(r, role) for role in roles]
    return order


def run_dir_name(run: tuple[int, str], best_id: int) -> str:
    """``confirm-<best id>-<round>-<role>``: where one re-measurement's profile goes."""
    return f"{CONFIRM_PREFIX}-{best_id:04d}-{run[0]:02d}-{run[1]}"


@dataclass(frozen=True)
class Verdict:
    """What the rounds say of the best configuration's speedup over the baseline."""

    rounds: int  # rounds with both runs ok
    ratios: tuple[float, ...]  # best / baseline throughput, per such round
    speedup: float | None  # geometric mean of the ratios
    speedup_ci95: tuple[float, float] | None  # its 95% interval (2 rounds or more)
    confirmed: bool  # the interval's low end is above 1


def verdict(runs: Iterable[ConfirmRun], best_id: int) -> Verdict:
    """The speedup of ``best_id`` over the baseline from its rounds (ok pairs only)."""
    by_round: dict[int, dict[str, float]] = {}
    for run in runs:
        rate = run.samples_per_s if run.status == TrialStatus.OK else None
        if run.best_id == best_id and run.role in ROLES and rate:
            by_round.setdefault(run.round, {})[run.role] = rate
    ratios = tuple(r["best"] / r["baseline"] for _, r in sorted(by_round.items()) if len(r) == 2)
    if not ratios:
        return Verdict(0, (), None, None, False)
    if len(ratios) == 1:
        return Verdict(1, ratios, ratios[0], None, False)
    low, centre, high = ratio_interval(ratios)
    return Verdict(len(ratios), ratios, centre, (low, high), low > 1)


# -- storage: a table of its own in the study's run.db -------------------------------------------
_TABLE = "CREATE TABLE IF NOT EXISTS confirmations (seq INTEGER PRIMARY KEY, record TEXT NOT NULL)"


def store(path: Path, run: ConfirmRun) -> None:
    """Append one re-measurement, committed before returning."""
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(_TABLE)
        with conn:
            conn.execute("INSERT INTO confirmations (record) VALUES (?)", (json.dumps(run.to_dict()),))
    finally:
        conn.close()


def stored(path: Path) -> list[ConfirmRun]:
    """Every re-measurement stored in ``path`` (none for a study without them)."""
    if not path.exists():
        return []
    with Snapshot(path) as snap:
        return [ConfirmRun.from_dict(record) for record in snap.confirmation_records()]


def done(runs: Sequence[ConfirmRun], best_id: int) -> set[tuple[int, str]]:
    """(round, role) already measured for ``best_id``."""
    return {(r.round, r.role) for r in runs if r.best_id == best_id and r.role in ROLES}


def anchors(runs: Sequence[ConfirmRun]) -> list[ConfirmRun]:
    """The study's anchors, in the order they were stored."""
    return [r for r in runs if r.role == ANCHOR]


def anchor_dir_name(index: int) -> str:
    """``anchor-NN``: where one anchor's profile goes."""
    return f"{ANCHOR_PREFIX}-{index:02d}"
