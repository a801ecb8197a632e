"""The HTML report's plotly charts, each drawn from one section record and nothing else.

Each ``*_charts(section)`` returns :class:`Chart` records: the div id, an accessible label, a height
and the figure as a plain ``{"data", "layout"}`` dict (without the template, which the page sets
once). Strings from the run (GPU names, series labels, parameters) are HTML-escaped before they
reach plotly, because plotly reads ``<b>``, ``<a href>`` and entities in its text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]
import plotly.io as pio  # type: ignore[import-untyped]
from plotly.subplots import make_subplots  # type: ignore[import-untyped]

from autotune.console import format_seconds
from autotune.fmt import format_number
from autotune.report.plan_cells import cost_time_points
from autotune.report.sections import (
    ConvergenceSection,
    GpuTimeSection,
    HostTimeline,
    ParetoSection,
    StepSection,
    SweepSection,
    TimelineSection,
)
from autotune.report.style import OTHER_STATUS_COLOUR, STATUS_COLOURS, metric_label
from profilers.contract.plan_doc import PlanDocument

GIB = 1024**3
PALETTE = ("#0969da", "#d97706", "#1a7f37", "#8250df", "#cf222e", "#0598bc", "#bf3989", "#57606a")
PHASE_COLOURS = {
    "data": "#d97706",
    "forward": "#0969da",
    "backward": "#8250df",
    "optimizer": "#1a7f37",
    "eval": "#0598bc",
    "other": "#8c959f",
}
_FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif'


@dataclass(frozen=True, slots=True)
class Chart:
    """One chart of the page: where it goes and the plotly figure (``data`` and ``layout``)."""

    div_id: str
    label: str
    height_px: int
    figure: dict[str, Any]
    caption: str = ""  # plain text under the chart: how to read what the legend cannot say


def template_json() -> dict[str, Any]:
    """The page's one plotly template (plotly_white in the page's font), as JSON-ready data."""
    template = go.layout.Template(pio.templates["plotly_white"])
    template.layout.font = {"family": _FONT, "size": 12, "color": "#1f2328"}
    template.layout.colorway = PALETTE
    return dict(template.to_plotly_json())


def plot_text(value: object) -> str:
    """A run's string as plotly text: shown literally, never read as plotly's HTML-like markup.

    Only ``<``, ``>`` and ``&`` are escaped: plotly decodes those entities but shows ``&quot;`` as is.
    """
    return escape(str(value), quote=False)


def _chart(div_id: str, label: str, fig: go.Figure, height_px: int, caption: str = "") -> Chart:
    fig.update_layout(
        height=height_px,
        margin={"l": 64, "r": 24, "t": 36, "b": 48},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "xanchor": "left"},
        hovermode="closest",
    )
    figure = fig.to_plotly_json()
    figure["layout"].pop("template", None)
    return Chart(div_id, label, height_px, {"data": figure["data"], "layout": figure["layout"]}, caption)


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values 1, 2, 5 × 10^k covering ``lo``..``hi`` (both > 0) for a log axis."""
    ticks: list[float] = []
    k = math.floor(math.log10(lo)) - 1
    while 10**k <= hi * 10:
        ticks.extend(m * 10**k for m in (1, 2, 5))
        k += 1
    inside = [t for t in ticks if lo <= t <= hi]
    below = [t for t in ticks if t < lo][-1:]
    above = [t for t in ticks if t > hi][:1]
    return [float(f"{t:.6g}") for t in below + inside + above]


def _gib(values: tuple[float | None, ...]) -> list[float | None]:
    return [None if v is None else v / GIB for v in values]


def _scatter(fig: go.Figure, x: Any, y: Any, name: str, hover: str, **style: Any) -> None:
    """Add one scatter trace; ``hover`` is its hover template without the ``<extra>`` box."""
    fig.add_scatter(x=list(x), y=list(y), name=name, hovertemplate=f"{hover}<extra></extra>", **style)


# ------------------------------------------------------------------------------------------- steps


