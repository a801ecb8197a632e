"""The real program in a real terminal (tmux, 120×40): panels drawn, keys work, ``q`` exits 0.

And the command line's own errors: one line on stderr and exit status 2, before any terminal UI.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TMUX = shutil.which("tmux") or "/usr/bin/tmux"


class Terminal:
    """One tmux server of our own (its own socket), one 120×40 session running a command."""

    def __init__(self, command: str, cwd: Path) -> None:
        self.socket = f"autotune-dashboard-test-{uuid.uuid4().hex[:8]}"
        # the session's size is the terminal's: COLUMNS/LINES of the shell that ran pytest (or of a worker
        # of pytest-xdist) would override it inside the app
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env["TERM"] = "xterm-256color"
        self._tmux(
            "new-session", "-d", "-x", "120", "-y", "40", "-s", "dash", "-c", str(cwd), command, env=env
        )

    def _tmux(self, *args: str, env: dict[str, str] | None = None) -> str:
        out = subprocess.run(
            [TMUX, "-L", self.socket, *args], capture_output=True, text=True, env=env, timeout=20
        )
        return out.stdout

    def screen(self) -> str:
        """The visible screen as text."""
        return self._tmux("capture-pane", "-p", "-t", "dash")

    def keys(self, *keys: str) -> None:
        """Type ``keys`` (tmux key names)."""
        self._tmux("send-keys", "-t", "dash", *keys)

    def wait_for(self, *texts: str, timeout: float = 20.0) -> str:
        """The screen once it shows every one of ``texts`` (fails with the screen after ``timeout``)."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if all(t in screen for t in texts):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"the terminal never showed {texts!r}; it shows:\n{screen}")

    def exit_status(self, status: Path, timeout: float = 20.0) -> str:
        """The exit status the command wrote into ``status`` (fails with the screen after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while not status.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert status.exists(), self.screen()
        return status.read_text().strip()

    def close(self) -> None:
        """Stop this test's tmux server (only ours: it has its own socket)."""
        self._tmux("kill-server")


@pytest.fixture
def terminal(recorded_root: Path, tmp_path: Path) -> Iterator[tuple[Terminal, Path]]:
    status = tmp_path / "status"
    env = f"PYTHONPATH={shlex.quote(str(ROOT))}"
    command = (
        f"sh -c '{env} {shlex.quote(sys.executable)} -m tui study; echo $? > {shlex.quote(str(status))}'"
    )
    term = Terminal(command, cwd=recorded_root)
    try:
        yield term, status
    finally:
        term.close()


@pytest.mark.slow
def test_the_dashboard_in_tmux(terminal: tuple[Terminal, Path]) -> None:
    term, status = terminal
    screen = term.wait_for("following", "trial 8 of 10", "Step time", "GPU 0", "q Quit")
    assert "Live" in screen and "Trials" in screen and "Advice" in screen
    term.keys("2")
    screen = term.wait_for("highest in the search: trial 4", "Convergence", "micro_batch")
    assert "running" in screen and "diverged" in screen
    term.keys("s")
    term.wait_for("sorted by objective")
    term.keys("4")
    term.wait_for("train.py --model gpt-small", "Devices")
    term.keys("?")
    term.wait_for("autotune dashboard: keys")
    term.keys("Escape")
    time.sleep(0.5)
    term.keys("q")
    assert term.exit_status(status) == "0"


WORK = """
import sys, time
from pathlib import Path
from profilers.runtime.store import RunStore
from tests.tui.recorded import step_record

run = Path(sys.argv[1])
run.mkdir()
store = RunStore(run / "run.db")
store.set_meta({"name": "alongside"})
for step in range(1, 41):
    store.add_steps([step_record(step)])
    time.sleep(0.05)
store.close()
print("the work says goodbye")
sys.exit(3)
"""


def test_a_command_run_alongside_keeps_its_output_and_exit_status(tmp_path: Path) -> None:
    """``python -m tui RUN -- COMMAND``: waits for RUN, follows it; after q, COMMAND's output and status."""
    work = tmp_path / "work.py"
    work.write_text(WORK)
    status = tmp_path / "status"
    py = shlex.quote(sys.executable)
    command = (
        f"sh -c 'PYTHONPATH={shlex.quote(str(ROOT))} {py} -m tui --refresh 0.2 new -- {py} {work} new; "
        f"echo $? > {status}; sleep 30'"
    )
    term = Terminal(command, cwd=tmp_path)
    try:
        term.wait_for("step 40", "alongside")
        term.keys("q")
        term.wait_for("the work says goodbye", "the command's output is in new.log (exit status 3)")
        assert term.exit_status(status) == "3"
        assert "the work says goodbye" in (tmp_path / "new.log").read_text()
    finally:
        term.close()


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "tui", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["does/not/exist"], "does/not/exist: no such directory"),
        (["pyproject.toml"], "pyproject.toml: not a directory"),
        (["--refresh", "0", "runs"], "expected seconds between 0.1 and 60"),
        (["--runs-root", "no-such-root"], "no RUN_DIR given and no-such-root is not a directory"),
        (["--log", "x.log", "runs"], "--log goes with '-- COMMAND ...'"),
        # seen: a directory that is not a run, or no terminal, ran for 600 s drawing escape codes
        (["tests"], "tests: not a run directory (no summary.json, no run.db)"),
        (["tests/data/gpu_traces/v100_single"], "needs a terminal (stdin and stdout)"),
        (["--runs-root", "tests"], "needs a terminal (stdin and stdout); without one, use autotune report"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    out = _cli(*args)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("python -m tui: error:")
