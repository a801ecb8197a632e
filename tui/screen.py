"""The dashboard of one run: Live, Trials, Advice and Run, refreshed from the run directory."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static, TabbedContent, TabPane

from tui import report as report_layer
from tui.advice import AdvicePane, RunPane
from tui.common import FilterBar
from tui.live import LivePane
from tui.report import ChildTask
from tui.source import RunSource, Snapshot
from tui.trials import TrialsPane

TABS = ("live", "trials", "advice", "run")


class DashboardScreen(Screen[None]):
    """One run's dashboard. :attr:`snapshot` holds the latest read; its watcher redraws the panes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "show_tab('live')", "Live"),
        Binding("2", "show_tab('trials')", "Trials"),
        Binding("3", "show_tab('advice')", "Advice"),
        Binding("4", "show_tab('run')", "Run"),
        Binding("tab", "step_tab(1)", "Next", show=False, priority=True),
        Binding("shift+tab", "step_tab(-1)", "Previous", show=False, priority=True),
        Binding("r", "refresh_now", "Refresh"),
        Binding("e", "export", "Export"),
        Binding("s", "sort", "Sort"),
        Binding("slash", "filter", "Filter"),
        Binding("escape", "back", "Back", show=False),
    ]

    snapshot: reactive[Snapshot | None] = reactive(None)
    #: Completed reads (tests and the benchmark wait on it).
    polls: reactive[int] = reactive(0)

    def __init__(self, run_dir: Path, refresh_s: float = 1.0, can_go_back: bool = False) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.refresh_s = refresh_s
        self.can_go_back = can_go_back
        self.source = RunSource(run_dir)
        self._lock = threading.Lock()
        self._busy = False
        self._children: set[ChildTask] = set()  # report processes running now

    def compose(self) -> ComposeResult:
        """Header, problem line, the four tabs, filter bar, footer."""
        yield Header()
        yield Static("", id="problem")
        with TabbedContent(initial="live", id="tabs"):
            with TabPane("Live", id="live"):
                yield LivePane(id="live-pane")
            with TabPane("Trials", id="trials"):
                yield TrialsPane(id="trials-pane")
            with TabPane("Advice", id="advice"):
                yield AdvicePane(id="advice-pane")
            with TabPane("Run", id="run"):
                yield RunPane(id="run-pane")
        yield FilterBar()
        yield Footer()

    def on_mount(self) -> None:
        """Read now, then every ``refresh_s`` seconds."""
        self.sub_title = str(self.run_dir)
        self.set_interval(self.refresh_s, self.poll)
        self.poll()

    def on_unmount(self) -> None:
        """Stop the report processes still running (the dashboard is closing)."""
        for child in list(self._children):
            child.cancel()

    # ------------------------------------------------------------------ reading

    def poll(self) -> None:
        """Start a read in a worker thread unless one is running."""
        if not self._busy:
            self._busy = True
            self._read()

    @work(thread=True, group="poll", exit_on_error=False)
    def _read(self) -> None:
        try:
            with self._lock:
                snap = self.source.poll()
        except Exception as exc:  # a reader bug is shown as one line, never a traceback
            first = str(exc).splitlines()[0] if str(exc) else ""
            snap = Snapshot(
                self.run_dir,
                None,
                self.run_dir.name,
                problem=f"{self.run_dir}: cannot be read ({type(exc).__name__}: {first})",
            )
        finally:
            self._busy = False
        self._post(self._apply, snap)

    def _post(self, callback: Callable[..., object], *args: Any, **kwargs: Any) -> None:
        """Run ``callback`` on the app's thread (from a worker); nothing once the app has closed."""
        with contextlib.suppress(RuntimeError):  # the app is closing: the result is no longer wanted
            self.app.call_from_thread(callback, *args, **kwargs)

    def _apply(self, snap: Snapshot) -> None:
        self.snapshot = snap
        self.polls += 1

    def watch_snapshot(self, snap: Snapshot | None) -> None:
        """Hand each pane its part of the snapshot."""
        if snap is None:
            return
        self.sub_title = f"{snap.name} · {snap.kind or 'not a run'} · {snap.run_dir}"
        problem = self.query_one("#problem", Static)
        problem.display = snap.problem is not None
        problem.update(Text(snap.problem or "", style="bold red"))
        live = self.query_one(LivePane)
        live.placeholder = "nothing to draw (the line above says why); the run is read again every refresh"
        live.info = snap.live
        self.query_one(TrialsPane).info = snap.trials
        run = self.query_one(RunPane)
        if snap.facts is not None and snap.facts != run.facts:
            run.facts = snap.facts
            if self._active == "run":
                self._load_environment(snap)

    # ------------------------------------------------------------------ tabs

    @property
    def _active(self) -> str:
        return self.query_one(TabbedContent).active

    def action_show_tab(self, tab: str) -> None:
        """Show ``tab``."""
        self.query_one(TabbedContent).active = tab

    def action_step_tab(self, step: int) -> None:
        """Show the next (or previous) tab."""
        self.action_show_tab(TABS[(TABS.index(self._active) + step) % len(TABS)])

    @on(TabbedContent.TabActivated)
    def _tab_shown(self, event: TabbedContent.TabActivated) -> None:
        self._close_filter()
        tab = event.pane.id
        focus = {"trials": "#trials-table", "advice": "#advice-pane", "run": "#run-pane"}.get(tab or "")
        self.set_focus(self.query_one(focus) if focus else None)  # arrows and page keys scroll it
        if tab == "advice":
            pane = self.query_one(AdvicePane)
            if pane.report is None and pane.problem is None and not pane.loading:
                self._load_advice()
        elif tab == "run" and self.snapshot is not None and self.query_one(RunPane).environment is None:
            self._load_environment(self.snapshot)

    # ------------------------------------------------------------------ the report layer

    def _load_advice(self) -> None:
        self.query_one(AdvicePane).loading = True
        self._advice_worker()

    @work(thread=True, exclusive=True, group="advice", exit_on_error=False)
    def _advice_worker(self) -> None:
        report, problem = None, None
        try:
            report = report_layer.build_report(self.run_dir, self._children)
        except Exception as exc:  # any failure is one line on the screen
            problem = report_layer.failure_line(exc)
        self._post(self._advice_done, report, problem)

    def _advice_done(self, report: object, problem: str | None) -> None:
        pane = self.query_one(AdvicePane)
        pane.problem = problem
        if report is not None:
            pane.report = report
        pane.loading = False

    def _load_environment(self, snap: Snapshot) -> None:
        if snap.facts is not None:
            self._environment_worker(snap)

    @work(thread=True, exclusive=True, group="environment", exit_on_error=False)
    def _environment_worker(self, snap: Snapshot) -> None:
        assert snap.facts is not None
        try:
            items = report_layer.environment_items(snap.facts)
        except Exception as exc:  # the raw facts are still shown
            items = (("run directory", snap.facts.run_dir), ("environment", f"unavailable ({exc})"))
        self._post(self._environment_done, items)

    def _environment_done(self, items: tuple[tuple[str, str], ...]) -> None:
        self.query_one(RunPane).environment = items

    def action_export(self) -> None:
        """Write RUN_DIR/report.html (``e``)."""
        self.notify(f"writing {self.run_dir}/report.html…", timeout=2)
        self._export_worker()

    @work(thread=True, exclusive=True, group="export", exit_on_error=False)
    def _export_worker(self) -> None:
        try:
            path = report_layer.export_html(self.run_dir, self._children)
        except Exception as exc:
            self._post(self.notify, f"report not written: {report_layer.failure_line(exc)}", severity="error")
        else:
            self._post(self.notify, f"wrote {path}", title="Report")

    def action_refresh_now(self) -> None:
        """Read now; on the Advice or Run screen, rebuild it too (``r``)."""
        self.poll()
        if self._active == "advice":
            self._load_advice()
        elif self._active == "run" and self.snapshot is not None:
            self._load_environment(self.snapshot)

    # ------------------------------------------------------------------ sort, filter, back

    def action_sort(self) -> None:
        """Sort the trial table by the next column (``s``)."""
        if self._active == "trials" and self.query_one(TrialsPane).info is not None:
            self.query_one(TrialsPane).cycle_sort()
        else:
            self.notify("s sorts the trial table of a study (screen 2)", timeout=3)

    def action_filter(self) -> None:
        """Open the filter for the trials or the recommendations (``/``)."""
        pane = self._filtered_pane()
        if pane is None:
            self.notify("/ filters the Trials and Advice screens", timeout=3)
            return
        self.query_one(FilterBar).open(pane.filter_text)

    def _filtered_pane(self) -> TrialsPane | AdvicePane | None:
        if self._active == "trials":
            return self.query_one(TrialsPane)
        if self._active == "advice":
            return self.query_one(AdvicePane)
        return None

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        pane = self._filtered_pane()
        if pane is not None:
            pane.filter_text = event.value

    @on(Input.Submitted, "#filter")
    def _filter_kept(self) -> None:
        self._close_filter()

    def _close_filter(self) -> None:
        bar = self.query_one(FilterBar)
        if bar.is_open:
            bar.close()
            if self._active == "trials":
                self.query_one("#trials-table", DataTable).focus()
            else:
                self.set_focus(None)

    def action_back(self) -> None:
        """Escape: clear and close the filter; else back to the run list."""
        bar = self.query_one(FilterBar)
        if bar.is_open:
            bar.value = ""
            self._close_filter()
        elif self.can_go_back:
            self.app.pop_screen()
