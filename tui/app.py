"""``autotune dashboard [RUN_DIR]``: the Textual app, its entry points and its argument parsing.

- :func:`run_dashboard` opens the dashboard on a run (or the run list under ``runs_root``).
- :func:`main` parses ``autotune dashboard`` arguments (one-line errors, exit status 2).
- :func:`run_alongside` runs a command (``autotune profile …``) in a child process with its
  output in a log file while the dashboard follows its run directory in this terminal.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, NoReturn

from profilers.contract.schema import STORE_NAME, SUMMARY_NAME, TRIALS_DIR, TUNE_LOCK_NAME
from textual.app import App
from textual.binding import Binding, BindingType
from textual.screen import Screen

from tui.common import HelpScreen
from tui.picker import PickerScreen
from tui.screen import DashboardScreen

EXIT_USAGE = 2


class DashboardApp(App[int]):
    """The dashboard: one run's screens, or the run list when no run is given."""

    CSS_PATH = "dashboard.tcss"
    TITLE = "autotune dashboard"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit_dashboard", "Quit"),
        Binding("question_mark", "help", "Help"),
    ]

    def __init__(self, run_dir: Path | None, runs_root: Path = Path("runs"), refresh_s: float = 1.0) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.runs_root = runs_root
        self.refresh_s = refresh_s

    def get_default_screen(self) -> Screen[None]:
        """The run's dashboard, or the run list."""
        if self.run_dir is not None:
            return DashboardScreen(self.run_dir, refresh_s=self.refresh_s)
        return PickerScreen(self.runs_root, refresh_s=max(self.refresh_s, 2.0))

    def action_quit_dashboard(self) -> None:
        """Quit with status 0."""
        self.exit(0)

    def action_help(self) -> None:
        """Show the keys."""
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())


def run_dashboard(run_dir: Path | None, runs_root: Path = Path("runs"), refresh_s: float = 1.0) -> int:
    """Open the dashboard on ``run_dir`` (None: the run list under ``runs_root``); its exit status."""
    app = DashboardApp(run_dir, runs_root, refresh_s)
    app.run()
    return app.return_code or 0


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit status 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see '{self.prog} --help')", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds between 0.1 and 60, got {text!r}") from None
    if not 0.1 <= value <= 60:
        raise argparse.ArgumentTypeError(f"expected seconds between 0.1 and 60, got {text!r}")
    return value


def build_parser(prog: str = "autotune dashboard") -> argparse.ArgumentParser:
    """The ``autotune dashboard`` arguments (a ``-- COMMAND`` after them is split off first)."""
    p = _Parser(
        prog=prog,
        usage=f"{prog} [-h] [--runs-root DIR] [--refresh SECONDS] [--log FILE] [RUN_DIR] [-- COMMAND ...]",
        description=(
            "Open the terminal dashboard on RUN_DIR (a profile run or a tuning study): live while it "
            "is written, browsable once finished. RUN_DIR may also be a torch.profiler trace (a file "
            "or a folder of per-rank traces): its GPU time per rank, top kernels and ops, and advice. "
            "Without RUN_DIR, pick one of the runs under --runs-root. With '-- COMMAND ...', run "
            "COMMAND (its output goes to --log) while the dashboard follows RUN_DIR, which need not "
            "exist yet; the exit status is COMMAND's."
        ),
    )
    p.add_argument(
        "run_dir", metavar="RUN_DIR", type=Path, nargs="?", help="the run or study directory, or a trace"
    )
    p.add_argument(
        "--runs-root", type=Path, default=Path("runs"), help="where to list runs without RUN_DIR (runs)"
    )
    p.add_argument("--refresh", type=_seconds, default=1.0, metavar="SECONDS", help="refresh interval (1.0)")
    p.add_argument(
        "--log",
        type=Path,
        metavar="FILE",
        help="with -- COMMAND: where its output goes (RUN_DIR.log, else RUNS_ROOT/dashboard.log)",
    )
    return p


