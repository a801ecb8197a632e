"""Load a run directory for the advice and the reports: a profile run or a tuning study.

A directory that is not a run, is corrupt, or is from a newer schema raises :class:`RunDirError`
with one line that says what is wrong. A profile run that was killed before it wrote
``summary.json`` still has its steps and samples in ``run.db``: its summary is rebuilt from them
(``finished`` is then false), so no measured data is lost.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profilers.records import SCHEMA_VERSION, DeviceSample, OpRecord, StepRecord

SUMMARY_NAME = "summary.json"
STORE_NAME = "run.db"  # the profiler's run store and the tuner's study store share the name
#: Newest tuning summary schema this version reads.
TUNE_SCHEMA_VERSION = 1


class RunDirError(Exception):
    """The directory cannot be reported on; the message is one line for the user."""


@dataclass(frozen=True)
class RunData:
    """Everything the advice and the reports read from one run directory.

    ``steps``, ``samples``, ``ops`` and ``devices`` come from a profile run's ``run.db`` (every
    rank's); they are empty for a study. A study's ``trials`` are its summary's trial entries, and
    ``profile`` is the profile run of its best trial (the baseline's when none is best), loaded the
    same way, or None when that run cannot be read.
    """

    run_dir: Path
    kind: str  # "profile" or "tune"
    summary: dict[str, Any]
    finished: bool = True
    meta: dict[str, Any] = field(default_factory=dict)
    steps: tuple[StepRecord, ...] = ()
    samples: tuple[DeviceSample, ...] = ()
    sample_ranks: tuple[int, ...] = ()  # the rank that wrote each sample (same order), when known
    ops: tuple[tuple[int, OpRecord], ...] = ()  # (rank, op)
    devices: tuple[dict[str, Any], ...] = ()
    trials: tuple[dict[str, Any], ...] = ()
    profile: RunData | None = None
    notes: tuple[str, ...] = ()  # what was missing or rebuilt, for the report to say

    @property
    def name(self) -> str:
        """The run's name (a study is named after its script)."""
        if self.kind == "tune":
            command = self.summary.get("command") or []
            return f"tune {Path(str(command[0])).name}" if command else "tune"
        return str(self.summary.get("name") or self.meta.get("name") or self.run_dir.name)


def load_run(run_dir: str | Path, with_store: bool = True) -> RunData:
    """Read ``run_dir``; raise RunDirError with one line when it cannot be reported on."""
    path = Path(run_dir)
    if not path.exists():
        raise RunDirError(f"{path}: no such directory")
    if not path.is_dir():
        raise RunDirError(f"{path}: not a directory (give the run directory, not a file in it)")
    summary = _read_summary(path)
    if summary is not None and summary.get("kind") == "tune":
        return _load_study(path, summary)
    store = path / STORE_NAME
    if summary is None and not store.exists():
        raise RunDirError(f"{path}: not a run directory (no {SUMMARY_NAME} and no {STORE_NAME})")
    return _load_profile(path, summary, with_store)


def _read_summary(path: Path) -> dict[str, Any] | None:
    file = path / SUMMARY_NAME
    if not file.exists():
        return None
    try:
        data = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunDirError(f"{file}: unreadable or half-written summary ({_short(exc)})") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{file}: not a summary (a JSON object was expected)")
    schema = data.get("schema")
    newest = TUNE_SCHEMA_VERSION if data.get("kind") == "tune" else SCHEMA_VERSION
    if not isinstance(schema, int):
        raise RunDirError(f"{file}: not a gpu-autotune summary (no schema version)")
    if schema > newest:
        raise RunDirError(
            f"{file}: written by a newer gpu-autotune (schema {schema}; this version reads up to "
            f"{newest}); upgrade to report on it"
        )
    return data


def _load_profile(path: Path, summary: dict[str, Any] | None, with_store: bool) -> RunData:
    store = path / STORE_NAME
    notes: list[str] = []
    meta: dict[str, Any] = {}
    steps: list[StepRecord] = []
    samples: list[DeviceSample] = []
    sample_ranks: list[int] = []
    ops: list[tuple[int, OpRecord]] = []
    devices: list[dict[str, Any]] = []
    if store.exists() and (with_store or summary is None):
        try:
            meta, steps, samples, sample_ranks, ops, devices = _read_store(store)
        except (sqlite3.Error, ValueError, TypeError, KeyError) as exc:
            if summary is None:
                raise RunDirError(f"{store}: corrupt run store ({_short(exc)})") from None
            notes.append(f"run.db could not be read ({_short(exc)}); timelines come from summary.json only")
    elif summary is not None and not store.exists():
        notes.append("run.db is missing; per-step and per-sample data are not available")
    if summary is None:
        if not steps:
            raise RunDirError(
                f"{path}: the run recorded no steps yet (no {SUMMARY_NAME}, empty {STORE_NAME})"
            )
        summary = _rebuild_summary(path, meta, steps, samples)
        notes.append(
            f"the run did not finish (no {SUMMARY_NAME}): its figures come from the "
            f"{len(steps)} steps in {STORE_NAME}"
        )
    return RunData(
        run_dir=path,
        kind="profile",
        summary=summary,
        finished=(path / SUMMARY_NAME).exists(),
        meta=meta,
        steps=tuple(steps),
        samples=tuple(samples),
        sample_ranks=tuple(sample_ranks),
        ops=tuple(ops),
        devices=tuple(devices),
        notes=tuple(notes),
    )


def _read_store(
    store: Path,
) -> tuple[
    dict[str, Any],
    list[StepRecord],
    list[DeviceSample],
    list[int],
    list[tuple[int, OpRecord]],
    list[dict[str, Any]],
]:
    from profilers.store import read_devices, read_meta, read_ops, read_sample_records, read_steps

    meta = read_meta(store)
    schema = meta.get("schema")
    if isinstance(schema, int) and schema > SCHEMA_VERSION:
        raise RunDirError(
            f"{store}: written by a newer gpu-autotune (schema {schema}; this version reads up to "
            f"{SCHEMA_VERSION}); upgrade to report on it"
        )
    ranks, samples = read_sample_records(store)
    return meta, read_steps(store), samples, ranks, read_ops(store), read_devices(store)


def _rebuild_summary(
    path: Path, meta: dict[str, Any], steps: list[StepRecord], samples: list[DeviceSample]
) -> dict[str, Any]:
    """A summary from the store alone, for a run killed before it wrote its own."""
    from profilers.summary import (
        build_summary,
        gpu_aggregates,
        host_aggregates,
        loss_summary,
        measured_span_ns,
        step_statistics,
    )

    rank0 = [s for s in steps if s.rank == 0] or steps
    stats = step_statistics(rank0)
    return build_summary(
        name=meta.get("name") or path.name,
        run_dir=str(path),
        steps=len(rank0),
        measured_steps=stats["measured_steps"],
        step_time_s=stats["step_time_s"],
        throughput=stats["throughput"],
        phases=stats["phases"],
        gpu=gpu_aggregates(samples, {}, span_ns=measured_span_ns(steps)),
        host=host_aggregates(samples),
        loss=loss_summary(rank0),
        stop_reason="killed",
        warnings=[],
    )


def _load_study(path: Path, summary: dict[str, Any]) -> RunData:
    trials = summary.get("trials")
    if not isinstance(trials, list) or not all(isinstance(t, dict) for t in trials):
        raise RunDirError(f"{path / SUMMARY_NAME}: a tuning summary without its list of trials")
    notes: list[str] = []
    chosen = summary.get("best") or summary.get("baseline")
    profile = None
    if isinstance(chosen, dict) and chosen.get("run_dir"):
        from autotune.tuner.records import resolve_trial_dir  # light: no torch, no scikit-optimize

        trial_dir = resolve_trial_dir(path, str(chosen["run_dir"]))
        try:
            profile = load_run(trial_dir)
        except RunDirError as exc:
            notes.append(f"the profile of trial {chosen.get('id')} cannot be read: {exc}")
    return RunData(
        run_dir=path,
        kind="tune",
        summary=summary,
        finished=summary.get("stopped") is None,
        trials=tuple(trials),
        profile=profile,
        notes=tuple(notes),
    )


def study_batch_param(summary: dict[str, Any]) -> str | None:
    """A study's batch parameter, as its memory model picks it (None for no or an unreadable space)."""
    from autotune.tuner.memory_model import batch_param
    from autotune.tuner.space import Space

    try:
        return batch_param(Space.from_dict(summary.get("space") or {}))
    except (ValueError, TypeError):
        return None


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
