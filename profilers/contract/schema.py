"""The run directory's schema: file names, run.db tables, versions, phases, statuses and states.

A run directory holds ``run.db`` (the run store: SQLite in WAL mode), ``summary.json``, ``traces/``
and the reports. A study's directory holds its own ``run.db`` (the study store), its
``summary.json`` and ``trials/trial-NNNN/``, each a run directory.

Versions only grow, and later versions add, never rename: a reader of version N reads every store
of version N or lower, and refuses a newer one with one clear line.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from profilers.contract.records import SAMPLE_FIELDS

#: Version of the run store and summary.json layout. Later versions add, never rename.
SCHEMA_VERSION = 1

#: The run store of a profile run (a study's store has the same name, other tables).
STORE_NAME = "run.db"
#: The machine-readable result of a profile run or a study.
SUMMARY_NAME = "summary.json"
#: ``autotune plan``'s JSON saved beside a run (``--format json -o RUN_DIR/plan.json``): the report's plan.
PLAN_NAME = "plan.json"
#: A study's folder of trial runs, ``trials/trial-NNNN``.
TRIALS_DIR = "trials"
#: The lock a running study holds in its directory (there from its first moment, before run.db).
TUNE_LOCK_NAME = ".tune.lock"

#: A tuning parameter's value as a trial gets it and a script reads it (``AUTOTUNE_PARAM_<NAME>``).
ParamValue = int | float | str | bool
#: A configuration: each tuning parameter's value, by name (a trial's, or what a script read).
Params = dict[str, ParamValue]

#: Phases of a step, "other" (the rest) last. "eval" (forwards under no_grad/inference_mode or of a
#: model in eval mode) came later: a store without its column reads as 0.
PHASES: tuple[str, ...] = ("data", "forward", "backward", "optimizer", "eval", "other")
#: Phases shown only when a run had some (most runs never evaluate inside training).
OPTIONAL_PHASES = frozenset({"eval"})

class TrialStatus(StrEnum):
    """How a trial (or one process of a study: an anchor, a re-measurement) ended.

    All but ``OK`` are told to the searcher as infeasible. ``SKIPPED`` trials were never run (a
    model predicted they would fail) and do not count toward a study's trial total. ``BUSY`` trials
    ran short of CPU on a machine too busy to measure, and again when measured a second time (or the
    machine stayed busy): their figures are kept, never compared, and no model learns from them.
    A member is its JSON string (``"ok"``), as summary.json and the study store write it.
    """

    OK = "ok"
    INFEASIBLE = "infeasible"  # the objective said it cannot run
    OOM = "oom"  # out of memory
    TIMEOUT = "timeout"
    DIVERGED = "diverged"  # a non-finite loss
    CRASHED = "crashed"
    SKIPPED = "skipped"
    BUSY = "busy"


#: Every trial status's JSON string, in the enum's order.
STATUSES: tuple[str, ...] = tuple(s.value for s in TrialStatus)

#: States of a run as a reader sees it: "waiting" (nothing recorded yet), "running", "finished"
#: (its summary is written), "stopped" (its process is gone without a summary), "unfinished" (no
#: summary, nothing new for a while, its process not visible from here).
RUN_STATES: tuple[str, ...] = ("waiting", "running", "finished", "stopped", "unfinished")


def run_state(
    *,
    finished: bool,
    stopped: bool = False,
    has_data: bool = True,
    alive: bool | None = None,
    idle_s: float | None = None,
    running_within_s: float,
) -> str:
    """A run's state (one of :data:`RUN_STATES`), from what a reader can see of it.

    ``finished``: its summary is written (a study: every trial ran). ``stopped``: it ended before
    that (a study stopped early; a profile whose process is gone, ``alive`` False). Else it is
    ``waiting`` without any data yet, ``running`` while its process lives (``alive``) or, where the
    process cannot be seen, while something new arrived within ``running_within_s`` (``idle_s``
    ago), and ``unfinished`` after that.
    """
    if stopped:
        return "stopped"
    if finished:
        return "finished"
    if not has_data:
        return "waiting"
    if alive is not None:
        return "running" if alive else "stopped"
    return "running" if idle_s is not None and idle_s < running_within_s else "unfinished"


_SAMPLE_COLUMNS = ", ".join(f"{name} {'TEXT' if name == 'kind' else 'REAL'}" for name in SAMPLE_FIELDS)

#: The run store's tables. Every row carries the rank that wrote it.
STORE_SQL = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS steps (
    rank INTEGER NOT NULL, step INTEGER NOT NULL, start_ns INTEGER NOT NULL,
    duration_ns INTEGER NOT NULL, data_ns INTEGER NOT NULL, forward_ns INTEGER NOT NULL,
    backward_ns INTEGER NOT NULL, optimizer_ns INTEGER NOT NULL, other_ns INTEGER NOT NULL,
    samples INTEGER, tokens INTEGER, kind TEXT NOT NULL, loss REAL, eval_ns INTEGER NOT NULL DEFAULT 0,
    phases_timed INTEGER NOT NULL DEFAULT 1, PRIMARY KEY (rank, step));
CREATE TABLE IF NOT EXISTS samples (rank INTEGER NOT NULL, {_SAMPLE_COLUMNS});
CREATE INDEX IF NOT EXISTS samples_t ON samples (t_ns);
CREATE TABLE IF NOT EXISTS devices (
    rank INTEGER NOT NULL, device_index INTEGER NOT NULL, kind TEXT NOT NULL, info TEXT NOT NULL,
    PRIMARY KEY (rank, kind, device_index));
CREATE TABLE IF NOT EXISTS ops (
    rank INTEGER NOT NULL, name TEXT NOT NULL, device TEXT NOT NULL, calls INTEGER NOT NULL,
    self_time_us REAL NOT NULL, total_time_us REAL NOT NULL, flops INTEGER);
CREATE TABLE IF NOT EXISTS ranks (
    rank INTEGER PRIMARY KEY, world_size INTEGER NOT NULL, host TEXT, pid INTEGER,
    finished_ns INTEGER, summary TEXT);
CREATE TABLE IF NOT EXISTS warnings (rank INTEGER NOT NULL, t_ns INTEGER NOT NULL, part TEXT, message TEXT);
"""

