"""``--dashboard`` on the autotune command line: the work runs alongside the dashboard in a terminal."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.tui.test_dashboard_terminal import Terminal

ROOT = Path(__file__).resolve().parents[2]
UNMODIFIED = ROOT / "tests" / "scripts" / "train_unmodified.py"


@pytest.mark.slow
def test_profile_with_dashboard_follows_the_run_and_keeps_the_exit_status(tmp_path: Path) -> None:
    py = shlex.quote(sys.executable)
    status = tmp_path / "status"
    command = (
        f"sh -c 'PYTHONPATH={shlex.quote(str(ROOT))} OMP_NUM_THREADS=1 {py} -m autotune profile --dashboard "
        f"--run-dir run {shlex.quote(str(UNMODIFIED))} --steps 3000; echo $? > {status}; sleep 30'"
    )
    term = Terminal(command, cwd=tmp_path)
    try:
        screen = term.wait_for("train_unmodified", "q Quit", timeout=60)
        assert "Traceback" not in screen
        term.keys("q")
        term.wait_for("the command's output is in run.log (exit status 0)", timeout=120)
        deadline = time.monotonic() + 20
        while not status.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert status.read_text().strip() == "0"
    finally:
        term.close()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 3000
    assert "autotune profile: train_unmodified" in (tmp_path / "run.log").read_text()


@pytest.mark.slow
def test_dashboard_without_a_terminal_runs_the_work_alone(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("AUTOTUNE_NO_DASHBOARD", None)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "autotune",
            "profile",
            "--dashboard",
            "--quiet",
            "--run-dir",
            str(tmp_path / "r"),
            str(UNMODIFIED),
            "--steps",
            "50",
        ],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "--dashboard needs a terminal; running without it" in out.stderr
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["steps"] == 50
