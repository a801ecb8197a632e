"""A trace report (``autotune report TRACE --format json``) as the dashboard shows it, typed.

The trace report is built by the report layer from :mod:`profilers.traces`; the dashboard, which may
not import the trace analysis, reads its JSON through :meth:`TraceReportView.parse` (one line naming
the field for a report it cannot read).

>>> view = TraceReportView.parse({"overview": {"device": "NVIDIA H200", "world_size": 1},
...     "gpu_time": {"ranks": [{"rank": 0, "idle_pct": 40.0, "compute_pct": 50.0,
...     "top_kernels": [{"name": "sm90_gemm", "kind": "compute", "total_us": 900.0, "share_pct": 60.0}]}]}})
>>> view.device, view.ranks[0].breakdown_pct, view.ranks[0].top_kernels[0].name
('NVIDIA H200', (40.0, 50.0, 0.0), 'sm90_gemm')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from profilers.contract.json_checks import (
    JsonObject,
    SummaryError,
    optional_dict,
    optional_int,
    optional_list,
    optional_number,
    optional_str,
    str_list,
)


def _objects(data: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
    rows = optional_list(data, key, where)
    if not all(isinstance(r, Mapping) for r in rows):
        raise SummaryError(f"{where}: every item of {key!r} must be an object")
    return rows


@dataclass(frozen=True, slots=True)
class KernelShare:
    """One of a rank's top kernels: its kind and its share of the kernel time."""

    name: str
    kind: str
    total_us: float
    share_pct: float


@dataclass(frozen=True, slots=True)
class HostOpTime:
    """One of a rank's top host operators."""

    name: str
    count: int
    self_us: float
    total_us: float


@dataclass(frozen=True, slots=True)
class RankTimes:
    """One rank's GPU time: its span, the temporal breakdown, its top kernels and operators."""

    rank: int | None
    kernel_time_us: float | None
    idle_pct: float | None
    compute_pct: float | None
    non_compute_pct: float | None
    comm_overlap_pct: float | None
    step_time_s_median: float | None
    top_kernels: tuple[KernelShare, ...]
    top_ops: tuple[HostOpTime, ...]

    @classmethod
    def parse(cls, data: Mapping[str, Any], where: str) -> RankTimes:
        """One entry of ``gpu_time.ranks``."""
        kernels = tuple(
            KernelShare(str(k["name"]), str(k["kind"]), float(k["total_us"]), float(k["share_pct"]))
            for k in _objects(data, "top_kernels", where)
        )
        ops = tuple(
            HostOpTime(str(o["name"]), int(o["count"]), float(o["self_us"]), float(o["total_us"]))
            for o in _objects(data, "top_ops", where)
        )
        pct = {k: optional_number(data, k, where) for k in ("idle_pct", "compute_pct", "non_compute_pct")}
        return cls(
            rank=optional_int(data, "rank", where),
            kernel_time_us=optional_number(data, "kernel_time_us", where),
            comm_overlap_pct=optional_number(data, "comm_overlap_pct", where),
            step_time_s_median=optional_number(data, "step_time_s_median", where),
            top_kernels=kernels,
            top_ops=ops,
            **pct,
        )

    @property
    def breakdown_pct(self) -> tuple[float, float, float]:
        """Idle, compute and non-compute shares of the GPU span (0 for one not measured)."""
        return (self.idle_pct or 0.0, self.compute_pct or 0.0, self.non_compute_pct or 0.0)


@dataclass(frozen=True, slots=True)
class TraceReportView:
    """What the dashboard's trace screen shows of a trace report."""

    device: str | None
    world_size: int | None
    step_time_median_s: float | None
    notes: tuple[str, ...]
    ranks: tuple[RankTimes, ...]
    advice: JsonObject = field(default_factory=dict)  # the report's advice section, as written

    @classmethod
    def parse(cls, data: Any, where: str = "the trace report") -> TraceReportView:
        """The report's JSON object, or SummaryError (one line naming the field)."""
        if not isinstance(data, Mapping):
            raise SummaryError(f"{where}: not a JSON object")
        overview = optional_dict(data, "overview", where)
        ranks = _objects(optional_dict(data, "gpu_time", where), "ranks", f"{where}: gpu_time")
        try:
            parsed = tuple(RankTimes.parse(r, f"{where}: gpu_time.ranks") for r in ranks)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, SummaryError):
                raise
            raise SummaryError(f"{where}: a rank's top kernels or operators lack {exc}") from None
        return cls(
            device=optional_str(overview, "device", f"{where}: overview"),
            world_size=optional_int(overview, "world_size", f"{where}: overview"),
            step_time_median_s=optional_number(overview, "step_time_median_s", f"{where}: overview"),
            notes=str_list(overview, "notes", f"{where}: overview"),
            ranks=parsed,
            advice=optional_dict(data, "advice", where),
        )


__all__ = ["HostOpTime", "KernelShare", "RankTimes", "TraceReportView"]
