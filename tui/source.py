"""One run directory, followed: each :meth:`RunSource.poll` reads what changed and returns a snapshot.

A profile run is followed through its ``run.db``; a study through its ``summary.json`` (the trial
table) and its newest ``trials/trial-NNNN/run.db`` (the Live screen). Nothing here raises on a bad
directory: the snapshot's ``problem`` holds the one line the dashboard shows instead.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from profilers.contract.json_checks import JsonObject, SummaryError
from profilers.contract.profile_summary import ProfileSummary
from profilers.contract.reader import parse_summary
from profilers.contract.run_meta import RunMeta
from profilers.contract.schema import STORE_NAME, SUMMARY_NAME
from profilers.contract.study.summary import TrialEntry, TuningSummary

from tui.model import LiveInfo, RunFacts, TrialsInfo, live_info, trials_info
from tui.rundir import JsonFile, detect_kind, stored_trials, trial_dirs
from tui.store import StoreProblem, StoreReader


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything the dashboard shows of a run at one refresh."""

    run_dir: Path
    kind: str | None  # "profile", "study", or None (not a run, yet)
    name: str
    problem: str | None = None  # one line for the user: why (part of) the run cannot be shown
    live: LiveInfo | None = None
    trials: TrialsInfo | None = None
    facts: RunFacts | None = None


class _Followed:
    """A profile run directory: its store and its summary.json."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.reader = StoreReader(path / STORE_NAME)
        self.summary = JsonFile(path / SUMMARY_NAME)
        self.problem: str | None = None
        self._checked_data: JsonObject | None = None  # the summary object last parsed
        self._parsed: ProfileSummary | TuningSummary | None = None
        self._why: str | None = None  # why that object cannot be read

    def poll(self) -> ProfileSummary | None:
        """The run's summary once it has one, parsed (None before, or with a problem said).

        Checked and parsed once per version of the file (JsonFile keeps the object until it changes).
        """
        summary = self.summary.read()
        if summary is not self._checked_data:
            self._checked_data = summary
            self._parsed, self._why = None, None
            if summary is not None:
                try:
                    self._parsed = parse_summary(summary, self.summary.path)
                except SummaryError as exc:
                    self._why = str(exc)
        self.problem = self._why or self.summary.problem
        if self._why is not None:
            return None
        try:
            self.reader.poll()
        except StoreProblem as exc:
            self.problem = str(exc)
        return self._parsed if isinstance(self._parsed, ProfileSummary) else None

    @property
    def became_a_study(self) -> bool:
        """Its summary.json is a tuning study's (the directory was a study after all)."""
        return isinstance(self._parsed, TuningSummary)


