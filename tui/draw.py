"""Drawing the records of :mod:`tui.model` as Rich renderables (no Textual, no I/O).

The numbers are formatted by :mod:`autotune.fmt`, imported inside the functions: ``import
autotune`` brings in the package's public API (and with it ``profilers``), which the dashboard
should not pay for before it draws its first number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autotune.fmt import format_pct, format_rate, format_seconds, format_si, format_usd
from profilers.contract.schema import TrialStatus
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

#: Colour of each trial status (and of a trial still running).
STATUS_STYLES: dict[str, str] = {
    TrialStatus.OK: "green",
    TrialStatus.INFEASIBLE: "dark_orange",
    TrialStatus.OOM: "red",
    TrialStatus.TIMEOUT: "magenta",
    TrialStatus.DIVERGED: "yellow",
    TrialStatus.CRASHED: "bold red",
    TrialStatus.SKIPPED: "dim",
    TrialStatus.BUSY: "dark_khaki",
    "running": "cyan",  # a trial the study store lists as started, without its end
}
#: Colour of each step phase.
PHASE_STYLES: dict[str, str] = {
    "data": "magenta",
    "forward": "blue",
    "backward": "green",
    "optimizer": "yellow",
    "eval": "cyan",
    "other": "bright_black",
}
#: Colour of each run state.
STATE_STYLES: dict[str, str] = {
    "running": "bold green",
    "finished": "bold blue",
    "stopped": "bold red",
    "unfinished": "bold yellow",
    "waiting": "bold cyan",
    "unreadable": "bold red",
}
SEVERITY_STYLES: dict[str, str] = {
    "high": "bold white on red",
    "medium": "black on yellow",
    "low": "black on cyan",
}


def metric_value(metric: str, value: object) -> str:
    """An objective in its unit: samples/s, $ per million samples or J per sample."""
    if metric == "usd_per_million_samples":
        return format_usd(value)
    if metric == "joules_per_sample":
        return format_rate(value, "J/sample")
    return format_rate(value, "samples/s")


def metric_header(metric: str) -> str:
    """A column header for an objective: its unit."""
    return {
        "samples_per_s": "samples/s",
        "usd_per_million_samples": "$/M samples",
        "joules_per_sample": "J/sample",
    }.get(metric, metric)


def metric_number(metric: str, value: object) -> str:
    """An objective without its unit, for narrow columns."""
    return format_usd(value) if metric == "usd_per_million_samples" else format_rate(value, "").strip()


def phase_bar(phases: Sequence[tuple[str, float]], width: int) -> RenderableType:
    """One stacked bar of the phases' shares, and under it each phase's mean time and share."""
    total = sum(v for _p, v in phases)
    if total <= 0:
        return Text("no steps yet", style="dim")
    bar = Text()
    used = 0
    for i, (phase, value) in enumerate(phases):
        cells = width - used if i == len(phases) - 1 else round(width * value / total)
        cells = max(0, min(cells, width - used))
        bar.append("█" * cells, style=PHASE_STYLES.get(phase, "white"))
        used += cells
    legend = Table.grid(padding=(0, 2))
    legend.add_column(no_wrap=True)
    legend.add_column(no_wrap=True, justify="right")
    legend.add_column(no_wrap=True, justify="right")
    for phase, value in phases:
        legend.add_row(
            Text("■ ", style=PHASE_STYLES.get(phase, "white")) + Text(phase),
            format_seconds(value),
            format_pct(value / total),
        )
    return Group(bar, legend)


def _short_number(value: float) -> str:
    return format_si(value, "").strip() if abs(value) >= 1000 else format_rate(value, "").strip()


def convergence_plot(
    values: Sequence[float | None],
    best_so_far: Sequence[float | None],
    statuses: Sequence[str],
    width: int,
    height: int,
    best_index: int | None = None,
) -> Text:
    """The convergence of a study as text, trials left to right on ``height`` rows.

    Each trial's objective is a dot coloured by its status (a × on the bottom row for a trial
    without one, a star for the best); the best so far is a line.
    """
    known = [v for v in values if v is not None]
    if not known:
        return Text("no trial has finished ok yet", style="dim")
    low, high = min(known), max(known)
    span = (high - low) or abs(high) or 1.0
    label_width = max(len(_short_number(high)), len(_short_number(low))) + 1
    plot_width = max(8, width - label_width - 1)
    n = len(values)
    grid: list[list[tuple[str, str]]] = [[(" ", "")] * plot_width for _ in range(height)]

    def row_of(v: float) -> int:
        return height - 1 - round((v - low) / span * (height - 1))

    def col_of(i: int) -> int:
        return 0 if n == 1 else round(i * (plot_width - 1) / (n - 1))

    for i in range(n):  # the best-so-far line, then the trials over it
        best = best_so_far[i]
        if best is None:
            continue
        end = col_of(i + 1) if i + 1 < n else plot_width
        for c in range(col_of(i), end):
            grid[row_of(best)][c] = ("─", "cyan")
    for i, (value, status) in enumerate(zip(values, statuses, strict=True)):
        if value is None:
            grid[height - 1][col_of(i)] = ("×", STATUS_STYLES.get(status, "red"))
        else:
            style = "bold yellow" if i == best_index else STATUS_STYLES.get(status, "green")
            grid[row_of(value)][col_of(i)] = ("★" if i == best_index else "●", style)
    text = Text()
    for r, row in enumerate(grid):
        label = _short_number(high) if r == 0 else (_short_number(low) if r == height - 1 else "")
        text.append(label.rjust(label_width) + ("┤" if label else "│"), style="dim")
        for char, style in row:
            text.append(char, style=style)
        text.append("\n")
    text.append(" " * label_width + "└" + "─" * plot_width + "\n", style="dim")
    last = f"trial {n - 1}"
    axis = "trial 0" + " " * max(1, plot_width - 7 - len(last)) + last if n > 1 else "trial 0"
    text.append(" " * (label_width + 1) + axis, style="dim")
    return text


def key_value_table(items: Sequence[tuple[str, str]]) -> Table:
    """A two-column table of labels and values."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for label, value in items:
        table.add_row(label, value)
    return table


def recommendation_text(rec: Any) -> RenderableType:
    """One recommendation: its severity and title, what it gains, its evidence and its actions."""
    title = Text()
    title.append(f" {rec.severity.upper()} ", style=SEVERITY_STYLES.get(rec.severity, "reverse"))
    title.append(f" {rec.title}", style="bold")
    body = Table.grid(padding=(0, 1))
    body.add_column(no_wrap=True)
    body.add_column()
    gains = rec.gain_parts()
    if gains:
        body.add_row(Text("gain", style="green"), Text(" · ".join(gains), style="green"))
    for line in rec.evidence:
        body.add_row(Text("evidence", style="dim"), str(line))
    for line in rec.actions:
        body.add_row(Text("→ do", style="cyan"), str(line))
    return Group(title, Padding(body, (0, 0, 0, 3)))
