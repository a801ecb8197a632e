"""Live following: a writer process appends to a run (and a study grows a trial) while the app runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from textual.widgets import Static

from tests.tui.recorded import write_profile_run, write_study
from tests.tui.waiting import settle, shown_text, sync, until
from tui.app import DashboardApp
from tui.live import LivePane
from tui.screen import DashboardScreen
from tui.trials import TrialsPane

ROOT = Path(__file__).resolve().parents[2]

#: Appends ``N`` steps (and 10 host samples per step) to a run store, 20 steps a second, as a
#: training job's recorder would: each batch in its own transaction, with the profiler's writer.
WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from profilers.runtime.store import RunStore
    from tests.tui.recorded import host_sample, step_record

    run, first, count = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    store = RunStore(run / "run.db")
    for step in range(first, first + count):
        store.add_steps([step_record(step)])
        store.add_samples(host_sample(step * 10 + i) for i in range(10))
        time.sleep(0.03)
    store.close()
    """
)


def _writer(run: Path, first: int, count: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(run), str(first), str(count)], cwd=ROOT)


@sync
async def test_new_steps_appear_while_a_writer_appends(tmp_path: Path) -> None:
    run = write_profile_run(tmp_path / "live", gpus=0, steps=20, finished=False)
    app = DashboardApp(run, refresh_s=0.2)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        live = app.screen.query_one(LivePane)
        assert live.info is not None and live.info.step == 20
        series_before = len(live.info.step_time_s)
        writer = _writer(run, 21, 30)
        try:  # seen while it is written, then whole
            assert await until(pilot, lambda: live.info is not None and 20 < (live.info.step or 0) < 50)
            assert await until(pilot, lambda: live.info is not None and live.info.step == 50, timeout=15)
        finally:
            assert writer.wait(timeout=30) == 0
        await pilot.pause(0.3)
        info = live.info
        assert info is not None and info.step == 50
        assert len(info.step_time_s) > series_before
        host = info.devices[0]
        assert host.kind == "host" and len(host.series["cpu_util_pct"]) > 1
        status = shown_text(app.screen.query_one("#live-status", Static))
        assert "step 50" in status


@sync
async def test_a_study_is_followed_to_its_newest_trial(tmp_path: Path) -> None:
    study = write_study(tmp_path / "study", running=False)
    app = DashboardApp(study, refresh_s=0.2)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DashboardScreen)
        live = screen.query_one(LivePane)
        assert live.info is not None and live.info.following is not None
        assert live.info.following.startswith("trial 7 of 10")
        trial = study / "trials" / "trial-0008"
        write_profile_run(trial, gpus=0, steps=5, finished=False)
        assert await until(pilot, lambda: live.info is not None and "trial 8" in (live.info.following or ""))
        assert live.info is not None and live.info.step == 5
        trials = screen.query_one(TrialsPane)
        assert await until(pilot, lambda: trials.info is not None and trials.info.running_id == 8)
        writer = _writer(trial, 6, 10)
        try:
            assert await until(pilot, lambda: live.info is not None and live.info.step == 15, timeout=15)
        finally:
            assert writer.wait(timeout=30) == 0
