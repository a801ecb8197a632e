"""The readable terminal summary of one profile (``autotune demo``, the end of ``autotune profile``).

Data first, then drawing: :func:`build_summary_view` turns a ``summary.json`` dict into a
:class:`SummaryView` of display strings (tested without a terminal), and :func:`draw_summary_view`
draws it with rich. Every value may be missing or ``None``; those show as ``"n/a"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from autotune.fmt import NA, format_bytes, format_number, format_pct, format_rate, format_seconds, format_si
from profilers.contract.json_checks import SummaryError
from profilers.contract.load import load_line
from profilers.contract.outcome import outcome_sentence, stopped_by
from profilers.contract.profile_summary import ProfileSummary
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


def _step_time_row(summary: ProfileSummary) -> MetricRow:
    t = summary.step_time
    median = format_seconds(t.median_s)
    spread = (
        f" (p10–p90 {format_seconds(t.p10_s)} – {format_seconds(t.p90_s)})"
        if None not in (t.p10_s, t.p90_s)
        else ""
    )
    return MetricRow("Step time (median)", median + spread if median != NA else NA)


def _steps_row(summary: ProfileSummary) -> MetricRow:
    if summary.steps is None:
        return MetricRow("Steps", NA)
    measured = summary.measured_steps
    text = f"{summary.steps}" + ("" if measured is None else f" ({measured} measured)")
    stop = stopped_by(summary.stop_reason)
    return MetricRow("Steps", text + (f", {stop}" if stop else ""))


def _loss_row(summary: ProfileSummary) -> MetricRow:
    """First and last training loss, and how many steps were NaN/inf."""
    loss = summary.loss
    if loss.first is None and loss.last is None and not loss.non_finite_steps:
        return MetricRow("Loss", NA)
    known = loss.first is not None and loss.last is not None
    text = f"{format_number(loss.first, 4)} → {format_number(loss.last, 4)}" if known else NA
    if loss.non_finite_steps:
        text += f" · {loss.non_finite_steps} NaN/inf steps from step {loss.first_non_finite_step}"
    return MetricRow("Loss", text)


def _throughput_row(summary: ProfileSummary) -> MetricRow:
    t = summary.throughput
    samples = format_rate(t.samples_per_s, "samples/s")
    value = samples if t.tokens_per_s is None else f"{samples} · {format_rate(t.tokens_per_s, 'tokens/s')}"
    return MetricRow("Throughput", value)


def _memory_row(summary: ProfileSummary) -> MetricRow:
    """Peak memory, saying what was measured: CUDA allocator peak, or host RSS growth on CPU."""
    text = format_bytes(summary.peak_memory_bytes)
    if text == NA:
        return MetricRow("Peak memory", text)
    memory = summary.memory
    if memory.cuda_peak_allocated_bytes is not None:
        text += " CUDA allocated"
        if memory.cuda_peak_reserved_bytes is not None:
            text += f" ({format_bytes(memory.cuda_peak_reserved_bytes)} reserved)"
    elif memory.rss_peak_growth_bytes is not None:
        text += " host RSS growth"
    if summary.memory_snapshot_files:
        text += f" · snapshot {', '.join(summary.memory_snapshot_files)} (autotune report reads it)"
    return MetricRow("Peak memory", text)


def _mfu_row(summary: ProfileSummary) -> MetricRow:
    mfu = summary.mfu
    return MetricRow("MFU", "n/a — device peak unknown" if mfu is None else format_pct(mfu))


def _device_row(summary: ProfileSummary) -> MetricRow:
    device = summary.device
    if device.kind is None and device.name is None:
        return MetricRow("Device", NA)
    text = str(device.kind or NA) + (f" ({device.name})" if device.name else "")
    if device.count is not None and device.count != 1:
        text += f" ×{device.count}"
    if summary.rank_count:
        text += f", {summary.rank_count} ranks"
    return MetricRow("Device", text)


def _host_row(summary: ProfileSummary) -> MetricRow:
    host = summary.host
    cpu = None if host is None else host.cpu_util_pct_mean
    rss = None if host is None else host.rss_peak_bytes
    cpu_text = NA if cpu is None else f"{cpu:.0f}%"
    return MetricRow("Host", f"CPU util {cpu_text} mean · RSS peak {format_bytes(rss)}")


def _load_row(summary: ProfileSummary) -> MetricRow:
    return MetricRow("Machine load", load_line(summary.load) or "n/a (not recorded)")


def _gpu_rows(summary: ProfileSummary) -> tuple[MetricRow, ...]:
    """One row per entry of summary.json's ``gpu`` list (profilers.contract.summarize.gpu_aggregates)."""
    rows = []
    for gpu in summary.gpus:
        label = f"GPU {gpu.index}" + (f" {gpu.name}" if gpu.name else "")
        util = None if gpu.util is None else gpu.util.mean
        parts = [
            f"util {NA if util is None else f'{util:.0f}%'}",
            f"power {format_si(gpu.power_w_mean, 'W')}",
            f"energy {format_si(gpu.energy_j, 'J')}",
        ]
        if gpu.mem_used_bytes_max is not None:
            parts.append(f"mem peak {format_bytes(gpu.mem_used_bytes_max)}")
        if gpu.temperature_c_max is not None:
            parts.append(f"{gpu.temperature_c_max:.0f} °C max")
        if gpu.throttle_reasons:
            parts.append("throttled: " + ", ".join(gpu.throttle_reasons))
        rows.append(MetricRow(label, " · ".join(parts)))
    return tuple(rows)


