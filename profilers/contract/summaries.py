"""summary.json, parsed once: typed profile summaries and trial entries, every figure checked.

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


class _ReadsAsItsDict(Mapping[str, Any]):
    """Read-only mapping access to the summary dict a record was parsed from (its ``raw``)."""

    raw: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)


@dataclass(frozen=True)
class TrialEntry(_ReadsAsItsDict):
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
    "memory_snapshot_files": (list,),
    "name": (str,),
}


def profile_summary_problem(data: dict[str, Any], where: str) -> str | None:
    """Why a profile run's summary cannot be read (a figure of the wrong type), or None."""
    try:
        ProfileSummary.parse(data, where)
    except SummaryError as exc:
        return str(exc)
    return None


def _check_top_level(data: dict[str, Any], where: str) -> None:
    for key, types in _PROFILE_FIELDS.items():
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, types):
            kind = " or ".join(t.__name__ for t in types)
            raise SummaryError(f"{where}: {key!r} must be {kind} or null, not {value!r}"[:300])
    for group in ("step_time_s", "throughput"):
        for name, value in (data.get(group) or {}).items():
            if value is not None and not _number(value) and not isinstance(value, list | dict | str):
                raise SummaryError(f"{where}: {group}.{name} must be a number or null, not {value!r}"[:300])
    for name, value in (data.get("phases") or {}).items():
        if name in PHASES and value is not None and not _number(value):
            raise SummaryError(f"{where}: phases.{name} must be a number or null, not {value!r}"[:300])


def _optional_int(entry: Mapping[str, Any], key: str, where: str) -> int | None:
    value = _optional_number(entry, key, where)
    return None if value is None else int(value)


@dataclass(frozen=True)
class Envelope:
    """A memory line's input: the peak of each equal slice of the steady span.

    See :func:`profilers.contract.summarize.memory_envelope`.
    """

    readings: int
    span_ns: tuple[int, int]
    peaks: tuple[tuple[float, float], ...]  # (seconds from the span's start, bytes)

    @classmethod
    def parse(cls, data: Any, where: str) -> Envelope | None:
        """The envelope ``data`` (None stays None), or SummaryError naming ``where``."""
        if data is None:
            return None
        try:
            readings = data["readings"]
            start, end = data["span_ns"]
            peaks = tuple((float(x), float(v)) for x, v in data["peaks"])
            if not all(_number(v) for v in (readings, start, end)):
                raise TypeError
        except (TypeError, KeyError, ValueError):
            shape = "{readings, span_ns: [start, end], peaks: [[s, bytes]...]}"
            raise SummaryError(f"{where}: must be {shape}, not {data!r}"[:300]) from None
        return cls(int(readings), (int(start), int(end)), peaks)


@dataclass(frozen=True)
class UtilFigures:
    """NVML utilisation of one GPU over the summary's span (``util_pct``), in percent."""

    readings: int | None  # None in summaries from before it was recorded
    mean: float | None
    p5: float | None
    p50: float | None
    p95: float | None


@dataclass(frozen=True)
class ThrottleFigures:
    """How often each clocks-event reason was set (``throttle``; summarize.throttle_shares)."""

    readings: int
    power_thermal_share: float  # 0-1
    reason_shares: dict[str, float]  # reason name -> 0-1


