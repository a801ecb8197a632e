"""The Trials screen: the sortable, filterable trial table, the convergence curve, parameter effects."""

from __future__ import annotations

from collections import Counter
from typing import Any

from autotune.fmt import format_bytes, format_rate, format_seconds
from profilers.contract.outcome import stop_reason_words
from profilers.contract.schema import TrialStatus
from profilers.contract.study.trial_view import TrialView
from rich.text import Text
from textual import on
from textual.app import ComposeResult, RenderResult
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import DataTable, Static

from tui.draw import STATUS_STYLES, convergence_plot, metric_header, metric_number, metric_value
from tui.model import TrialsInfo

#: Sortable columns besides the parameters: key -> (header, sorted best/largest first by default).
COLUMNS: dict[str, tuple[str, bool]] = {
    "id": ("trial", False),
    "status": ("status", False),
    "objective": ("objective", True),
    "samples_per_s": ("samples/s", True),
    "peak_memory_bytes": ("peak memory", False),
    "step_time_s": ("step", False),
    "duration_s": ("took", False),
    "stop_reason": ("stop", False),
}


def sort_keys(info: TrialsInfo | None) -> list[str]:
    """The columns ``s`` cycles through: trial, objective, status, the parameters, then the rest."""
    params = [f"param:{name}" for name in (info.param_names if info else ())]
    return [
        "id",
        "objective",
        "status",
        *params,
        "samples_per_s",
        "peak_memory_bytes",
        "step_time_s",
        "duration_s",
    ]


def _value(row: TrialView, key: str) -> Any:
    if key.startswith("param:"):
        return row.params.get(key[6:])
    return getattr(row, key)


def sorted_rows(info: TrialsInfo, key: str, reverse: bool, text: str) -> list[TrialView]:
    """The rows matching ``text`` (any cell, case-insensitive), sorted by ``key``; blanks last."""
    needle = text.strip().lower()
    rows = [r for r in info.rows if not needle or needle in _row_text(r).lower()]
    descending = COLUMNS.get(key, ("", False))[1]
    if key == "objective" and info.direction == "minimize":
        descending = False
    descending ^= reverse
    present = [r for r in rows if _value(r, key) is not None]
    blank = [r for r in rows if _value(r, key) is None]

    def order(r: TrialView) -> tuple[int, Any]:
        v = _value(r, key)
        return (0, v) if isinstance(v, int | float) and not isinstance(v, bool) else (1, str(v))

    return sorted(present, key=order, reverse=descending) + blank


def _row_text(row: TrialView) -> str:
    params = " ".join(f"{k}={v}" for k, v in row.params.items()) or "baseline"
    return f"{row.id} {params} {row.status} {row.stop_reason or ''} {row.error or ''}"


def _clip(text: str, width: int) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= width else line[: width - 1] + "…"


class ConvergencePlot(Widget):
    """Each trial's objective and the best so far, as a text plot."""

    DEFAULT_CSS = """
    ConvergencePlot { height: 100%; border: round $secondary; padding: 0 1; }
    """

    info: reactive[TrialsInfo | None] = reactive(None)

    def render(self) -> RenderResult:
        """The plot at the widget's size."""
        info = self.info
        if info is None:
            return Text("")
        ids = info.convergence_ids
        best = ids.index(info.best_id) if info.best_id in ids else None
        return convergence_plot(
            info.values,
            info.best_so_far,
            info.convergence_statuses,
            width=self.content_size.width,
            height=max(3, self.content_size.height - 2),
            best_index=best,
        )