#: Colours of the temporal breakdown, as HTA draws it: idle, compute, non-compute.
BREAKDOWN_COLOURS = {"idle": "#8c959f", "compute": "#1a7f37", "non-compute": "#d97706"}


def gpu_time_charts(g: GpuTimeSection) -> list[Chart]:
    """Each rank's GPU span as idle, compute and non-compute shares (one stacked bar per rank)."""
    fig = go.Figure()
    ranks = [f"rank {r.rank}" for r in g.ranks]
    for label, attr in (("idle", "idle_pct"), ("compute", "compute_pct"), ("non-compute", "non_compute_pct")):
        values = [getattr(r, attr) or 0.0 for r in g.ranks]
        fig.add_bar(
            x=values,
            y=ranks,
            orientation="h",
            name=label,
            marker_color=BREAKDOWN_COLOURS[label],
            text=[f"{label} {v:.0f}%" if v >= 8 else "" for v in values],
            textposition="inside",
            insidetextanchor="middle",
            hovertemplate=f"%{{y}}: {label} %{{x:.1f}}% of the GPU span<extra></extra>",
        )
    fig.update_layout(
        barmode="stack",
        xaxis={"title": {"text": "Share of the GPU span (%)"}, "range": [0, 100]},
        yaxis={"autorange": "reversed"},
    )
    height = 120 + 40 * len(g.ranks)
    caption = "Span: the first GPU activity's start to the last one's end, per rank (HTA's breakdown)."
    return [_chart("chart-gpu-time", "GPU time per rank: idle, compute, non-compute", fig, height, caption)]


def step_charts(s: StepSection) -> list[Chart]:
    """The phase shares of a step as one stacked bar, and the step time over the steps."""
    bar = go.Figure()
    for phase, fraction, median_s in s.phase_rows():
        name, median = plot_text(phase), format_seconds(median_s)
        label = f"{name} {fraction * 100:.0f}%" if fraction >= 0.06 else ""  # no room inside a thin bar
        bar.add_bar(
            x=[fraction * 100],
            y=["step"],
            orientation="h",
            name=name,
            text=[label],
            textangle=0,
            marker_color=PHASE_COLOURS.get(phase),
            textposition="inside",
            insidetextanchor="middle",
            hovertemplate=f"{name}: %{{x:.1f}}% of the step, median {median}<extra></extra>",
        )
    x_title = {"title": {"text": "Share of step time (%)"}, "range": [0, 100]}
    bar.update_layout(barmode="stack", showlegend=False, xaxis=x_title, yaxis={"visible": False})
    charts = [_chart("chart-steps-phases", "Share of the step time per phase", bar, 150)]

    line = go.Figure()
    kinds = sorted(dict.fromkeys(s.series_kind), key=lambda k: k != "warmup")  # warm-up first, in grey
    colours = iter(PALETTE * len(kinds))
    for kind in kinds:
        idx = [i for i, k in enumerate(s.series_kind) if k == kind]
        colour = "#8c959f" if kind == "warmup" else next(colours)
        _scatter(
            line,
            (s.series_step[i] for i in idx),
            (s.series_duration_s[i] * 1e3 for i in idx),
            plot_text(kind),
            f"{plot_text(kind)} step %{{x}}: %{{y:.2f}} ms",
            marker={"size": 4},
            mode="lines+markers" if len(idx) < 60 else "lines",
            line={"color": colour, "width": 1.5},
        )
    by_step = dict(zip(s.series_step, s.series_duration_s, strict=True))
    outliers = [step for step in s.outlier_steps if step in by_step]
    if outliers:
        _scatter(
            line,
            outliers,
            (by_step[step] * 1e3 for step in outliers),
            "outlier",
            "outlier step %{x}: %{y:.2f} ms",
            mode="markers",
            marker={"color": "#cf222e", "size": 10, "symbol": "x"},
        )
    if s.series_step:  # a trace, not a shape with an annotation: annotations on a log axis take log10(y)
        median = format_seconds(s.median_s)
        _scatter(
            line,
            (min(s.series_step), max(s.series_step)),
            [s.median_s * 1e3] * 2,
            f"median {median}",
            f"median {median}",
            mode="lines",
            line={"dash": "dash", "color": "#57606a", "width": 1},
        )
    durations_ms = [d * 1e3 for d in s.series_duration_s if d > 0]
    yaxis: dict[str, Any] = {"title": {"text": "Step time (ms)"}}
    if durations_ms and max(durations_ms) / min(durations_ms) > 10:  # a slow warm-up would flatten the rest
        ticks = log_ticks(min(durations_ms), max(durations_ms))
        yaxis.update(type="log", tickvals=ticks, ticktext=[format_number(v, 6) for v in ticks])
    line.update_layout(xaxis={"title": {"text": "Step"}}, yaxis=yaxis)
    charts.append(_chart("chart-steps-series", "Step time over the steps", line, 300))
    return charts


