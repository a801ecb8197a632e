"""The ``autotune`` command line: profile, tune, report, compare, plan, demo, doctor (and dashboard).

Bad input gets one clear line and exit status 2; a script's own exit status is passed through.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from autotune import __version__
from autotune.cli.parsers import compare, plan, profile, report, tune
from autotune.cli.support import (
    EXIT_USAGE,
    ArgParser,
    UsageError,
    dashboard_alongside,
    run_tui,
    wants_dashboard,
)
from profilers.runtime.rundir import slug


@dataclass(frozen=True)
class Command:
    """A command: its options, added to the one parser at every start-up, and the module that runs it.

    The module (``run(args)``, or ``main`` for a command that parses its own options) is imported
    only when its command runs, so ``autotune --help`` and every other command load none of it.
    """

    module: str | None  # None: it runs in its own process (the dashboard: ``python -m tui``)
    add_parser: Callable[[Any], None] | None = None  # None: it parses its own options
    help: str = ""  # its line in ``autotune --help``, for one that parses its own options

    def load(self) -> ModuleType:
        """The module that runs the command."""
        if self.module is None:
            raise LookupError("this command runs in its own process")
        return importlib.import_module(self.module)


#: Every command, by name.
COMMANDS: dict[str, Command] = {
    "profile": Command("autotune.cli.profile", profile.add_parser),
    "tune": Command("autotune.cli.tune", tune.add_parser),
    "report": Command("autotune.cli.report", report.add_parser),
    "compare": Command("autotune.cli.compare", compare.add_parser),
    "plan": Command("autotune.cli.plan", plan.add_parser),
    "dashboard": Command(None, help="follow a run or a study in a terminal dashboard (see --help)"),
    "demo": Command(
        "autotune.cli.demo", help="profile the built-in models on synthetic data (autotune demo --help)"
    ),
    "doctor": Command("autotune.cli.doctor", help="say what this machine can measure"),
}


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser."""
    parser = ArgParser(prog="autotune", description="Profile, tune and advise PyTorch training.")
    parser.add_argument("--version", action="version", version=f"autotune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgParser)
    for command in COMMANDS.values():
        if command.add_parser is not None:
            command.add_parser(sub)
    for name, command in COMMANDS.items():
        if command.add_parser is None:
            sub.add_parser(name, help=command.help)
    return parser


def _with_run_dir(args: argparse.Namespace, argv: list[str]) -> tuple[Path, list[str]]:
    """The run directory the command will write, and its arguments naming it explicitly."""
    if args.run_dir is not None:
        return args.run_dir, argv
    if args.command == "tune":
        run_dir = tune.default_run_dir(args.runs_root, tune.study_name(args))
    else:
        name = args.name or (args.script.rsplit(".", 1)[-1] if args.module else Path(args.script).stem)
        run_dir = args.runs_root / f"{time.strftime('%Y%m%d-%H%M%S')}-{slug(name)}"
    return run_dir, [argv[0], "--run-dir", str(run_dir), *argv[1:]]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``autotune`` command."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "demo":  # the demo parses its own options
        return int(COMMANDS["demo"].load().main(argv[1:]))
    if argv and argv[0] == "dashboard":  # the dashboard parses its own options (tui/app.py)
        return run_tui(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in ("profile", "tune") and wants_dashboard(args.dashboard):
        run_dir, argv = _with_run_dir(args, argv)
        return dashboard_alongside(run_dir, args.runs_root, argv)
    try:
        if args.command == "doctor":
            return int(COMMANDS["doctor"].load().main())
        if args.command in COMMANDS:
            return int(COMMANDS[args.command].load().run(args))
        parser.print_help()
        return EXIT_USAGE
    except UsageError as exc:
        print(f"autotune: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def entry() -> None:
    """Console-script entry: exit with main()'s status."""
    sys.exit(main())