class TrialsPane(Vertical):
    """The Trials screen; set :attr:`info` to redraw it."""

    info: reactive[TrialsInfo | None] = reactive(None)
    sort_by: reactive[str] = reactive("id")
    reverse: reactive[bool] = reactive(False)
    filter_text: reactive[str] = reactive("")
    _ready = False  # set once the children exist

    def compose(self) -> ComposeResult:
        """The summary, the table, and under it the convergence and the parameter effects."""
        yield Static("", id="trials-summary")
        yield DataTable(id="trials-table", cursor_type="row", zebra_stripes=True)
        with Horizontal(id="trials-bottom"):
            yield ConvergencePlot(id="convergence")
            yield DataTable(id="effects", cursor_type="row", show_cursor=False)

    def on_mount(self) -> None:
        """Titles and the effects table's columns."""
        self.query_one("#convergence").border_title = "Convergence"
        effects = self.query_one("#effects", DataTable)
        effects.add_columns("parameter", "value", "trials", "ok", "best", "median")
        self._ready = True
        self._redraw()

    def cycle_sort(self) -> None:
        """Sort by the next column (``s``)."""
        keys = sort_keys(self.info)
        self.reverse = False
        self.sort_by = keys[(keys.index(self.sort_by) + 1) % len(keys)] if self.sort_by in keys else "id"

    @on(DataTable.HeaderSelected, "#trials-table")
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        key = str(event.column_key.value)
        if key == self.sort_by:
            self.reverse = not self.reverse
        else:
            self.reverse = False
            self.sort_by = key

    def watch_info(self) -> None:
        """Redraw everything."""
        self._redraw()

    def watch_sort_by(self) -> None:
        """Redraw the table in the new order."""
        self._redraw()

    def watch_reverse(self) -> None:
        """Redraw the table in the new order."""
        self._redraw()

    def watch_filter_text(self) -> None:
        """Redraw the table with the rows that match."""
        self._redraw()

    def _redraw(self) -> None:
        if not self._ready:
            return
        info = self.info
        summary = self.query_one("#trials-summary", Static)
        table = self.query_one("#trials-table", DataTable)
        plot = self.query_one(ConvergencePlot)
        if info is None:
            summary.update(Text("A profile run has no trials; `autotune tune` runs a study.", style="dim"))
            table.display = plot.display = self.query_one("#effects").display = False
            return
        table.display = plot.display = self.query_one("#effects").display = True
        rows = sorted_rows(info, self.sort_by, self.reverse, self.filter_text)
        summary.update(self._summary(info, len(rows)))
        self._fill_table(table, info, rows)
        plot.info = info
        plot.border_title = f"Convergence · best {metric_header(info.metric)} so far"
        self._fill_effects(info)

    def _summary(self, info: TrialsInfo, shown: int) -> Text:
        counts = Counter(r.status for r in info.rows)
        text = Text()
        # skipped trials do not count, as in tune
        ran = sum(r.status != TrialStatus.SKIPPED for r in info.rows)
        planned = f" of {info.n_trials}" if info.n_trials else ""
        text.append(f"{ran}{planned} trials run", style="bold")
        text.append(" (" + ", ".join(f"{n} {s}" for s, n in counts.items()) + ")" if counts else "")
        if len(info.running_ids) == 1:
            text.append(f" · trial {info.running_ids[0]} running", style=STATUS_STYLES["running"])
        elif info.running_ids:
            ids = ", ".join(map(str, info.running_ids))
            text.append(f" · trials {ids} running", style=STATUS_STYLES["running"])
        best = next((r for r in info.rows if r.best), None)
        if best is not None:
            text.append(
                f" · {info.best_label}: trial {best.id}, {metric_value(info.metric, best.objective)}",
                style="bold yellow",
            )
        if info.verdict:
            text.append(f"\nverdict: {info.verdict}", style="bold yellow")
        if info.placement:
            text.append(f"\n{info.placement}", style="dim")
        if info.starved:
            text.append(f"\nbusy machine: {info.starved}", style="yellow")
        if info.bill:
            text.append(f"\ncost: {info.bill}", style="dim")
        if info.stopped:
            text.append(f"\nstopped: {info.stopped}", style="red")
        arrow = "↓" if COLUMNS.get(self.sort_by, ("", False))[1] != self.reverse else "↑"
        label = self.sort_by[6:] if self.sort_by.startswith("param:") else COLUMNS[self.sort_by][0]
        text.append(f"\nsorted by {label} {arrow} (s: next column)", style="dim")
        if self.filter_text:
            text.append(f" · filter '{self.filter_text}': {shown} of {len(info.rows)} shown", style="dim")
        return text

    def _fill_table(self, table: DataTable[Any], info: TrialsInfo, rows: list[TrialView]) -> None:
        rate = [] if info.metric == "samples_per_s" else ["samples_per_s"]
        keys = [
            "id",
            *(f"param:{p}" for p in info.param_names),
            "status",
            "objective",
            *rate,
            "peak_memory_bytes",
            "step_time_s",
            "duration_s",
            "stop_reason",
        ]
        if [str(c.key.value) for c in table.ordered_columns] != keys:
            table.clear(columns=True)
            for key in keys:
                header = key[6:] if key.startswith("param:") else COLUMNS[key][0]
                table.add_column(metric_header(info.metric) if key == "objective" else header, key=key)
        cursor = table.cursor_row
        table.clear()
        for r in rows:
            style = "bold yellow" if r.best else ""
            cells: list[Any] = [Text(f"{'★ ' if r.best else '◆ ' if r.baseline else ''}{r.id}", style=style)]
            cells += [
                Text(str(r.params.get(p, "—" if r.baseline else "")), style=style) for p in info.param_names
            ]
            cells.append(Text(r.status, style=STATUS_STYLES.get(r.status, "")))
            cells.append(
                Text(metric_number(info.metric, r.objective) if r.objective is not None else "—", style=style)
            )
            if rate:
                cells.append(format_rate(r.samples_per_s, "") if r.samples_per_s is not None else "—")
            cells += [
                format_bytes(r.peak_memory_bytes) if r.peak_memory_bytes is not None else "—",
                format_seconds(r.step_time_s) if r.step_time_s is not None else "—",
                format_seconds(r.duration_s) if r.duration_s is not None else "—",
                Text(stop_reason_words(r.stop_reason, column=True) or _clip(r.error or "", 30), style="dim"),
            ]
            table.add_row(*cells, key=str(r.id))
        for running_id in info.running_ids if not self.filter_text else ():
            running: list[Any] = [""] * len(keys)
            running[0] = Text(str(running_id), style=STATUS_STYLES["running"])
            running[keys.index("status")] = Text("running", style=STATUS_STYLES["running"])
            table.add_row(*running, key=f"running-{running_id}")
        if rows and cursor < table.row_count:
            table.move_cursor(row=cursor, animate=False)

    def _fill_effects(self, info: TrialsInfo) -> None:
        effects = self.query_one("#effects", DataTable)
        effects.clear()
        for e in info.effects:
            effects.add_row(
                e.param,
                e.value,
                str(e.trials),
                str(e.ok),
                metric_number(info.metric, e.best) if e.best is not None else "—",
                metric_number(info.metric, e.median) if e.median is not None else "—",
            )
        effects.border_title = f"Effect of each parameter · {metric_header(info.metric)} of its ok trials"