# ------------------------------------------------------------------------------------- timelines


def gpu_charts(t: TimelineSection) -> list[Chart]:
    """Each GPU's utilisation, memory (with its total), power and SM clock over time, in four rows."""
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.05)
    totals: set[int] = set()
    for n, gpu in enumerate(t.gpus):
        colour = PALETTE[n % len(PALETTE)]
        name = plot_text(f"GPU {gpu.index}" + (f" ({gpu.name})" if gpu.name else ""))
        rows = (
            (gpu.util_pct, "%{y:.0f}%"),
            (_gib(gpu.mem_used_bytes), "%{y:.1f} GiB"),
            (gpu.power_w, "%{y:.0f} W"),
            (gpu.sm_clock_mhz, "%{y:.0f} MHz"),
        )
        for row, (values, fmt) in enumerate(rows, start=1):
            _scatter(
                fig,
                gpu.t_s,
                values,
                name,
                f"{name}<br>%{{x:.1f}} s: {fmt}",
                mode="lines",
                row=row,
                col=1,
                legendgroup=name,
                showlegend=row == 1,
                line={"color": colour, "width": 1.5},
            )
        if gpu.mem_total_bytes:
            totals.add(gpu.mem_total_bytes)
    for total in sorted(totals):
        fig.add_hline(
            y=total / GIB,
            row=2,
            col=1,
            line={"dash": "dash", "color": "#cf222e", "width": 1},
            annotation_text=f"total {total / GIB:.1f} GiB",
            annotation_position="bottom left",
        )
    titles = ("Utilisation (%)", "Memory used (GiB)", "Power (W)", "SM clock (MHz)")
    for row, title in enumerate(titles, start=1):
        fig.update_yaxes(title_text=title, rangemode="tozero", row=row, col=1)
    fig.update_yaxes(range=[0, 105], row=1, col=1)
    fig.update_xaxes(title_text="Time since the first sample (s)", row=4, col=1)
    return [_chart("chart-gpu-timelines", "GPU utilisation, memory, power and SM clock over time", fig, 720)]


