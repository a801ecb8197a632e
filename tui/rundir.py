"""What a directory holds (a profile run, a tuning study, or neither), its JSON files, the run list.

A profile run holds ``run.db`` (the profiler's store) and, once finished, ``summary.json``. A
tuning study holds ``summary.json`` with ``"kind": "tune"`` (rewritten atomically after every
trial), its own ``run.db`` (tables ``study`` and ``trials``) and ``trials/trial-NNNN/``, each a
profile run. Everything here only reads.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from profilers.contract.json_checks import JsonObject, SummaryError
from profilers.contract.profile_summary import ProfileSummary
from profilers.contract.reader import RunStoreError, Snapshot, is_study_summary
from profilers.contract.schema import STORE_NAME, SUMMARY_NAME, TRIALS_DIR, run_state
from profilers.contract.study.summary import TrialEntry, TuningSummary

T = TypeVar("T")

#: A run whose files changed this recently (seconds) and has no summary yet is shown as running.
RUNNING_WITHIN_S = 120.0


class JsonFile:
    """A JSON object file re-read only when its size or modification time changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self.data: JsonObject | None = None
        self.problem: str | None = None

    def read(self) -> JsonObject | None:
        """The file's object (the last good one while it is unreadable), None while it is absent."""
        try:
            st = self.path.stat()
        except OSError:
            self._stamp, self.data, self.problem = None, None, None
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return self.data
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            self.problem = f"{self.path}: unreadable or half-written ({str(exc).splitlines()[0][:120]})"
            return self.data
        self._stamp = stamp
        if not isinstance(data, dict):
            self.problem = f"{self.path}: not a gpu-autotune summary (a JSON object was expected)"
            return self.data
        self.data, self.problem = data, None
        return data


def store_tables(path: Path) -> set[str]:
    """The table names of an SQLite file (empty when it is absent or not a database)."""
    if not path.exists():
        return set()
    try:
        with Snapshot(path, busy_timeout_s=5.0) as snap:
            return snap.tables
    except RunStoreError:
        return set()


def detect_kind(path: Path) -> str | None:
    """``"study"``, ``"profile"``, or None when ``path`` holds neither (yet)."""
    if (path / TRIALS_DIR).is_dir():
        return "study"
    summary = path / SUMMARY_NAME
    if summary.exists():
        try:
            data = json.loads(summary.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            data = None
        if isinstance(data, dict):
            return "study" if is_study_summary(data) else "profile"
    store = path / STORE_NAME
    if store.exists():
        tables = store_tables(store)
        return "study" if "trials" in tables and "steps" not in tables else "profile"
    return "profile" if summary.exists() else None


def trial_dirs(study: Path) -> list[tuple[int, Path]]:
    """``(id, path)`` of the study's ``trials/trial-NNNN`` directories, in id order."""
    out: list[tuple[int, Path]] = []
    try:
        entries = list(os.scandir(study / TRIALS_DIR))
    except OSError:
        return out
    for entry in entries:
        name = entry.name
        if name.startswith("trial-") and name[6:].isdigit() and entry.is_dir():
            out.append((int(name[6:]), Path(entry.path)))
    return sorted(out)


def stored_trials(path: Path) -> list[TrialEntry]:
    """The trials of a study's ``run.db`` as summary trial entries (before summary.json exists).

    SummaryError (one line) for a record this version cannot read.
    """
    if not path.exists():
        return []
    with Snapshot(path, busy_timeout_s=5.0) as snap:
        return snap.trial_entries()


@dataclass(frozen=True, slots=True)
class RunEntry:
    """One directory of the run list."""

    path: Path
    name: str
    kind: str  # "profile" or "study"
    state: str  # "finished", "running", "unfinished", "stopped"
    size: str  # "1,234 steps", "12 trials"
    modified: float  # seconds since the epoch


def _newest_mtime(path: Path) -> float:
    times = [path.stat().st_mtime]
    for name in (SUMMARY_NAME, STORE_NAME, STORE_NAME + "-wal"):
        with contextlib.suppress(OSError):
            times.append((path / name).stat().st_mtime)
    return max(times)


def run_entry(path: Path, now: float | None = None) -> RunEntry | None:
    """The run list's entry for ``path``, or None when it is not a run."""
    kind = detect_kind(path)
    if kind is None:
        return None
    modified = _newest_mtime(path)
    idle_s = (now if now is not None else time.time()) - modified
    data = JsonFile(path / SUMMARY_NAME).read()
    if kind == "study":
        study = _readable(TuningSummary.parse, data, path)
        count = len(study.trials) if study is not None else len(trial_dirs(path))
        total = study.n_trials if study is not None else None
        size = f"{count} trials" + (f" of {total}" if total is not None else "")
        state = run_state(
            finished=study is not None and (study.trials_run or 0) >= (total or 0),
            stopped=study is not None and bool(study.stopped),
            idle_s=idle_s,
            running_within_s=RUNNING_WITHIN_S,
        )
    else:
        profile = _readable(ProfileSummary.parse, data, path)
        steps = profile.steps if profile is not None else None
        size = f"{steps:,} steps" if steps is not None else ""
        state = run_state(finished=bool(data), idle_s=idle_s, running_within_s=RUNNING_WITHIN_S)
    return RunEntry(path, path.name, kind, state, size, modified)


def _readable(parse: Callable[[JsonObject, str], T], data: JsonObject | None, path: Path) -> T | None:
    """``data`` parsed, or None when there is none or it cannot be read (the list shows what it can)."""
    if not data:
        return None
    try:
        return parse(data, str(path / SUMMARY_NAME))
    except SummaryError:
        return None


def list_runs(root: Path, now: float | None = None) -> list[RunEntry]:
    """The runs directly under ``root``, newest first."""
    try:
        dirs = [Path(e.path) for e in os.scandir(root) if e.is_dir()]
    except OSError:
        return []
    entries = [e for d in dirs if (e := run_entry(d, now)) is not None]
    return sorted(entries, key=lambda e: (-e.modified, e.name))
