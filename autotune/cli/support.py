"""What the commands share: usage errors, the module check, the dashboard alongside a command.

``profile``, ``tune`` and ``demo`` import it; it imports none of them (no cycle between the
command modules).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

#: Exit status of bad input.
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""


def check_module(name: str) -> None:
    """``-m NAME``: the module must be importable from here, as ``python -m`` would find it."""
    sys.path.insert(0, os.getcwd())
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        found = False
    finally:
        sys.path.pop(0)
    if not found:
        raise UsageError(f"module not found: {name}")


#: Set in the command the dashboard runs alongside, so that it does not open a second one.
NO_DASHBOARD_ENV = "AUTOTUNE_NO_DASHBOARD"


def run_tui(args: list[str]) -> int:
    """``python -m tui ARGS``: the dashboard runs in its own process (autotune never imports tui)."""
    import subprocess  # only the dashboard needs it: every command's start-up does not

    env = {**os.environ, "AUTOTUNE_DASHBOARD_PROG": "autotune dashboard", NO_DASHBOARD_ENV: "1"}
    try:
        return subprocess.call([sys.executable, "-m", "tui", *args], env=env)
    except KeyboardInterrupt:
        return 130


def wants_dashboard(requested: bool) -> bool:
    """``--dashboard`` was given, this is not the command the dashboard runs, and there is a terminal."""
    if not requested or os.environ.get(NO_DASHBOARD_ENV) == "1":
        return False
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("autotune: --dashboard needs a terminal; running without it", file=sys.stderr)
        return False
    return True


def dashboard_alongside(run_dir: Path | None, runs_root: Path, argv: list[str]) -> int:
    """Run ``autotune ARGV`` while the dashboard follows ``run_dir`` (the run list when None)."""
    where = [] if run_dir is None else [str(run_dir)]
    command = [sys.executable, "-m", "autotune", *argv]
    return run_tui(["--runs-root", str(runs_root), *where, "--", *command])


class ArgParser(argparse.ArgumentParser):
    """argparse that reports errors as one line without the usage block."""

    def error(self, message: str) -> NoReturn:
        """One line naming the problem and the help to read, then exit status 2."""
        message = message.replace("required: SCRIPT, ARGS", "required: SCRIPT")
        print(f"{self.prog}: error: {message} (see '{self.prog} --help')", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def number(
    kind: type[int] | type[float], low: float, high: float | None, what: str, low_open: bool = False
) -> Any:
    """An argparse type: a number of ``kind`` in [low, high] (or (low, high] when ``low_open``)."""

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < low or (low_open and value == low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return parse


def add_dashboard_option(p: argparse.ArgumentParser) -> None:
    """``--dashboard``: open the terminal dashboard on the run while the command works."""
    p.add_argument(
        "--dashboard",
        action="store_true",
        help="follow the run in the terminal dashboard while it works (its output goes to RUN_DIR.log)",
    )