def host_charts(h: HostTimeline) -> list[Chart]:
    """The host's CPU utilisation and the process's resident memory over time, in two rows."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    _scatter(
        fig,
        h.t_s,
        h.cpu_util_pct,
        "CPU",
        "%{x:.1f} s: %{y:.0f}%",
        mode="lines",
        row=1,
        col=1,
        line={"color": PALETTE[0], "width": 1.5},
    )
    _scatter(
        fig,
        h.t_s,
        _gib(h.rss_bytes),
        "RSS",
        "%{x:.1f} s: %{y:.2f} GiB",
        mode="lines",
        row=2,
        col=1,
        line={"color": PALETTE[3], "width": 1.5},
    )
    fig.update_yaxes(title_text="CPU (%)", rangemode="tozero", row=1, col=1)
    of_total = "" if h.mem_total_bytes is None else f" of {h.mem_total_bytes / GIB:,.0f}"
    fig.update_yaxes(title_text=f"RSS (GiB{of_total})", rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title_text="Time since the first sample (s)", row=2, col=1)
    fig.update_layout(showlegend=False)
    return [_chart("chart-host-timeline", "Host CPU utilisation and resident memory over time", fig, 380)]


# ---------------------------------------------------------------------------------------- tuning


def sweep_charts(s: SweepSection) -> list[Chart]:
    """Throughput (left) and peak memory (right) against the batch parameter, one line per series."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.09)
    batches: set[float] = set()
    for n, series in enumerate(s.series):
        colour, name = PALETTE[n % len(PALETTE)], plot_text(series.label)
        ok = [p for p in series.points if p.samples_per_s is not None]
        failed = [p for p in series.points if p.samples_per_s is None]
        mem = [p for p in series.points if p.peak_memory_bytes is not None]
        batches.update(p.batch for p in series.points)
        group = {"legendgroup": name, "row": 1}
        _scatter(
            fig,
            (p.batch for p in ok),
            (p.samples_per_s for p in ok),
            name,
            f"{name}<br>batch %{{x}}: %{{y:,.0f}} samples/s (trial %{{customdata}})",
            col=1,
            mode="lines+markers",
            line={"color": colour},
            customdata=[p.trial_id for p in ok],
            **group,
        )
        if failed:
            _scatter(
                fig,
                (p.batch for p in failed),
                [0] * len(failed),
                name,
                f"{name}<br>batch %{{x}}: %{{text}}, no throughput",
                col=1,
                mode="markers",
                cliponaxis=False,  # a cross on the zero line is not cut in half
                showlegend=False,
                text=[plot_text(p.status) for p in failed],
                marker={"color": colour, "symbol": "x", "size": 11},
                **group,
            )
        _scatter(
            fig,
            (p.batch for p in mem),
            ((p.peak_memory_bytes or 0) / GIB for p in mem),
            name,
            f"{name}<br>batch %{{x}}: %{{y:.1f}} GiB (%{{text}})",
            col=2,
            mode="lines+markers",
            showlegend=False,
            line={"color": colour, "dash": "dot"},
            text=[plot_text(p.status) for p in mem],
            **group,
        )
    if s.memory_budget_bytes:
        fig.add_hline(
            y=s.memory_budget_bytes / GIB,
            row=1,
            col=2,
            line={"dash": "dash", "color": "#cf222e"},
            annotation_text=f"budget {s.memory_budget_bytes / GIB:.0f} GiB",
            annotation_position="bottom right",
        )
    ticks = sorted(batches)
    log = bool(ticks) and ticks[0] > 0
    for col in (1, 2):
        fig.update_xaxes(
            title_text=f"{plot_text(s.batch_param)} (samples per device)",
            row=1,
            col=col,
            type="log" if log else "linear",
            tickvals=ticks,
            ticktext=[format_number(v, 6) for v in ticks],
        )
    fig.update_yaxes(title_text="Throughput (samples/s)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="Peak memory (GiB)", rangemode="tozero", row=1, col=2)
    budget = ", with the memory budget dashed" if s.memory_budget_bytes else ""
    caption = (
        "Left: throughput; a cross at zero is a trial that gave none (out of memory, diverged). "
        f"Right: peak memory per device{budget}."
    )
    return [_chart("chart-sweep", "Throughput and peak memory against the batch size", fig, 380, caption)]


def convergence_charts(c: ConvergenceSection) -> list[Chart]:
    """Each trial's objective coloured by status, the best so far as a step line; failures on the floor."""
    fig = go.Figure()
    values = [v for v in c.values if v is not None]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    pad = (hi - lo) * 0.08 or abs(hi) * 0.08 or 1.0
    for status in dict.fromkeys(c.statuses):
        idx = [i for i, st in enumerate(c.statuses) if st == status]
        has = [i for i in idx if c.values[i] is not None]
        none = [i for i in idx if c.values[i] is None]
        colour, name = STATUS_COLOURS.get(status, OTHER_STATUS_COLOUR), plot_text(status)
        if has:
            _scatter(
                fig,
                (c.trial_ids[i] for i in has),
                (c.values[i] for i in has),
                name,
                f"trial %{{x}} ({name}): %{{y:,.4g}}",
                mode="markers",
                legendgroup=name,
                marker={"color": colour, "size": 10},
            )
        if none:  # drawn on a floor under the lowest value: they have no objective to place them by
            _scatter(
                fig,
                (c.trial_ids[i] for i in none),
                [lo - 1.5 * pad] * len(none),
                f"{name} (no value)",
                f"trial %{{x}}: {name}, no objective",
                mode="markers",
                legendgroup=name,
                marker={"color": colour, "size": 11, "symbol": "x"},
            )
    _scatter(
        fig,
        c.trial_ids,
        c.best_so_far,
        "best so far",
        "best after trial %{x}: %{y:,.4g}",
        mode="lines",
        line={"shape": "hv", "color": "#24292f", "width": 2},
    )
    better = "higher is better" if c.direction == "maximize" else "lower is better"
    yaxis = {
        "title": {"text": f"{plot_text(metric_label(c.metric))}, {better}"},
        "range": [lo - 2.2 * pad, hi + pad],
    }
    fig.update_layout(xaxis={"title": {"text": "Trial"}, "dtick": 1}, yaxis=yaxis)
    caption = (
        "Crosses under the axis: trials with no objective, by status." if len(values) < len(c.values) else ""
    )
    return [_chart("chart-convergence", "Objective of each trial and the best so far", fig, 340, caption)]


def pareto_charts(p: ParetoSection) -> list[Chart]:
    """Throughput against dollars per million samples; the Pareto front joined and highlighted."""
    fig = go.Figure()
    rest = [pt for pt in p.points if not pt.on_front]
    front = sorted((pt for pt in p.points if pt.on_front), key=lambda pt: pt.usd_per_million_samples)
    hover = "%{text}<br>$%{x:,.3r} per million samples, %{y:,.0f} samples/s"
    for points, name in ((rest, "dominated"), (front, "Pareto front")):
        if not points:
            continue
        style: dict[str, Any] = {"mode": "markers", "marker": {"color": "#8c959f", "size": 9}}
        if points is front:
            style = {
                "mode": "lines+markers+text",
                "texttemplate": "#%{customdata}",
                "textposition": "top right",
                "marker": {"color": "#1a7f37", "size": 12, "line": {"color": "#fff", "width": 1}},
                "line": {"color": "#1a7f37", "dash": "dot"},
            }
        _scatter(
            fig,
            (pt.usd_per_million_samples for pt in points),
            (pt.samples_per_s for pt in points),
            name,
            hover,
            customdata=[pt.trial_id for pt in points],
            text=[plot_text(f"trial {pt.trial_id}: {pt.label}") for pt in points],
            **style,
        )
    price = f"at ${p.price_per_gpu_hour:.2f}/device-hour"
    fig.update_layout(
        xaxis={"title": {"text": f"Cost (USD per million samples, {price})"}, "rangemode": "tozero"},
        yaxis={"title": {"text": "Throughput (samples/s)"}, "rangemode": "tozero"},
    )
    caption = "Up and to the left is better; the front holds the trials no other beats on both."
    return [_chart("chart-pareto", "Throughput against cost per million samples", fig, 380, caption)]


def plan_charts(data: PlanDocument) -> list[Chart]:
    """$ against time to train, one series per GPU, each point a configuration that fits."""
    series = cost_time_points(data)
    if not series:
        return []
    with_run = any(c.usd_total is not None for c in data.configs)
    fig = go.Figure()
    for gpu, points in series.items():
        fig.add_scatter(
            x=[h for h, _, _ in points], y=[u for _, u, _ in points], mode="markers", name=plot_text(gpu),
            text=[plot_text(label) for _, _, label in points],
            hovertemplate="%{text}<br>%{x:,.3r} h · $%{y:,.3r}<extra>" + plot_text(gpu) + "</extra>",
        )  # fmt: skip
    what = "the run" if with_run else "a million samples"
    fig.update_xaxes(title_text=f"hours to train {what}", type="log")
    fig.update_yaxes(title_text=f"$ for {what}", type="log")
    caption = "Each point a configuration that fits; lower is cheaper, left is faster."
    return [_chart("plan-cost-time", f"$ against time to train {what}", fig, 420, caption)]

