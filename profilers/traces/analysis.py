"""Analyse a trace file or a folder of per-rank traces: each rank's GPU time, and across ranks.

``analyse_traces(path)`` takes what ``tensorboard_trace_handler`` writes (a folder of
``*.pt.trace.json[.gz]``, one per rank), a file ``export_chrome_trace`` wrote, or a run directory
of this tool (its ``traces/``). Each file streams through :mod:`profilers.traces.stream` into
:mod:`profilers.traces.gpu_time`. A file that fails part-way keeps what was read before the fault, and the
analysis says so; a path where no trace can be read raises :class:`TraceError` (one line).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profilers.contract.traces import NoTraceError, trace_files
from profilers.traces.gpu_time import KIND_COMPUTE, TOP, RankGpuTime, keep_events, rank_gpu_time
from profilers.traces.kineto import TraceError
from profilers.traces.stream import stream_trace


@dataclass(frozen=True, slots=True)
class RankSpread:
    """How one figure varies across ranks: the lowest and highest rank and their values."""

    metric: str
    min_rank: int
    min_value: float
    max_rank: int
    max_value: float
    median: float


@dataclass(frozen=True, slots=True)
class TraceAnalysis:
    """Every rank's figures, the spread across ranks, and what could not be read."""

    path: str
    ranks: tuple[RankGpuTime, ...]
    spread: tuple[RankSpread, ...]  # step time and each kind of GPU time, with 2 ranks or more
    problems: tuple[str, ...]  # files or parts that could not be read, one sentence each


def _guarded(events: Iterator[dict[str, Any]], faults: list[str]) -> Iterator[dict[str, Any]]:
    """The events until a read fault, which is noted in ``faults`` instead of raised."""
    try:
        yield from events
    except TraceError as exc:
        faults.append(str(exc))


def analyse_file(
    path: Path, rank_default: int = 0, hta_rounding: bool = False, top: int = TOP
) -> RankGpuTime:
    """One trace file's figures; a fault after some events keeps them and lists it in ``left_out``.

    ``top``: kernels and operators kept in the tables (``autotune compare`` keeps them all).
    """
    meta: dict[str, Any] = {}
    faults: list[str] = []
    kept = keep_events(_guarded(stream_trace(path, meta), faults), hta_rounding=hta_rounding)
    if faults and not (kept.gpu or kept.host):
        raise TraceError(faults[0])
    result = rank_gpu_time(kept, meta, str(path), rank_default, top=top)
    if faults:
        result = _with_left_out(result, f"the file could not be read to its end: {faults[0]}")
    return result


def _with_left_out(result: RankGpuTime, sentence: str) -> RankGpuTime:
    return dataclasses.replace(result, left_out=(*result.left_out, sentence))


def analyse_traces(path: Path, hta_rounding: bool = False, top: int = TOP) -> TraceAnalysis:
    """Every trace at ``path``, by rank; raises TraceError when none can be read."""
    try:
        files = trace_files(path)
    except NoTraceError as exc:
        raise TraceError(str(exc)) from None
    ranks: list[RankGpuTime] = []
    problems: list[str] = []
    for index, file in enumerate(files):
        try:
            ranks.append(analyse_file(file, rank_default=index, hta_rounding=hta_rounding, top=top))
        except TraceError as exc:
            problems.append(str(exc))
    if not ranks:
        raise TraceError(problems[0] if len(problems) == 1 else f"{path}: no readable trace ({problems[0]})")
    ranks.sort(key=lambda r: (r.rank, r.source))
    seen: dict[int, str] = {}
    for r in ranks:
        if r.rank in seen:
            problems.append(f"{r.source} and {seen[r.rank]} both say rank {r.rank}; each is shown on its own")
        seen.setdefault(r.rank, r.source)
    return TraceAnalysis(str(path), tuple(ranks), spread_of(ranks), tuple(problems))


#: Figures compared across ranks: (name, how to read it from a rank).
_SPREAD_METRICS: tuple[tuple[str, str], ...] = (
    ("step_time_s_median", "step_time_s_median"),
    ("idle_pct", "idle_pct"),
    ("compute_pct", "compute_pct"),
    ("non_compute_pct", "non_compute_pct"),
    ("compute_us_per_step", ""),
)


def compute_per_step_us(rank: RankGpuTime) -> float | None:
    """Summed compute-kernel time per analysed step: a rank's own GPU work (waits excluded)."""
    compute = rank.kind_us(KIND_COMPUTE)
    return compute / max(rank.analysed_steps, 1) if compute > 0 else None  # no steps: the whole trace


def spread_of(ranks: list[RankGpuTime]) -> tuple[RankSpread, ...]:
    """Lowest, highest and median of each figure over the ranks (distinct ranks only, 2 or more)."""
    distinct = {r.rank: r for r in ranks}
    if len(distinct) < 2:
        return ()
    out = []
    for metric, attr in _SPREAD_METRICS:
        values = [
            (r.rank, compute_per_step_us(r) if not attr else getattr(r, attr)) for r in distinct.values()
        ]
        known = [(rank, float(v)) for rank, v in values if v is not None]
        if len(known) < 2:
            continue
        low, high = min(known, key=lambda kv: kv[1]), max(known, key=lambda kv: kv[1])
        out.append(
            RankSpread(metric, low[0], low[1], high[0], high[1], statistics.median(v for _, v in known))
        )
    return tuple(out)


__all__ = [
    "RankSpread",
    "TraceAnalysis",
    "analyse_file",
    "analyse_traces",
    "compute_per_step_us",
    "spread_of",
]