def main(argv: Sequence[str] | None = None, prog: str = "autotune dashboard") -> int:
    """``autotune dashboard`` (``python -m tui``): 0 on quit, 2 for bad input (one line on stderr).

    With ``-- COMMAND ...`` the exit status is the command's (see :func:`run_alongside`).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1 :]
    args = build_parser(prog).parse_args(argv)
    run_dir: Path | None = args.run_dir
    if command:
        log = args.log or (
            run_dir.with_name(run_dir.name + ".log")
            if run_dir is not None
            else args.runs_root / "dashboard.log"
        )
        if not _terminal():
            return _usage(prog, "needs a terminal (stdin and stdout); run the command on its own instead")
        return run_alongside(command, run_dir, log, args.runs_root, args.refresh)
    if args.log is not None:
        return _usage(prog, "--log goes with '-- COMMAND ...' (the output of the command run alongside)")
    if run_dir is not None:
        if not run_dir.exists():
            return _usage(prog, f"{run_dir}: no such directory")
        from profilers.contract.traces import is_trace_path

        if is_trace_path(run_dir):
            from tui.trace_view import run_trace_dashboard

            if not _terminal():
                return _usage(prog, "needs a terminal (stdin and stdout); without one, use autotune report")

            return run_trace_dashboard(run_dir)
        if not run_dir.is_dir():
            return _usage(prog, f"{run_dir}: not a directory (give the run directory, not a file in it)")
        if not any((run_dir / name).exists() for name in RUN_MARKS):
            return _usage(prog, f"{run_dir}: not a run directory (no {SUMMARY_NAME}, no {STORE_NAME})")
    elif not args.runs_root.is_dir():
        return _usage(
            prog, f"no RUN_DIR given and {args.runs_root} is not a directory (give RUN_DIR or --runs-root)"
        )
    if not _terminal():
        return _usage(prog, "needs a terminal (stdin and stdout); without one, use autotune report")
    return run_dashboard(run_dir, args.runs_root, args.refresh)


#: What a run or study directory holds from its start (a study's lock and trials before its run.db).
RUN_MARKS = (SUMMARY_NAME, STORE_NAME, TRIALS_DIR, TUNE_LOCK_NAME)


def _terminal() -> bool:
    """Whether a person can see and drive the dashboard (else it would draw escape codes into a file)."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _usage(prog: str, message: str) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


#: Lines of the command's output shown once it has finished (its own summary, usually).
TAIL_LINES = 40


def run_alongside(
    command: Sequence[str],
    run_dir: Path | None,
    log_path: Path,
    runs_root: Path = Path("runs"),
    refresh_s: float = 1.0,
) -> int:
    """Run ``command`` with its output in ``log_path`` while the dashboard follows ``run_dir``.

    ``run_dir`` may not exist yet (the dashboard waits for it); None shows the run list under
    ``runs_root`` (new runs appear in it). When the dashboard is closed the command goes on and is
    waited for (Ctrl-C stops it); then the last lines of its output are printed. Returns the
    command's exit status (127 when it cannot be started, 130 when interrupted).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        try:
            child = subprocess.Popen(
                list(command), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        except OSError as exc:
            print(f"autotune: error: cannot run {command[0]}: {exc.strerror or exc}", file=sys.stderr)
            return 127
        try:
            run_dashboard(run_dir, runs_root, refresh_s)
            if child.poll() is None:
                print(
                    f"autotune: the dashboard is closed; the work goes on (pid {child.pid}, output in "
                    f"{log_path}); Ctrl-C stops it",
                    file=sys.stderr,
                )
            code = child.wait()
        except KeyboardInterrupt:
            child.terminate()
            child.wait()
            return 130
    lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    sys.stderr.write("".join(line + "\n" for line in lines[-TAIL_LINES:]))
    print(
        f"autotune: the command's output is in {log_path} (exit status {code})",
        file=sys.stderr,
    )
    return code