@dataclass(frozen=True)
class GpuFigures:
    """One GPU's entry of a profile summary's ``gpu`` list (summarize.gpu_aggregates)."""

    index: int
    name: str | None
    samples: int
    util: UtilFigures | None
    mem_total_bytes: int | None
    mem_used_bytes_max: int | None
    sm_clock_mhz_mean: float | None
    throttle: ThrottleFigures | None
    mem_used_envelope: Envelope | None

    @classmethod
    def parse(cls, data: Any, where: str) -> GpuFigures:
        """The entry ``data``, or SummaryError naming ``where`` and the field."""
        if not isinstance(data, dict) or not isinstance(data.get("index"), int):
            raise SummaryError(f"{where}: a GPU entry must be an object with its index, not {data!r}"[:300])
        where = f"{where}[{data['index']}]"
        util = _optional_dict(data, "util_pct", where)
        held = _optional_dict(data, "throttle", where)
        shares = _optional_dict(held, "reason_shares", f"{where}.throttle")
        return cls(
            index=data["index"],
            name=_optional_str(data, "name", where),
            samples=_optional_int(data, "samples", where) or 0,
            util=UtilFigures(
                _optional_int(util, "readings", f"{where}.util_pct"),
                *(_optional_number(util, k, f"{where}.util_pct") for k in ("mean", "p5", "p50", "p95")),
            )
            if util
            else None,
            mem_total_bytes=_optional_int(data, "mem_total_bytes", where),
            mem_used_bytes_max=_optional_int(data, "mem_used_bytes_max", where),
            sm_clock_mhz_mean=_optional_number(data, "sm_clock_mhz_mean", where),
            throttle=ThrottleFigures(
                _optional_int(held, "readings", f"{where}.throttle") or 0,
                _optional_number(held, "power_thermal_share", f"{where}.throttle") or 0.0,
                {str(k): _optional_number(shares, k, f"{where}.throttle") or 0.0 for k in shares},
            )
            if held
            else None,
            mem_used_envelope=Envelope.parse(data.get("mem_used_envelope"), f"{where}.mem_used_envelope"),
        )


@dataclass(frozen=True)
class HostFigures:
    """A profile summary's ``host`` entry (summarize.host_aggregates): this rank's process and host."""

    samples: int
    cpu_util_pct_mean: float | None
    rss_peak_bytes: int | None
    host_mem_total_bytes: int | None
    rss_envelope: Envelope | None

    @classmethod
    def parse(cls, data: dict[str, Any], where: str) -> HostFigures:
        """The entry ``data``, or SummaryError naming ``where`` and the field."""
        return cls(
            samples=_optional_int(data, "samples", where) or 0,
            cpu_util_pct_mean=_optional_number(data, "cpu_util_pct_mean", where),
            rss_peak_bytes=_optional_int(data, "rss_peak_bytes", where),
            host_mem_total_bytes=_optional_int(data, "host_mem_total_bytes", where),
            rss_envelope=Envelope.parse(data.get("rss_envelope"), f"{where}.rss_envelope"),
        )


@dataclass(frozen=True)
class ProfileSummary(_ReadsAsItsDict):
    """A profile run's summary.json, checked: typed figures the advice decides on (the rest by key).

    Like :class:`TrialEntry`, it reads as the whole dict too (``summary["top_ops"]``), so the
    layers that show a figure as it was written keep reading it by name.
    """

    steps: int | None
    measured_steps: int | None
    step_median_s: float | None
    samples_per_s: float | None
    phases: dict[str, float]
    peak_memory_bytes: int | None
    precision: str | None
    device: dict[str, Any]
    gpus: tuple[GpuFigures, ...]
    host: HostFigures | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, data: dict[str, Any], where: str) -> ProfileSummary:
        """The summary ``data`` of a profile run, or SummaryError (one line naming ``where``)."""
        _check_top_level(data, where)
        times = data.get("step_time_s") or {}
        host = data.get("host")
        return cls(
            steps=data.get("steps"),
            measured_steps=data.get("measured_steps"),
            step_median_s=_optional_number(times, "median", f"{where}: step_time_s"),
            samples_per_s=_optional_number(data.get("throughput") or {}, "samples_per_s", where),
            phases={k: float(v) for k, v in (data.get("phases") or {}).items() if _number(v)},
            peak_memory_bytes=_optional_int(data, "peak_memory_bytes", where),
            precision=data.get("precision"),
            device=data.get("device") or {},
            gpus=tuple(GpuFigures.parse(g, f"{where}: gpu") for g in data.get("gpu") or ()),
            host=None if host is None else HostFigures.parse(host, f"{where}: host"),
            raw=data,
        )

    def gpu(self, index: int) -> GpuFigures | None:
        """The entry of NVML index ``index``, or None."""
        return next((g for g in self.gpus if g.index == index), None)


__all__ = [
    "Envelope",
    "GpuFigures",
    "HostFigures",
    "ProfileSummary",
    "SummaryError",
    "ThrottleFigures",
    "TrialEntry",
    "TuningSummary",
    "UtilFigures",
    "profile_summary_problem",
]
