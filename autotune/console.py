"""The readable terminal summary of one profile (``autotune demo``, the end of ``autotune profile``).

Data first, then drawing: :func:`build_summary_view` turns a ``summary.json`` dict into a
:class:`SummaryView` of display strings (tested without a terminal), and :func:`draw_summary_view`
draws it with rich. Every value may be missing or ``None``; those show as ``"n/a"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from autotune.fmt import NA, format_bytes, format_pct, format_rate, format_seconds, format_si
from autotune.fmt import as_float as _num
from autotune.fmt import get_in as _get
from profilers.contract.load import load_line, load_of
from profilers.contract.outcome import STOPPED_BY, outcome_sentence
from profilers.contract.schema import OPTIONAL_PHASES, PHASES

BAR_WIDTH = 20
_EIGHTHS = " ▏▎▍▌▋▊▉"


class MetricRow(NamedTuple):
    """One labelled line of the summary table."""

    label: str
    value: str


class PhaseRow(NamedTuple):
    """One phase of the step: its share as text and as a bar."""

    name: str
    fraction: float | None  # 0..1, None when unknown
    pct: str  # "42.0%" or "n/a"
    bar: str  # BAR_WIDTH cells at most; "" when unknown


class OpRow(NamedTuple):
    """One of the top operators by self time."""

    name: str
    device: str
    self_time: str  # human units, e.g. "12.3 ms"


class SummaryView(NamedTuple):
    """Everything the terminal summary shows, as display strings."""

    title: str
    metrics: tuple[MetricRow, ...]
    phases: tuple[PhaseRow, ...]
    gpus: tuple[MetricRow, ...]  # one row per GPU; empty without GPU data
    top_ops: tuple[OpRow, ...]  # at most 3, largest self time first
    where: str  # the "where the time goes" sentence
    run_dir: str
    warnings: tuple[str, ...]
    outcome: str | None = None  # how the run ended, when not simply finished
    no_steps: bool = False  # nothing to tabulate: no training step was seen


# ------------------------------------------------------------------------------------- formatting


def bar(fraction: float | None, width: int = BAR_WIDTH) -> str:
    """Draw a horizontal bar of ``width`` cells filled to ``fraction`` (clamped to 0..1), in eighths."""
    if fraction is None:
        return ""
    eighths = round(min(max(fraction, 0.0), 1.0) * width * 8)
    full, rest = divmod(eighths, 8)
    return "█" * full + (_EIGHTHS[rest] if rest else "")


# ------------------------------------------------------------------------------------------ data


def _step_time_row(summary: Mapping[str, Any]) -> MetricRow:
    median = format_seconds(_get(summary, "step_time_s", "median"))
    p10 = _num(_get(summary, "step_time_s", "p10"))
    p90 = _num(_get(summary, "step_time_s", "p90"))
    spread = f" (p10–p90 {format_seconds(p10)} – {format_seconds(p90)})" if None not in (p10, p90) else ""
    return MetricRow("Step time (median)", median + spread if median != NA else NA)


def _steps_row(summary: Mapping[str, Any]) -> MetricRow:
    steps, measured = _num(summary.get("steps")), _num(summary.get("measured_steps"))
    if steps is None:
        return MetricRow("Steps", NA)
    text = f"{steps:.0f}" + ("" if measured is None else f" ({measured:.0f} measured)")
    stop = STOPPED_BY.get(str(summary.get("stop_reason")))
    return MetricRow("Steps", text + (f", {stop}" if stop else ""))


def _loss_row(summary: Mapping[str, Any]) -> MetricRow:
    """First and last training loss, and how many steps were NaN/inf."""
    first, last = _num(_get(summary, "loss", "first")), _num(_get(summary, "loss", "last"))
    bad = _num(_get(summary, "loss", "non_finite_steps")) or 0
    if first is None and last is None and not bad:
        return MetricRow("Loss", NA)
    text = f"{first:.4g} → {last:.4g}" if first is not None and last is not None else NA
    if bad:
        text += f" · {bad:.0f} NaN/inf steps from step {_get(summary, 'loss', 'first_non_finite_step')}"
    return MetricRow("Loss", text)


def _throughput_row(summary: Mapping[str, Any]) -> MetricRow:
    samples = format_rate(_get(summary, "throughput", "samples_per_s"), "samples/s")
    tokens = _get(summary, "throughput", "tokens_per_s")
    value = samples if tokens is None else f"{samples} · {format_rate(tokens, 'tokens/s')}"
    return MetricRow("Throughput", value)


def _memory_row(summary: Mapping[str, Any]) -> MetricRow:
    """Peak memory, saying what was measured: CUDA allocator peak, or host RSS growth on CPU."""
    text = format_bytes(summary.get("peak_memory_bytes"))
    memory = summary.get("memory")
    if text == NA or not isinstance(memory, Mapping):
        return MetricRow("Peak memory", text)
    if _num(memory.get("cuda_peak_allocated_bytes")) is not None:
        text += " CUDA allocated"
        if _num(memory.get("cuda_peak_reserved_bytes")) is not None:
            text += f" ({format_bytes(memory['cuda_peak_reserved_bytes'])} reserved)"
    elif _num(memory.get("rss_peak_growth_bytes")) is not None:
        text += " host RSS growth"
    snapshots = summary.get("memory_snapshot_files")
    if isinstance(snapshots, list) and snapshots:
        text += f" · snapshot {', '.join(map(str, snapshots))} (autotune report reads it)"
    return MetricRow("Peak memory", text)


def _mfu_row(summary: Mapping[str, Any]) -> MetricRow:
    mfu = _num(summary.get("mfu"))
    return MetricRow("MFU", "n/a — device peak unknown" if mfu is None else format_pct(mfu))


def _device_row(summary: Mapping[str, Any]) -> MetricRow:
    kind, name, count = (_get(summary, "device", k) for k in ("kind", "name", "count"))
    if kind is None and name is None:
        return MetricRow("Device", NA)
    text = str(kind or NA) + (f" ({name})" if name else "")
    n = _num(count)
    if n is not None and n != 1:
        text += f" ×{n:.0f}"
    ranks = summary.get("ranks")
    if isinstance(ranks, Sequence) and not isinstance(ranks, str) and ranks:
        text += f", {len(ranks)} ranks"
    return MetricRow("Device", text)


def _host_row(summary: Mapping[str, Any]) -> MetricRow:
    cpu = _num(_get(summary, "host", "cpu_util_pct_mean"))
    rss = _get(summary, "host", "rss_peak_bytes")
    cpu_text = NA if cpu is None else f"{cpu:.0f}%"
    return MetricRow("Host", f"CPU util {cpu_text} mean · RSS peak {format_bytes(rss)}")


def _load_row(summary: Mapping[str, Any]) -> MetricRow:
    return MetricRow("Machine load", load_line(load_of(summary)) or "n/a (not recorded)")


def _gpu_rows(summary: Mapping[str, Any]) -> tuple[MetricRow, ...]:
    """One row per entry of summary.json's ``gpu`` list (profilers.contract.summarize.gpu_aggregates)."""
    gpus = summary.get("gpu")
    if not isinstance(gpus, Sequence) or isinstance(gpus, str):
        return ()
    rows = []
    for i, entry in enumerate(gpus):
        if not isinstance(entry, Mapping):
            continue
        label = f"GPU {entry.get('index', i)}" + (f" {entry['name']}" if entry.get("name") else "")
        util = _num(_get(entry, "util_pct", "mean"))
        parts = [
            f"util {NA if util is None else f'{util:.0f}%'}",
            f"power {format_si(entry.get('power_w_mean'), 'W')}",
            f"energy {format_si(entry.get('energy_j'), 'J')}",
        ]
        if _num(entry.get("mem_used_bytes_max")) is not None:
            parts.append(f"mem peak {format_bytes(entry['mem_used_bytes_max'])}")
        temp = _num(entry.get("temperature_c_max"))
        if temp is not None:
            parts.append(f"{temp:.0f} °C max")
        throttle = entry.get("throttle_reasons")
        if throttle and isinstance(throttle, Sequence) and not isinstance(throttle, str):
            parts.append("throttled: " + ", ".join(str(t) for t in throttle))
        elif throttle and isinstance(throttle, int | str):
            parts.append(f"throttled: {throttle}")
        rows.append(MetricRow(label, " · ".join(parts)))
    return tuple(rows)


