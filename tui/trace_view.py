"""``autotune dashboard TRACE``: a torch.profiler trace's GPU time and advice in the terminal.

The figures are the trace report's own (``autotune report TRACE --format json``), built in a child
process as the Advice screen's are (:mod:`tui.report`), so the dashboard and the report cannot
differ. The screen shows the overview, one row per rank with its GPU span as a bar (idle, compute,
non-compute), the highlighted rank's top kernels and top operators, and the recommendations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from autotune.advice.records import AdviceSection
from profilers.contract.json_checks import JsonObject
from profilers.contract.trace_report import RankTimes, TraceReportView
from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Static

from tui.draw import recommendation_text
from tui.report import ChildTask, ReportError, failure_line

#: Width of a rank's bar, in cells.
BAR_CELLS = 30
#: Colours of the temporal breakdown (as the HTML report's chart), in RankTimes.breakdown_pct's order.
BREAKDOWN = (("grey50", "░"), ("green", "█"), ("dark_orange", "▓"))
_NA = "n/a"


def breakdown_bar(rank: RankTimes, cells: int = BAR_CELLS) -> Text:
    """A rank's GPU span as one bar: idle, compute, non-compute cells in proportion."""
    bar = Text()
    shares = list(rank.breakdown_pct)
    if sum(shares) <= 0:
        return Text("no GPU activity", style="dim")
    counts = [round(cells * s / 100) for s in shares]
    counts[shares.index(max(shares))] += cells - sum(counts)  # rounding goes to the largest part
    for (style, char), n in zip(BREAKDOWN, counts, strict=True):
        bar.append(char * max(n, 0), style=style)
    return bar


def _pct(value: Any) -> str:
    return _NA if value is None else f"{float(value):.1f}%"


def _time_us(value: Any) -> str:
    if value is None:
        return _NA
    us = float(value)
    return f"{us / 1e3:.1f} ms" if us >= 1e3 else f"{us:.0f} µs"


def _seconds(value: Any) -> str:
    return _NA if value is None else _time_us(float(value) * 1e6)


class TraceApp(App[int]):
    """The trace dashboard: overview, ranks, the highlighted rank's kernels and ops, the advice."""

    TITLE = "gpu-autotune · trace"
    CSS = """
    #trace-head { height: auto; padding: 0 1; }
    #ranks { height: auto; max-height: 10; }
    #tables { height: 1fr; }
    #kernels, #ops { width: 1fr; }
    #trace-advice { height: auto; max-height: 16; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "quit", "Quit")]

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.data: TraceReportView | None = None
        self.problem: str | None = None
        self._report_tasks: set[ChildTask] = set()

    def compose(self) -> ComposeResult:
        """Overview, ranks, the two tables, the advice."""
        yield Header()
        yield Static(f"reading {self.path} …", id="trace-head")
        yield DataTable(id="ranks", cursor_type="row")
        with Horizontal(id="tables"):
            yield DataTable(id="kernels")
            yield DataTable(id="ops")
        with VerticalScroll(id="trace-advice"):
            yield Static("", id="advice-text")
        yield Footer()

    def on_mount(self) -> None:
        """Build the report in a child process."""
        self.sub_title = str(self.path)
        self._load()

    @work(thread=True, exclusive=True)
    def _load(self) -> None:
        task = ChildTask("report", self.path)
        self._report_tasks.add(task)
        try:
            data = TraceReportView.parse(task.run(), str(self.path))
            self.call_from_thread(self._show, data, None)
        except (ReportError, OSError, ValueError) as exc:  # SummaryError too
            self.call_from_thread(self._show, None, failure_line(exc))
        finally:
            self._report_tasks.discard(task)

    def on_unmount(self) -> None:
        """Stop a report still being built."""
        for task in list(self._report_tasks):
            task.cancel()

    def _show(self, data: TraceReportView | None, problem: str | None) -> None:
        self.data, self.problem = data, problem
        head = self.query_one("#trace-head", Static)
        if data is None:
            head.update(Text(f"cannot show {self.path}: {problem}", style="bold red"))
            return
        head.update(
            Text.assemble(
                (f"{data.device or 'device not recorded'}", "bold"),
                f" · {data.world_size} rank(s) · median step {_seconds(data.step_time_median_s)}",
                *(("\n" + note, "yellow") for note in data.notes),
            )
        )
        ranks = self.query_one("#ranks", DataTable)
        ranks.clear(columns=True)
        ranks.add_columns(
            "rank", "GPU span", "idle · compute · non-compute", "idle", "compute", "non-compute",
            "comm overlapped", "median step",
        )  # fmt: skip
        for rank in data.ranks:
            ranks.add_row(
                str(rank.rank), _time_us(rank.kernel_time_us), breakdown_bar(rank),
                _pct(rank.idle_pct), _pct(rank.compute_pct), _pct(rank.non_compute_pct),
                _pct(rank.comm_overlap_pct), _seconds(rank.step_time_s_median),
            )  # fmt: skip
        self._show_rank(0)
        self._show_advice(data.advice)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """A rank highlighted: show its kernels and operators."""
        if event.data_table.id == "ranks":
            self._show_rank(event.cursor_row)

    def _show_rank(self, index: int) -> None:
        ranks = self.data.ranks if self.data is not None else ()
        if not 0 <= index < len(ranks):
            return
        rank = ranks[index]
        kernels = self.query_one("#kernels", DataTable)
        kernels.clear(columns=True)
        kernels.add_columns(f"rank {rank.rank}: top kernels", "kind", "total", "share")
        for k in rank.top_kernels:
            kernels.add_row(k.name[:60], k.kind, _time_us(k.total_us), _pct(k.share_pct))
        ops = self.query_one("#ops", DataTable)
        ops.clear(columns=True)
        ops.add_columns("top host operators", "calls", "self", "total")
        for o in rank.top_ops:
            ops.add_row(o.name[:50], f"{o.count:,}", _time_us(o.self_us), _time_us(o.total_us))

    def _show_advice(self, advice: JsonObject) -> None:
        section = AdviceSection.from_json(advice)
        text = self.query_one("#advice-text", Static)
        if not section.recommendations:
            text.update(Text("No rule found anything to change in this trace.", style="green"))
            return
        text.update(Group(*(recommendation_text(r) for r in section.recommendations)))


def run_trace_dashboard(path: Path) -> int:
    """Open the trace dashboard on ``path``; its exit status."""
    app = TraceApp(path)
    app.run()
    return app.return_code or 0


__all__ = ["TraceApp", "breakdown_bar", "run_trace_dashboard"]