#: Version of a study's summary.json layout (``"kind": "tune"``).
TUNE_SUMMARY_SCHEMA = 1

#: Version of a study store's layout (``study`` and ``trials`` tables, written by the tuner).
STUDY_STORE_SCHEMA = 1

#: A study store's tables: one ``study`` row (its schema and JSON meta), one ``trials`` row per
#: finished trial (its JSON record: id, params, status, value, metrics, attrs, error, duration_s).
STUDY_SQL = """
CREATE TABLE IF NOT EXISTS study (schema INTEGER NOT NULL, meta TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trials (id INTEGER PRIMARY KEY, status TEXT NOT NULL,
    value REAL, record TEXT NOT NULL, finished_ns INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS claims (id INTEGER PRIMARY KEY, record TEXT NOT NULL, started_ns INTEGER NOT NULL);
"""

#: Columns of ``steps`` in their first version, in StepRecord's reading order.
STEP_COLUMNS = (
    "rank, step, start_ns, duration_ns, data_ns, forward_ns, backward_ns, optimizer_ns, other_ns, "
    "samples, tokens, kind"
)
#: Columns added to ``steps`` after its first version, with their SQL types (read as NULL/0 when absent).
ADDED_STEP_COLUMNS = {
    "loss": "REAL",
    "eval_ns": "INTEGER NOT NULL DEFAULT 0",
    "phases_timed": "INTEGER NOT NULL DEFAULT 1",
}


#: NVML clocks-event ("throttle") reason bit to a short name. The bits are NVML's ABI
#: (``nvmlClocksEventReason*`` in nvml.h), spelled out here so that reading a recorded mask
#: needs no driver.
THROTTLE_REASONS: dict[int, str] = {
    0x0000000000000001: "gpu_idle",
    0x0000000000000002: "applications_clocks_setting",
    0x0000000000000004: "sw_power_cap",
    0x0000000000000008: "hw_slowdown",
    0x0000000000000010: "sync_boost",
    0x0000000000000020: "sw_thermal_slowdown",
    0x0000000000000040: "hw_thermal_slowdown",
    0x0000000000000080: "hw_power_brake",
    0x0000000000000100: "display_clock_setting",
    0x0000000000000200: "board_limit",
    0x0000000000000400: "reliability",
}


#: The reasons that mean power or heat held the clocks down (not idling, not a setting), as
#: :data:`THROTTLE_REASONS` names them: a GPU's ``throttle.power_thermal_share`` counts these.
POWER_THERMAL_REASONS = (
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake",
)


def throttle_reason_names(mask: int | None) -> list[str]:
    """Names of the reasons set in an NVML clocks-event-reasons ``mask``, lowest bit first.

    Unknown bits are named ``"unknown_0x..."``; ``None`` (not supported) and ``0`` give ``[]``.
    """
    if not mask:
        return []
    names: list[str] = []
    bit = 1
    while bit <= mask:
        if mask & bit:
            names.append(THROTTLE_REASONS.get(bit, f"unknown_{bit:#x}"))
        bit <<= 1
    return names


def resolve_trial_dir(study_dir: Path, stored: str) -> Path:
    """The run directory of a trial, from the path its study stored (``run_dir`` of a trial entry).

    Stored paths are relative to the study (``trials/trial-0005``), so a study reads from any working
    directory and after it was moved. Studies written before stored the path the tuner was given
    (``runs/X/trials/trial-0005``, relative to its working directory, or absolute): their
    ``trials/trial-NNNN`` tail is found in the study's own folder.
    """
    path = Path(stored)
    if not path.is_absolute() and (study_dir / path).exists():
        return study_dir / path
    parts = path.parts
    if len(parts) >= 2 and parts[-2] == TRIALS_DIR and (study_dir / TRIALS_DIR / parts[-1]).exists():
        return study_dir / TRIALS_DIR / parts[-1]
    return path if path.is_absolute() else study_dir / path


__all__ = [
    "ADDED_STEP_COLUMNS",
    "OPTIONAL_PHASES",
    "PHASES",
    "POWER_THERMAL_REASONS",
    "RUN_STATES",
    "SCHEMA_VERSION",
    "STATUSES",
    "STEP_COLUMNS",
    "STORE_NAME",
    "STORE_SQL",
    "STUDY_SQL",
    "STUDY_STORE_SCHEMA",
    "SUMMARY_NAME",
    "THROTTLE_REASONS",
    "TRIALS_DIR",
    "TUNE_LOCK_NAME",
    "TUNE_SUMMARY_SCHEMA",
    "TrialStatus",
    "resolve_trial_dir",
    "run_state",
    "throttle_reason_names",
]