class RunSource:
    """Follows ``run_dir``; not thread-safe (one poll at a time)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.kind: str | None = None
        self._profile: _Followed | None = None
        self._study_summary = JsonFile(run_dir / SUMMARY_NAME)
        self._trial: tuple[int, _Followed] | None = None

    def poll(self, now_ns: int | None = None) -> Snapshot:
        """Read what is new and describe the run as it stands."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        path = self.run_dir
        if not path.exists():
            return Snapshot(
                path, None, path.name, problem=f"{path}: no such directory (yet): waiting for it to appear"
            )
        if not path.is_dir():
            return Snapshot(
                path, None, path.name, problem=f"{path}: not a directory (give the run directory)"
            )
        if self.kind is None:
            self.kind = detect_kind(path)
        if self.kind is None:
            return Snapshot(
                path,
                None,
                path.name,
                problem=f"{path}: not a run directory (no {SUMMARY_NAME}, {STORE_NAME} or trials/); "
                "waiting for a run to appear",
            )
        if self.kind == "study":
            return self._poll_study(now_ns)
        return self._poll_profile(now_ns)

    def _poll_profile(self, now_ns: int) -> Snapshot:
        if self._profile is None:
            self._profile = _Followed(self.run_dir)
        followed = self._profile
        summary = followed.poll()
        reader = followed.reader
        name = str((summary.name if summary else None) or reader.meta.name or self.run_dir.name)
        if followed.became_a_study:
            self.kind = None
            return Snapshot(self.run_dir, None, name)
        live: LiveInfo | None = live_info(reader, summary, name, now_ns, message=_waiting(followed))
        state = live.state if live is not None else "waiting"
        if followed.problem is not None and not reader.has_data:  # nothing to draw: say why only
            live, state = None, "unreadable"
        facts = RunFacts(
            run_dir=str(self.run_dir),
            kind="profile",
            name=name,
            state=state,
            meta=reader.meta,
            summary=summary,
            devices=tuple(reader.devices),
            ranks=tuple(sorted(reader.ranks.items())),
            warnings=tuple(f"rank {r} {p}: {m}" for r, p, m in reader.warnings),
        )
        return Snapshot(self.run_dir, "profile", name, followed.problem, live=live, facts=facts)

    def _poll_study(self, now_ns: int) -> Snapshot:
        data = self._study_summary.read()
        problem = self._study_summary.problem
        study: TuningSummary | None = None
        if data is not None:
            try:
                parsed = parse_summary(data, self._study_summary.path)
            except SummaryError as exc:
                return Snapshot(self.run_dir, "study", self.run_dir.name, problem=str(exc))
            study = parsed if isinstance(parsed, TuningSummary) else None
        entries: list[TrialEntry] = []
        if study is not None:
            entries = list(study.trials)
        else:
            try:
                entries = stored_trials(self.run_dir / STORE_NAME)
            except SummaryError as exc:
                problem = str(exc)
            except (sqlite3.Error, ValueError, KeyError, TypeError, OSError) as exc:
                problem = f"{self.run_dir / STORE_NAME}: unreadable trials ({exc})"
        dirs = trial_dirs(self.run_dir)
        shown = _shown_trial(study, dirs)
        if shown is not None and (self._trial is None or self._trial[0] != shown[0]):
            self._trial = (shown[0], _Followed(shown[1]))
        command = study.command if study is not None else ()
        name = f"tune {Path(command[0]).name}" if command else self.run_dir.name
        trials = trials_info(study, entries, [trial_id for trial_id, _ in dirs])
        live: LiveInfo | None = None
        trial_summary: ProfileSummary | None = None
        if self._trial is not None:
            trial_id, followed = self._trial
            trial_summary = followed.poll()
            problem = problem or followed.problem
            entry = next((r for r in trials.rows if r.id == trial_id), None)
            total = f" of {trials.n_trials}" if trials.n_trials else ""
            outcome = f" · {entry.status}" if entry is not None else ""
            if study is not None and study.best is not None and study.best.id == trial_id:
                outcome += f" · {trials.best_label}"
            params = " ".join(f"{k}={v}" for k, v in (entry.params if entry else {}).items())
            following = f"trial {trial_id}{total}{outcome}" + (f" · {params}" if params else "")
            live = live_info(followed.reader, trial_summary, name, now_ns, following, _waiting(followed))
            if followed.problem is not None and not followed.reader.has_data:
                live = None
        state = _study_state(study, live, trials)
        followed_reader = self._trial[1].reader if self._trial is not None else None
        facts = RunFacts(
            run_dir=str(self.run_dir),
            kind="study",
            name=name,
            state=state,
            meta=RunMeta(),
            summary=study,
            devices=tuple(followed_reader.devices) if followed_reader else (),
            ranks=tuple(sorted(followed_reader.ranks.items())) if followed_reader else (),
            warnings=(),
            trial_dir=str(self._trial[1].path) if self._trial is not None else None,
            trial_meta=followed_reader.meta if followed_reader else None,
            trial_summary=trial_summary,
        )
        return Snapshot(self.run_dir, "study", name, problem, live=live, trials=trials, facts=facts)


def _shown_trial(study: TuningSummary | None, dirs: list[tuple[int, Path]]) -> tuple[int, Path] | None:
    """The trial to follow: the newest while the study runs, its best once it has ended."""
    if not dirs:
        return None
    if study is not None and study.best is not None and _ended(study):
        best_id = study.best.id
        return next((d for d in dirs if d[0] == best_id), dirs[-1])
    return dirs[-1]


def _ended(study: TuningSummary) -> bool:
    """The study stopped, or ran every trial it was asked for."""
    ran_all = study.n_trials is not None and (study.trials_run or 0) >= study.n_trials
    return bool(study.stopped) or ran_all


def _waiting(followed: _Followed) -> str | None:
    if followed.reader.has_data:
        return None
    if not followed.reader.path.exists():
        return f"waiting for {followed.reader.path} to appear…"
    return None


def _study_state(study: TuningSummary | None, live: LiveInfo | None, trials: TrialsInfo) -> str:
    if study is not None and study.stopped:
        return "stopped"
    if study is not None and _ended(study):
        return "finished"
    if live is not None and live.state == "running":
        return "running"
    return "unfinished"
