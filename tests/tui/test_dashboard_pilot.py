"""Every screen and key of the dashboard, driven headless (``App.run_test``) at 120×40."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Sparkline, Static, TabbedContent

from tests.tui.waiting import press, settle, shown_text, sync, until
from tui.advice import AdvicePane, RunPane
from tui.app import DashboardApp
from tui.common import FilterBar, HelpScreen
from tui.live import DevicePanel, LivePane
from tui.picker import PickerScreen
from tui.screen import DashboardScreen
from tui.trials import TrialsPane

SIZE = (120, 40)


@sync
async def test_live_screen_of_a_gpu_run(recorded_root: Path) -> None:
    app = DashboardApp(recorded_root / "gpu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        info = app.screen.query_one(LivePane).info
        assert info is not None and info.state == "finished" and info.step == 300
        assert info.steps_per_s == pytest.approx(25.0, rel=0.01)
        assert [p.view.label for p in app.screen.query(DevicePanel)] == [
            "GPU 0 · NVIDIA H200",
            "GPU 1 · NVIDIA H200",
        ]
        assert all(len(s.data or []) > 10 for s in app.screen.query(Sparkline))
        status = shown_text(app.screen.query_one("#live-status", Static))
        assert "step 300" in status and "25.0 steps/s" in status and "elapsed 12.01 s" in status
        assert "40.3 ms median" in shown_text(app.screen.query_one("#live-summary", Static))


@sync
async def test_live_screen_of_a_cpu_run_shows_the_host(recorded_root: Path) -> None:
    app = DashboardApp(recorded_root / "cpu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        panels = list(app.screen.query(DevicePanel))
        assert [p.view.kind for p in panels] == ["host"]
        values = [shown_text(v) for v in panels[0].query(".metric-value").results(Static)]
        assert [v.strip() for v in values] == ["35.1%", "125.7%", "2.0 GiB", "21.2 GiB / 64.0 GiB"]


@sync
async def test_number_keys_tab_and_mouse_switch_screens(
    recorded_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """And a report layer that fails (here: the advice module missing) is one line on Advice."""
    import tui.report

    def no_advice(run_dir: Path, *running: object) -> object:
        raise ImportError("No module named 'autotune.advice.advise'")

    monkeypatch.setattr(tui.report, "build_report", no_advice)
    app = DashboardApp(recorded_root / "study")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tabs = app.screen.query_one(TabbedContent)
        for key, tab in (("2", "trials"), ("3", "advice"), ("4", "run"), ("1", "live")):
            await pilot.press(key)
            assert tabs.active == tab
        head = shown_text(app.screen.query_one("#advice-head", Static)).strip()
        assert head.startswith("Advice unavailable: the advice module is not available (No module named")
        assert "\n" not in head and "Traceback" not in head
        await pilot.press("tab")
        assert tabs.active == "trials"
        await pilot.press("shift+tab")
        assert tabs.active == "live"
        await pilot.click("#--content-tab-run")
        assert tabs.active == "run"


@sync
async def test_trials_sort_filter_and_header_click(recorded_root: Path) -> None:
    app = DashboardApp(recorded_root / "study")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("2")
        pane = app.screen.query_one(TrialsPane)
        table = app.screen.query_one("#trials-table", DataTable)

        def shown() -> list[str]:
            return [str(k.value) for k in table.rows]

        assert pane.info is not None and pane.info.best_id == 4
        assert shown()[:3] == ["0", "1", "2"] and shown()[-1] == "running-8"
        await pilot.press("s")
        assert pane.sort_by == "objective" and shown()[:3] == ["4", "1", "7"]  # best first
        await pilot.press("s")
        assert pane.sort_by == "status"
        await pilot.click("#trials-table", offset=(2, 0))  # the "trial" header: sort by id
        assert pane.sort_by == "id" and not pane.reverse
        await pilot.click("#trials-table", offset=(2, 0))  # again: the other way
        assert pane.reverse and shown()[0] == "7"
        await pilot.press("slash")
        bar = app.screen.query_one(FilterBar)
        assert bar.is_open and bar.has_focus
        await pilot.press("o", "o", "m")
        assert pane.filter_text == "oom" and shown() == ["2"]
        await pilot.press("enter")
        assert not bar.is_open and pane.filter_text == "oom"
        await pilot.press("slash", "escape")
        assert not bar.is_open and pane.filter_text == "" and len(shown()) == 9


@sync
async def test_other_keys_on_a_profile_run(recorded_root: Path) -> None:
    """s and / say where they work; r reads again; ? shows the keys; q quits with status 0."""
    app = DashboardApp(recorded_root / "gpu", refresh_s=60)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("s", "slash")
        messages = [n.message for n in app._notifications]
        assert any("sorts the trial table" in m for m in messages)
        assert any("filters the Trials and Advice" in m for m in messages)
        assert not app.screen.query_one(FilterBar).is_open
        screen = app.screen
        assert isinstance(screen, DashboardScreen)
        before = screen.polls
        await press(pilot, "r")
        assert await until(pilot, lambda: screen.polls > before)
        await pilot.press("2")
        assert "no trials" in shown_text(app.screen.query_one("#trials-summary", Static))
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "write the HTML report" in shown_text(app.screen.query_one("#help-keys", Static))
        await pilot.press("escape")
        assert app.screen is screen
        await pilot.press("q")
    assert app.return_code == 0


@sync
async def test_advice_screen_shows_the_report_recommendations(fresh_root: Path) -> None:
    from autotune.report.make import make_report

    expected = make_report(fresh_root / "gpu").advice.recommendations
    app = DashboardApp(fresh_root / "gpu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "3")
        pane = app.screen.query_one(AdvicePane)
        assert await until(pilot, lambda: pane.report is not None or pane.problem is not None)
        assert pane.problem is None
        assert [r.title for r in pane.report.advice.recommendations] == [r.title for r in expected]
        body = shown_text(app.screen.query_one("#advice-body", Static))
        for rec in expected:
            assert rec.title in body
        await press(pilot, "slash", *"no-such-text", "enter")
        assert "0 shown" in shown_text(app.screen.query_one("#advice-head", Static))


@sync
async def test_run_screen_environment_and_devices(recorded_root: Path) -> None:
    app = DashboardApp(recorded_root / "gpu")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "4")
        pane = app.screen.query_one(RunPane)
        assert await until(pilot, lambda: pane.environment is not None)
        items = dict(pane.environment or ())
        assert items["command"] == "train.py --model gpt-small"
        assert items["host"] == "trainer-01" and items["device"] == "NVIDIA H200 × 2"
        assert app.screen.query_one("#run-devices", DataTable).row_count == 2


@sync
async def test_export_writes_the_html_report(fresh_root: Path) -> None:
    run = fresh_root / "gpu"
    app = DashboardApp(run)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "e")
        assert await until(pilot, lambda: (run / "report.html").exists())
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        assert any(f"wrote {run / 'report.html'}" in n.message for n in app._notifications)
        assert "<html" in (run / "report.html").read_text()[:2000].lower()


@sync
async def test_export_failure_is_a_notification(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    app = DashboardApp(tmp_path / "empty")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "e")
        errors = [n for n in app._notifications if n.severity == "error"]
        assert errors and errors[-1].message.startswith("report not written:")
        assert not (tmp_path / "empty" / "report.html").exists()


@sync
async def test_run_list_keys_and_mouse(recorded_root: Path) -> None:
    app = DashboardApp(None, runs_root=recorded_root)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        picker = app.screen
        assert isinstance(picker, PickerScreen)
        table = picker.query_one("#runs", DataTable)

        def shown() -> list[str]:
            return [Path(str(k.value)).name for k in table.rows]

        assert shown() == ["cpu", "gpu", "study"]  # same modification time: by name
        await pilot.press("s")
        assert picker.sort_by == "name" and shown() == ["cpu", "gpu", "study"]
        await pilot.press("slash", *"stu", "enter")
        assert shown() == ["study"]
        await pilot.press("enter")
        assert await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        assert isinstance(app.screen, DashboardScreen) and app.screen.run_dir.name == "study"
        await pilot.press("escape")
        assert app.screen is picker
        await pilot.press("slash", "escape")
        assert shown() == ["cpu", "gpu", "study"] and table.cursor_row == 2  # still on "study"
        await pilot.click("#runs", offset=(3, 2))  # the second row: highlighted
        await pilot.pause()
        assert table.cursor_row == 1 and app.screen is picker
        await pilot.click("#runs", offset=(3, 2))  # the highlighted row: opened
        assert await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        assert isinstance(app.screen, DashboardScreen) and app.screen.run_dir.name == "gpu"
