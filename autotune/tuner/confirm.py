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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from profilers.contract.intervals import ratio_interval
from profilers.contract.reader import Snapshot
from profilers.contract.schema import TrialStatus
from profilers.contract.study.summary import Confirmation

if TYPE_CHECKING:
    from autotune.tuner.running import Placement
    from autotune.tuner.trials import TrialOutcome

ROLES = ("baseline", "best")
#: The role of an anchor: the baseline's configuration run again during the search
#: (:mod:`profilers.contract.study.spread`); stored beside the re-measurements, never one of their rounds.
ANCHOR = "anchor"
#: Folder of the confirmation runs inside the study's trials folder.
CONFIRM_PREFIX = "confirm"
#: Folder of the anchors inside it.
ANCHOR_PREFIX = "anchor"


def confirmation_of(
    key: tuple[int, int, str], outcome: TrialOutcome, study_dir: Path, placed: Placement
) -> Confirmation:
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
    best_id, round_, role = key
    return Confirmation(
        best_id=best_id, round=round_, role=role,
        status=TrialStatus.BUSY if outcome.busy else outcome.status,
        samples_per_s=outcome.throughput if ok else None,
        samples_per_s_ci95=ci if ok and ci is not None else None,
        other_load_cores=outcome.other_load_cores, duration_s=outcome.duration_s, run_dir=run_dir,
        error=None if ok else error, started_at=placed.started_at, ended_at=placed.ended_at,
        executor=placed.executor, node=placed.node, devices=placed.devices,
        load_cores=outcome.load_cores, starved_share=outcome.starved_share, busy_before=outcome.busy_before,
    )  # fmt: skip


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


def verdict(runs: Iterable[Confirmation], best_id: int) -> Verdict:
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


def store(path: Path, run: Confirmation) -> None:
    """Append one re-measurement, committed before returning."""
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(_TABLE)
        with conn:
            conn.execute("INSERT INTO confirmations (record) VALUES (?)", (json.dumps(run.to_json()),))
    finally:
        conn.close()


def stored(path: Path) -> list[Confirmation]:
    """Every re-measurement stored in ``path`` (none for a study without them)."""
    if not path.exists():
        return []
    with Snapshot(path) as snap:
        records = snap.confirmation_records()
    for record in records:  # what identifies a run is never a default
        if not isinstance(record, dict) or any(record.get(key) is None for key in _IDENTIFIED_BY):
            raise ValueError(f"{path}: a damaged re-measurement record: {str(record)[:200]}")
    return [Confirmation.parse(record, f"{path}: a re-measurement or anchor") for record in records]


#: The keys of a stored re-measurement or anchor that say which it is.
_IDENTIFIED_BY = ("best_id", "round", "role", "status")


def done(runs: Sequence[Confirmation], best_id: int) -> set[tuple[int, str]]:
    """(round, role) already measured for ``best_id``."""
    return {(r.round, r.role) for r in runs if r.best_id == best_id and r.role in ROLES}


def anchors(runs: Sequence[Confirmation]) -> list[Confirmation]:
    """The study's anchors, in the order they were stored."""
    return [r for r in runs if r.role == ANCHOR]


def anchor_dir_name(index: int) -> str:
    """``anchor-NN``: where one anchor's profile goes."""
    return f"{ANCHOR_PREFIX}-{index:02d}"