def _phase_rows(summary: ProfileSummary) -> tuple[PhaseRow, ...]:
    phases = summary.phases
    names = list(PHASES) + [k for k in phases if k not in PHASES]
    rows = []
    for name in names:
        frac = phases.get(name)
        if name in OPTIONAL_PHASES and not frac:
            continue
        rows.append(PhaseRow(name, frac, format_pct(frac), bar(frac)))
    return tuple(rows)


def _top_op_rows(summary: ProfileSummary, n: int = 3) -> tuple[OpRow, ...]:
    timed = sorted((op for op in summary.top_ops if op.self_time_us is not None),
                   key=lambda op: -(op.self_time_us or 0.0))  # fmt: skip
    return tuple(
        OpRow(op.name, op.device or NA, format_seconds((op.self_time_us or 0.0) * 1e-6)) for op in timed[:n]
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


def build_summary_view(summary: ProfileSummary | Mapping[str, Any], run_dir: object = None) -> SummaryView:
    """Turn a profile summary into display rows. Missing figures show "n/a".

    ``summary`` is the parsed record, or summary.json's dict (parsed here; SummaryError for a figure of
    the wrong type). ``run_dir`` overrides the summary's own ``run_dir``.
    """
    summary = ProfileSummary.of(summary)
    metrics = (
        _steps_row(summary),
        _step_time_row(summary),
        _throughput_row(summary),
        _loss_row(summary),
        _memory_row(summary),
        MetricRow("FLOPs / step", format_si(summary.flops_per_step, "FLOP")),
        _mfu_row(summary),
        MetricRow("Precision", summary.precision or NA),
        _device_row(summary),
        _host_row(summary),
        _load_row(summary),
        MetricRow("Wall time", format_seconds(summary.wall_time_s)),
    )
    phases = _phase_rows(summary)
    ops = _top_op_rows(summary)
    where_dir = run_dir if run_dir is not None else summary.run_dir
    return SummaryView(
        title=f"autotune profile: {summary.name or NA}",
        metrics=metrics,
        phases=phases,
        gpus=_gpu_rows(summary),
        top_ops=ops,
        where=_where_sentence(phases, ops),
        run_dir=NA if where_dir is None else str(where_dir),
        warnings=summary.warnings,
        outcome=None if summary.outcome == "finished" else outcome_sentence(summary),
        no_steps=summary.outcome == "no_steps",
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


def render_summary(
    summary: ProfileSummary | Mapping[str, Any], console: Console, run_dir: object = None
) -> ProfileSummary | None:
    """Print the readable summary of one profile (``summary.json`` content) to ``console``.

    A summary this version cannot read is one line, never a traceback at the end of the user's run;
    it gives None, else the record it showed.
    """
    try:
        record = ProfileSummary.of(summary)
        view = build_summary_view(record, run_dir)
    except SummaryError as exc:
        console.print(Text(f"autotune: cannot show this run's summary ({exc})", style="bold red"))
        return None
    draw_summary_view(view, console)
    return record
