"""The ``autotune`` command line: profile, tune, report, compare, plan, demo, doctor (and dashboard).

Bad input gets one clear line and exit status 2; a script's own exit status is passed through.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import ModuleType

from autotune import __version__
from autotune.cli import compare, plan, profile, report, tune
from autotune.cli.support import (
    EXIT_USAGE,
    ArgParser,
    UsageError,
    dashboard_alongside,
    run_tui,
    wants_dashboard,
)

#: The commands of the one parser: each a module with ``add_parser(sub)`` and ``run(args)``.
COMMANDS: dict[str, ModuleType] = {
    "profile": profile,
    "tune": tune,
    "report": report,
    "compare": compare,
    "plan": plan,
}
#: The commands that parse their own options (or take none), and their line in ``autotune --help``.
OWN_OPTIONS = {
    "dashboard": "follow a run or a study in a terminal dashboard (see --help)",
    "demo": "profile the built-in models on synthetic data (autotune demo --help)",
    "doctor": "say what this machine can measure",
}


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser."""
    parser = ArgParser(prog="autotune", description="Profile, tune and advise PyTorch training.")
    parser.add_argument("--version", action="version", version=f"autotune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgParser)
    for command in COMMANDS.values():
        command.add_parser(sub)
    for name, help_line in OWN_OPTIONS.items():
        sub.add_parser(name, help=help_line)
    return parser


def _with_run_dir(args: argparse.Namespace, argv: list[str]) -> tuple[Path, list[str]]:
    """The run directory the command will write, and its arguments naming it explicitly."""
    if args.run_dir is not None:
        return args.run_dir, argv
    from profilers.runtime.rundir import slug

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
        from autotune.cli.demo import main as demo_main

        return demo_main(argv[1:])
    if argv and argv[0] == "dashboard":  # the dashboard parses its own options (tui/app.py)
        return run_tui(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in ("profile", "tune") and wants_dashboard(args.dashboard):
        run_dir, argv = _with_run_dir(args, argv)
        return dashboard_alongside(run_dir, args.runs_root, argv)
    try:
        if args.command in COMMANDS:
            return int(COMMANDS[args.command].run(args))
        if args.command == "doctor":
            from autotune.cli.doctor import main as doctor_main

            return doctor_main()
        parser.print_help()
        return EXIT_USAGE
    except UsageError as exc:
        print(f"autotune: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def entry() -> None:
    """Console-script entry: exit with main()'s status."""
    sys.exit(main())
