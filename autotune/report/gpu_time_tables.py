"""The GPU-time section as plain tables (title, header, rows of text) that Markdown and HTML draw alike."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.fmt import NA, format_bytes, format_number, format_seconds
from autotune.report.sections import GpuTimeSection
from profilers.traces.gpu_time import RankGpuTime

#: Rows of the top-kernel and top-op tables shown per rank (report.json keeps all of them).
SHOWN = 8
NAME_CHARS = 90


@dataclass(frozen=True, slots=True)
class TextTable:
    """One table: a heading, its header and its rows (plain text), and which columns are numbers."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: frozenset[int] = frozenset()


def pct(value: float | None) -> str:
    """A percentage already in % (not a fraction): ``12.345`` -> ``"12.3%"``."""
    return NA if value is None else f"{value:.1f}%"


def us(value: float | None) -> str:
    """µs as a duration with a fitting unit."""
    return NA if value is None else format_seconds(value / 1e6)


def _num(value: float | None) -> str:
    return format_number(value, 6)


def short(name: str) -> str:
    """A kernel or op name cut to :data:`NAME_CHARS` (templates make them very long)."""
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def rank_table(section: GpuTimeSection) -> TextTable:
    """One row per rank: HTA's temporal breakdown, overlap, steps."""
    rows = tuple(
        (
            str(r.rank),
            r.device_name or NA,
            str(r.steps),
            format_seconds(r.step_time_s_median),
            pct(r.idle_pct),
            pct(r.compute_pct),
            pct(r.non_compute_pct),
            pct(r.comm_overlap_pct),
            us(r.kernel_time_us),
            f"{r.kernels:,}",
        )
        for r in section.ranks
    )
    header = ("rank", "device", "steps", "median step", "idle", "compute", "non-compute",
              "comm overlapped", "GPU span", "GPU activities")  # fmt: skip
    return TextTable("Temporal breakdown per rank", header, rows, frozenset(range(2, 10)))


def detail_table(r: RankGpuTime) -> TextTable:
    """One rank's kernel mix, tensor cores, GEMM dtypes and launch evidence, as label/value rows."""
    kinds = ", ".join(f"{k} {us(v)}" for k, v in r.time_by_kind_us.items() if v > 0) or NA
    copies = ", ".join(f"{k} {us(v)}" for k, v in sorted(r.memcpy_us.items())) or "none"
    dtypes = ", ".join(f"{k} {us(v)}" for k, v in sorted(r.gemm_us_by_dtype.items())) or (
        "no GEMM kernels"
        if r.gemm_us <= 0
        else "not recorded (the trace has no op input types: record_shapes)"
    )
    launch = r.launch
    rows = [
        ("kernel time by kind (summed)", kinds),
        ("memcpy / memset", copies),
        ("communication: exposed / total", f"{us(r.comm_exposed_us)} / {us(r.comm_us)}"),
        ("median kernel", us(r.kernel_median_us)),
        ("tensor-core kernels (of compute time)", pct(r.tensor_core_pct)),
        ("GEMM/conv kernels; fp32 on CUDA cores", f"{us(r.gemm_us)}; {us(r.fp32_gemm_us)}"),
        ("GEMM time by the op's input dtype", dtypes),
        ("runtime calls", f"{launch.runtime_calls:,} taking {us(launch.runtime_us)}"),
        ("kernel launches; median launch call", f"{launch.launches:,}; {us(launch.launch_us_median)}"),
        ("median delay launch → kernel start", us(launch.launch_delay_us_median)),
        ("kernels queued at a launch: median, max", f"{_num(launch.queue_median)}, {_num(launch.queue_max)}"),
        ("kernels shorter than their launch", f"{launch.short_kernels:,} ({pct(launch.short_kernels_pct)})"),
        ("host ops' self time; host span", f"{us(r.cpu_op_self_us)}; {us(r.host_span_us)}"),
    ]
    if r.device_memory_bytes:
        rows.insert(
            0,
            ("device", f"{r.device_name} (sm {r.compute_capability}, {format_bytes(r.device_memory_bytes)})"),
        )
    rows += [("left out", line) for line in r.left_out]
    return TextTable(f"Rank {r.rank} ({r.source})", ("", "value"), tuple(rows))


def kernel_table(r: RankGpuTime) -> TextTable:
    rows = tuple(
        (short(k.name), k.kind, f"{k.count:,}", us(k.total_us), us(k.mean_us), pct(k.share_pct))
        for k in r.top_kernels[:SHOWN]
    )
    header = ("kernel", "kind", "count", "total", "mean", "share")
    return TextTable(f"Rank {r.rank}: top kernels", header, rows, frozenset((2, 3, 4, 5)))


def op_table(r: RankGpuTime) -> TextTable:
    rows = tuple((short(o.name), f"{o.count:,}", us(o.self_us), us(o.total_us)) for o in r.top_ops[:SHOWN])
    return TextTable(f"Rank {r.rank}: top host operators (self time)", ("operator", "calls", "self", "total"),
                     rows, frozenset((1, 2, 3)))  # fmt: skip


#: What each cause of idle time means, for the table (profilers.traces.idle).
CAUSE_WORDS = {
    "launch": "the CPU launched late",
    "launch_overhead": "launch overhead between kernels",
    "sync": "the host synchronized",
    "communication": "waited on communication",
    "copy": "waited on a copy",
    "other_stream": "waited on another stream",
    "unknown": "waited, cause not in the trace",
}


def idle_table(r: RankGpuTime) -> TextTable | None:
    """Why the busiest compute stream waited: HTA's split per stream, then the causes seen."""
    b = r.idle_breakdown
    if b is None:
        return None
    rows = [
        (f"stream {s.stream}" + (" (busiest compute)" if s.stream == b.stream else ""), us(s.idle_us),
         pct(s.host_wait_pct), pct(s.kernel_wait_pct), pct(s.other_pct), "")
        for s in b.streams
        if s.idle_us > 0
    ]  # fmt: skip
    rows += [
        (
            f"  {CAUSE_WORDS.get(c.cause, c.cause)}",
            us(c.idle_us),
            "",
            "",
            "",
            f"{pct(c.idle_pct)}: {short(c.evidence)}",
        )
        for c in b.causes
    ]
    header = (
        "stream / cause",
        "idle",
        "host wait",
        "kernel wait",
        "other",
        "share of the busiest stream's idle",
    )
    return TextTable(f"Rank {r.rank}: why the GPU waited", header, tuple(rows), frozenset((1, 2, 3, 4)))


def spread_table(section: GpuTimeSection) -> TextTable | None:
    if not section.spread:
        return None
    seconds = {"step_time_s_median"}
    micro = {"compute_us_per_step"}

    def show(metric: str, value: float) -> str:
        return format_seconds(value) if metric in seconds else us(value) if metric in micro else pct(value)

    rows = tuple(
        (s.metric, f"{show(s.metric, s.min_value)} (rank {s.min_rank})", show(s.metric, s.median),
         f"{show(s.metric, s.max_value)} (rank {s.max_rank})")
        for s in section.spread
    )  # fmt: skip
    return TextTable("Across ranks", ("figure", "lowest", "median", "highest"), rows)


def tables(section: GpuTimeSection) -> list[TextTable]:
    """Every table of the section, in display order."""
    out = [rank_table(section)]
    spread = spread_table(section)
    if spread is not None:
        out.append(spread)
    for r in section.ranks:
        out.append(detail_table(r))
        idle = idle_table(r)
        if idle is not None:
            out.append(idle)
        out += [kernel_table(r), op_table(r)]
    return out


__all__ = ["TextTable", "pct", "tables", "us"]