def _phase_rows(summary: Mapping[str, Any]) -> tuple[PhaseRow, ...]:
    phases = summary.get("phases")
    phases = phases if isinstance(phases, Mapping) else {}
    names = list(PHASES) + [k for k in phases if k not in PHASES]
    rows = []
    for name in names:
        frac = _num(phases.get(name))
        if name in OPTIONAL_PHASES and not frac:
            continue
        rows.append(PhaseRow(name, frac, format_pct(frac), bar(frac)))
    return tuple(rows)


def _top_op_rows(summary: Mapping[str, Any], n: int = 3) -> tuple[OpRow, ...]:
    ops = summary.get("top_ops")
    if not isinstance(ops, Sequence) or isinstance(ops, str):
        return ()
    timed = [
        (t, op) for op in ops if isinstance(op, Mapping) and (t := _num(op.get("self_time_us"))) is not None
    ]
    timed.sort(key=lambda pair: -pair[0])
    return tuple(
        OpRow(str(op.get("name", "?")), str(op.get("device") or NA), format_seconds(t * 1e-6))
        for t, op in timed[:n]
    )


def _where_sentence(phases: tuple[PhaseRow, ...], ops: tuple[OpRow, ...]) -> str:
    known = [p for p in phases if p.fraction is not None]
    if known:
        top = max(known, key=lambda p: p.fraction or 0.0)
        text = f"Most of the step is {top.name} ({top.pct})."
    else:
        text = "Phase breakdown n/a."
    if ops:
        listed = ", ".join(f"{op.name} {op.self_time} ({op.device})" for op in ops)
        text += f" Top ops by self time: {listed}."
    else:
        text += " Top ops n/a (no deep-profile window)."
    return text


