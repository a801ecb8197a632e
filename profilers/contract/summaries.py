"""summary.json, parsed once: typed trial entries, and a check of every figure the layers read.

A summary that is not what this version writes (a figure of the wrong type, a trial entry without
its id, an unknown status) is refused where it is read, with one line naming the file, the entry and
the field, instead of a traceback deep in a report or the dashboard.

:class:`TrialEntry` is one trial of a tuning summary's ``trials`` (and its ``best``/``baseline``):
typed attributes for what the layers decide on, and read-only mapping access to the whole entry
(every key the tuner wrote, ``entry["speedup_vs_baseline"]``, ``entry.get(...)``), so it goes where
summary.json's dict went.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from profilers.contract.schema import PHASES, STATUSES


class SummaryError(ValueError):
    """A summary.json this version cannot read; the message is one line for the user."""


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _optional_number(entry: Mapping[str, Any], key: str, where: str) -> float | None:
    value = entry.get(key)
    if value is None:
        return None
    if not _number(value):
        raise SummaryError(f"{where}: {key!r} must be a number or null, not {value!r}"[:300])
    return float(value)


def _optional_dict(entry: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    value = entry.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SummaryError(f"{where}: {key!r} must be an object, not {type(value).__name__}")
    return value


def _optional_str(entry: Mapping[str, Any], key: str, where: str) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise SummaryError(f"{where}: {key!r} must be a string or null, not {value!r}"[:300])
    return value


@dataclass(frozen=True)
class TrialEntry(Mapping[str, Any]):
    """One trial of a tuning summary, checked (see the module's doc)."""

    id: int
    status: str  # one of schema.STATUSES
    params: dict[str, Any]  # what the study set (empty for the baseline)
    objective: float | None
    throughput: float | None  # samples/s, job-wide
    peak_memory_bytes: float | None
    step_time_s: float | None
    run_dir: str | None  # relative to the study (schema.resolve_trial_dir)
    error: str | None
    params_used: dict[str, Any]  # what its code read, with the values it used
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, data: Any, where: str) -> TrialEntry:
        """The entry ``data`` (a summary's dict), or SummaryError naming ``where`` and the field."""
        if not isinstance(data, dict):
            raise SummaryError(f"{where}: a trial entry must be an object, not {type(data).__name__}")
        trial_id = data.get("id")
        if not isinstance(trial_id, int) or isinstance(trial_id, bool) or trial_id < 0:
            raise SummaryError(f"{where}: a trial entry has no id (a whole number), found {trial_id!r}"[:300])
        where = f"{where}, trial {trial_id}"
        status = data.get("status")
        if status not in STATUSES:
            raise SummaryError(f"{where}: unknown status {status!r} (known: {', '.join(STATUSES)})"[:300])
        objective = _optional_number(data, "objective", where)
        return cls(
            id=trial_id,
            status=str(status),
            params=_optional_dict(data, "params", where),
            objective=objective if objective is None or math.isfinite(objective) else None,
            throughput=_optional_number(data, "throughput", where),
            peak_memory_bytes=_optional_number(data, "peak_memory_bytes", where),
            step_time_s=_optional_number(data, "step_time_s", where),
            run_dir=_optional_str(data, "run_dir", where),
            error=_optional_str(data, "error", where),
            params_used=_optional_dict(data, "params_used", where),
            raw=data,
        )

    @property
    def ok(self) -> bool:
        """The trial ran and measured its objective."""
        return self.status == "ok"

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)


@dataclass(frozen=True)
class TuningSummary:
    """A tuning study's summary.json: its trials, best and baseline checked (``raw``: the whole)."""

    trials: tuple[TrialEntry, ...]
    best: TrialEntry | None
    baseline: TrialEntry | None
    stopped: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, data: dict[str, Any], where: str) -> TuningSummary:
        """The summary ``data`` of a study, or SummaryError (one line naming ``where``)."""
        trials = data.get("trials")
        if not isinstance(trials, list):
            raise SummaryError(f"{where}: a tuning summary without its list of trials")
        entries = tuple(TrialEntry.parse(t, where) for t in trials)
        chosen = {k: TrialEntry.parse(data[k], f"{where}, {k}") if data.get(k) is not None else None
                  for k in ("best", "baseline")}  # fmt: skip
        stopped = _optional_str(data, "stopped", where)
        return cls(entries, chosen["best"], chosen["baseline"], stopped, data)


#: A profile summary's figures the layers read, and the types they must have (None is always allowed).
_PROFILE_FIELDS: dict[str, tuple[type, ...]] = {
    "steps": (int,),
    "measured_steps": (int,),
    "step_time_s": (dict,),
    "throughput": (dict,),
    "phases": (dict,),
    "peak_memory_bytes": (int, float),
    "memory": (dict,),
    "gpu": (list,),  # one aggregate per GPU
    "host": (dict,),
    "device": (dict,),
    "loss": (dict,),
    "precision": (str,),
    "warnings": (list,),
    "params_used": (dict,),
    "top_ops": (list,),
    "trace_files": (list,),
    "name": (str,),
}


def profile_summary_problem(data: dict[str, Any], where: str) -> str | None:
    """Why a profile run's summary cannot be read (a figure of the wrong type), or None."""
    for key, types in _PROFILE_FIELDS.items():
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, types):
            kind = " or ".join(t.__name__ for t in types)
            return f"{where}: {key!r} must be {kind} or null, not {value!r}"[:300]
    for group in ("step_time_s", "throughput"):
        for name, value in (data.get(group) or {}).items():
            if value is not None and not _number(value) and not isinstance(value, list | dict | str):
                return f"{where}: {group}.{name} must be a number or null, not {value!r}"[:300]
    for name, value in (data.get("phases") or {}).items():
        if name in PHASES and value is not None and not _number(value):
            return f"{where}: phases.{name} must be a number or null, not {value!r}"[:300]
    return None


__all__ = ["SummaryError", "TrialEntry", "TuningSummary", "profile_summary_problem"]
