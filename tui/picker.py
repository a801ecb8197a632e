"""The run list: the runs under the runs root, newest first, to pick one (``autotune dashboard``)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from tui.common import FilterBar
from tui.draw import STATE_STYLES
from tui.rundir import RunEntry, list_runs
from tui.screen import DashboardScreen

#: Orders ``s`` cycles through.
SORTS = ("newest", "name", "kind", "state")


def ordered(runs: tuple[RunEntry, ...], sort_by: str, text: str) -> list[RunEntry]:
    """The runs whose name, kind or state contain ``text``, in the ``sort_by`` order."""
    needle = text.strip().lower()
    chosen = [r for r in runs if not needle or needle in f"{r.name} {r.kind} {r.state}".lower()]
    if sort_by == "newest":
        return sorted(chosen, key=lambda r: (-r.modified, r.name))
    return sorted(chosen, key=lambda r: (str(getattr(r, sort_by)), r.name))


class PickerScreen(Screen[None]):
    """The runs under ``runs_root``; enter (or a click) opens one."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open"),
        Binding("r", "scan", "Refresh"),
        Binding("s", "sort", "Sort"),
        Binding("slash", "filter", "Filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    runs: reactive[tuple[RunEntry, ...]] = reactive(())
    sort_by: reactive[str] = reactive("newest")
    filter_text: reactive[str] = reactive("")
    scans: reactive[int] = reactive(0)

    def __init__(self, runs_root: Path, refresh_s: float = 2.0) -> None:
        super().__init__()
        self.runs_root = runs_root
        self.refresh_s = refresh_s

    def compose(self) -> ComposeResult:
        """Header, a heading line, the run table, the filter bar, the footer."""
        yield Header()
        yield Static("", id="picker-head")
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield FilterBar()
        yield Footer()

    def on_mount(self) -> None:
        """Columns, then scan now and every ``refresh_s`` seconds."""
        self.sub_title = f"runs under {self.runs_root}"
        table = self.query_one("#runs", DataTable)
        table.add_column("run", key="name")
        table.add_column("kind", key="kind")
        table.add_column("state", key="state")
        table.add_column("size", key="size")
        table.add_column("modified", key="modified")
        self.set_interval(self.refresh_s, self.action_scan)
        self.action_scan()

    def action_scan(self) -> None:
        """List the runs again."""
        self._scan_worker()

    @work(thread=True, exclusive=True, group="scan", exit_on_error=False)
    def _scan_worker(self) -> None:
        runs = tuple(list_runs(self.runs_root))
        with contextlib.suppress(RuntimeError):  # the app is closing
            self.app.call_from_thread(self._scanned, runs)

    def _scanned(self, runs: tuple[RunEntry, ...]) -> None:
        self.runs = runs
        self.scans += 1

    def watch_runs(self) -> None:
        """Redraw the table."""
        self._redraw()

    def watch_sort_by(self) -> None:
        """Redraw in the new order."""
        self._redraw()

    def watch_filter_text(self) -> None:
        """Redraw with the runs that match."""
        self._redraw()

    def _redraw(self) -> None:
        if not self.is_mounted:
            return
        rows = ordered(self.runs, self.sort_by, self.filter_text)
        head = Text(f"{len(self.runs)} runs under {self.runs_root}", style="bold")
        if not self.runs:
            head = Text(
                f"no runs under {self.runs_root} yet (this list refreshes by itself)", style="italic dim"
            )
        head.append(f" · sorted by {self.sort_by} (s) · enter opens", style="dim")
        if self.filter_text:
            head.append(f" · filter '{self.filter_text}': {len(rows)} shown", style="dim")
        self.query_one("#picker-head", Static).update(head)
        table = self.query_one("#runs", DataTable)
        selected = self._selected()
        table.clear()
        for r in rows:
            table.add_row(
                Text(r.name, style="bold"),
                r.kind,
                Text(r.state, style=STATE_STYLES.get(r.state, "")),
                r.size,
                time.strftime("%Y-%m-%d %H:%M", time.localtime(r.modified)),
                key=str(r.path),
            )
        keys = [str(r.path) for r in rows]
        if selected in keys:
            table.move_cursor(row=keys.index(selected), animate=False)

    def _selected(self) -> str | None:
        table = self.query_one("#runs", DataTable)
        if not table.row_count:
            return None
        return str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

    def action_open(self) -> None:
        """Open the highlighted run."""
        key = self._selected()
        if key is not None:
            self._open(Path(key))

    @on(DataTable.RowSelected, "#runs")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        self._open(Path(str(event.row_key.value)))

    def _open(self, run_dir: Path) -> None:
        refresh_s = getattr(self.app, "refresh_s", 1.0)
        self.app.push_screen(DashboardScreen(run_dir, refresh_s=refresh_s, can_go_back=True))

    def action_sort(self) -> None:
        """Sort by the next order."""
        self.sort_by = SORTS[(SORTS.index(self.sort_by) + 1) % len(SORTS)]

    def action_filter(self) -> None:
        """Open the filter."""
        self.query_one(FilterBar).open(self.filter_text)

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value

    @on(Input.Submitted, "#filter")
    def _filter_kept(self) -> None:
        self.query_one(FilterBar).close()
        self.query_one("#runs", DataTable).focus()

    def action_clear_filter(self) -> None:
        """Clear and close the filter."""
        bar = self.query_one(FilterBar)
        bar.value = ""
        bar.close()
        self.query_one("#runs", DataTable).focus()