def build_summary_view(summary: Mapping[str, Any], run_dir: object = None) -> SummaryView:
    """Turn a summary.json dict into display rows. Missing keys and ``None`` values show "n/a".

    ``run_dir`` overrides ``summary["run_dir"]`` (summary.json does not have to carry its own path).
    """
    flops = summary.get("flops_per_step")
    metrics = (
        _steps_row(summary),
        _step_time_row(summary),
        _throughput_row(summary),
        _loss_row(summary),
        _memory_row(summary),
        MetricRow("FLOPs / step", format_si(flops, "FLOP")),
        _mfu_row(summary),
        MetricRow("Precision", str(summary.get("precision") or NA)),
        _device_row(summary),
        _host_row(summary),
        _load_row(summary),
        MetricRow("Wall time", format_seconds(summary.get("wall_time_s"))),
    )
    phases = _phase_rows(summary)
    ops = _top_op_rows(summary)
    raw_warnings = summary.get("warnings")
    warnings = (
        tuple(str(w) for w in raw_warnings)
        if isinstance(raw_warnings, Sequence) and not isinstance(raw_warnings, str)
        else ()
    )
    where_dir = run_dir if run_dir is not None else summary.get("run_dir")
    return SummaryView(
        title=f"autotune profile: {summary.get('name') or NA}",
        metrics=metrics,
        phases=phases,
        gpus=_gpu_rows(summary),
        top_ops=ops,
        where=_where_sentence(phases, ops),
        run_dir=NA if where_dir is None else str(where_dir),
        warnings=warnings,
        outcome=None if summary.get("outcome") == "finished" else outcome_sentence(dict(summary)),
        no_steps=summary.get("outcome") == "no_steps",
    )


# --------------------------------------------------------------------------------------- drawing


def draw_summary_view(view: SummaryView, console: Console) -> None:
    """Draw ``view`` as a rich table followed by the where-the-time-goes line and warnings."""
    if view.no_steps:  # a table of n/a says nothing: say what was (not) seen
        console.print(Text(view.title, style="bold"))
        console.print(Text("Outcome: ", style="bold red") + Text(view.outcome or "no training step was seen"))
        console.print(Text("Run directory: ", style="bold") + Text(view.run_dir))
        for warning in view.warnings:
            console.print(Text("warning: ", style="bold yellow") + Text(warning))
        return
    if view.outcome is not None:
        style = "bold red" if view.outcome.startswith("crashed") else "bold"
        console.print(Text("Outcome: ", style=style) + Text(view.outcome))
    table = Table(title=view.title, title_justify="left", show_header=False, box=box.ROUNDED)
    table.add_column("metric", style="bold", no_wrap=True)
    table.add_column("value")
    for row in view.metrics:
        table.add_row(Text(row.label), Text(row.value))
    table.add_section()
    table.add_row(Text("Phases"), Text("share of the step time", style="dim"))
    for phase in view.phases:
        table.add_row(
            Text(f"  {phase.name}", style="not bold"),
            Text(f"{phase.pct:>6} ") + Text(phase.bar, style="cyan"),
        )
    if view.gpus:
        table.add_section()
        for row in view.gpus:
            table.add_row(Text(row.label), Text(row.value))
    console.print(table)
    console.print(Text("Where the time goes: ", style="bold") + Text(view.where))
    console.print(Text("Run directory: ", style="bold") + Text(view.run_dir))
    for warning in view.warnings:
        console.print(Text("warning: ", style="bold yellow") + Text(warning))


def render_summary(summary: Mapping[str, Any], console: Console, run_dir: object = None) -> None:
    """Print the readable summary of one profile (``summary.json`` content) to ``console``."""
    draw_summary_view(build_summary_view(summary, run_dir), console)
