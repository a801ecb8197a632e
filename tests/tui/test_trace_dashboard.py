"""``autotune dashboard TRACE``: a real two-rank trace's GPU time and advice, headless and in tmux."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from textual.widgets import DataTable, Static

from autotune.report.jsonout import report_dict
from autotune.report.make import make_report
from profilers.contract.trace_report import RankTimes
from tests.tui.test_dashboard_terminal import ROOT, Terminal
from tests.tui.waiting import shown_text, sync, until
from tui.trace_view import TraceApp, breakdown_bar

TWO_RANKS = Path(__file__).resolve().parents[1] / "data" / "gpu_traces" / "two_ranks_sampled"
SIZE = (140, 45)


def test_the_bar_splits_the_span_in_proportion():
    rank = RankTimes.parse({"idle_pct": 50.0, "compute_pct": 30.0, "non_compute_pct": 20.0}, "r")
    bar = breakdown_bar(rank, cells=10)
    assert bar.plain == "░" * 5 + "█" * 3 + "▓" * 2
    assert breakdown_bar(RankTimes.parse({"idle_pct": None}, "r")).plain == "no GPU activity"


@sync
async def test_the_trace_dashboard_shows_the_reports_own_figures() -> None:
    """Every rank row, the highlighted rank's kernels and the advice are those of report.json."""
    expected = report_dict(make_report(TWO_RANKS))
    app = TraceApp(TWO_RANKS)
    async with app.run_test(size=SIZE) as pilot:
        assert await until(pilot, lambda: app.data is not None or app.problem is not None, timeout=60)
        assert app.problem is None
        ranks = app.query_one("#ranks", DataTable)
        assert ranks.row_count == 2
        for i, rank in enumerate(expected["gpu_time"]["ranks"]):
            row = [str(c) for c in ranks.get_row_at(i)]
            assert row[0] == str(rank["rank"])
            assert row[3] == f"{rank['idle_pct']:.1f}%" and row[4] == f"{rank['compute_pct']:.1f}%"
        kernels = app.query_one("#kernels", DataTable)
        first = expected["gpu_time"]["ranks"][0]["top_kernels"][0]["name"]
        assert str(kernels.get_row_at(0)[0]) == first[:60]
        await pilot.press("down")
        await pilot.pause(0.2)
        label = str(next(iter(kernels.columns.values())).label)
        assert label == "rank 1: top kernels"
        advice = shown_text(app.query_one("#advice-text", Static))
        for rec in expected["advice"]["recommendations"]:
            assert rec["title"][:40] in advice


def test_autotune_dashboard_on_a_trace_in_a_real_terminal(tmp_path: Path) -> None:
    status = tmp_path / "status"
    py = shlex.quote(sys.executable)
    trace = shlex.quote(str(TWO_RANKS))
    command = (
        f"sh -c 'PYTHONPATH={shlex.quote(str(ROOT))} {py} -m autotune dashboard {trace}; "
        f"echo $? > {shlex.quote(str(status))}'"
    )
    term = Terminal(command, cwd=tmp_path)
    try:
        screen = term.wait_for("53.6%", "Communication-bound", "Straggler", "q Quit", timeout=60)
        assert "traces of 2 of 128 ranks" in screen
        term.keys("q")
        assert term.exit_status(status) == "0"
    finally:
        term.close()
