"""The ``autotune`` command line: profile, tune, report, compare, plan, demo, doctor (and dashboard).

Bad input gets one clear line and exit status 2; a script's own exit status is passed through.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from autotune import __version__
from autotune.cli.compare import add_compare_parser, cmd_compare
from autotune.cli.plan import add_plan_parser, cmd_plan
from autotune.cli.report import add_report_parser, cmd_report
from autotune.cli.support import (
    EXIT_USAGE,
    UsageError,
    check_module,
    dashboard_alongside,
    run_tui,
    wants_dashboard,
)
from autotune.cli.tune import add_tune_parser, cmd_tune, default_run_dir, study_name
from profilers.contract.summaries import ProfileSummary
from profilers.runtime.launch_env import LaunchEnv
from profilers.runtime.options import PROFILE_OPTIONS


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as one line without the usage block."""

    def error(self, message: str) -> NoReturn:
        message = message.replace("required: SCRIPT, ARGS", "required: SCRIPT")
        print(f"{self.prog}: error: {message} (see '{self.prog} --help')", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _number(
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




def add_profile_options(p: argparse.ArgumentParser) -> None:
    """The measurement options of ``profile``, from the one table (``profilers.runtime.options``)."""
    budgets = p.add_argument_group(
        "step budgets",
        "stop early once the answer is known (tuning trials); the run is saved, exit status 0. Under "
        "torchrun the ranks agree every 4 steps (through a gloo group of autotune's own), so all "
        "stop at the same step",
    )
    for spec in PROFILE_OPTIONS:
        if spec.flag is None:
            continue
        group = budgets if spec.budget else p
        if spec.kind == "bool":
            action = "store_false" if spec.negated else "store_true"
            group.add_argument(spec.flag, dest=spec.field, action=action, help=spec.help)
            continue
        default = spec.default
        shown = f" ({default:g})" if spec.kind in ("int", "float") and default is not None else ""
        group.add_argument(
            spec.flag,
            dest=spec.field,
            type=_option_type(spec),
            default=Path(default) if spec.kind == "path" and default is not None else default,
            metavar=spec.metavar,
            help=spec.help + shown,
        )


def _option_type(spec: Any) -> Any:
    """The argparse type of a table option: its kind, its range checked (one line when wrong)."""
    if spec.kind == "path":
        return Path
    if spec.kind == "str":
        return str
    kind = int if spec.kind == "int" else float

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or spec.problem(value) is not None:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'} "
                                             f"{spec.what}, got {text!r}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser."""
    parser = _Parser(prog="autotune", description="Profile, tune and advise PyTorch training.")
    parser.add_argument("--version", action="version", version=f"autotune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    p = sub.add_parser(
        "profile",
        help="run a training script unmodified and measure it",
        description="Run SCRIPT (options before it; everything after it goes to the script) and measure it.",
    )
    add_profile_options(p)
    p.add_argument("-m", dest="module", action="store_true", help="SCRIPT is a module name, as in python -m")
    add_dashboard_option(p)
    p.add_argument("script", metavar="SCRIPT", help="the training script (or module with -m)")
    p.add_argument("script_args", metavar="ARGS", nargs=argparse.REMAINDER, help="arguments for the script")

    add_tune_parser(sub, _number)
    add_dashboard_option(sub.choices["tune"])

    add_report_parser(sub, _number)

    add_compare_parser(sub)

    add_plan_parser(sub, _number)
    sub.add_parser("dashboard", help="follow a run or a study in a terminal dashboard (see --help)")
    sub.add_parser("demo", help="profile the built-in models on synthetic data (autotune demo --help)")
    sub.add_parser("doctor", help="say what this machine can measure")
    return parser


def _check_writable(path: Path) -> None:
    """Fail early, with one line, when a run directory cannot be created or written."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".autotune-write-test-{os.getpid()}"  # per process: torchrun ranks race here
        probe.write_text("")
        probe.unlink(missing_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write to run directory {path}: {exc.strerror or exc}") from None


def _profile_options(args: argparse.Namespace, name: str) -> dict[str, Any]:
    options = {spec.field: getattr(args, spec.field) for spec in PROFILE_OPTIONS if spec.flag is not None}
    options["name"] = args.name or name
    return options


def cmd_profile(args: argparse.Namespace) -> int:
    """``autotune profile``: run the script in a session and pass its exit status through."""
    from autotune.api import profile
    from autotune.runscript import exit_code_of, print_user_traceback, run_target
    from autotune.tuner.devices import apply_trial_cpus
    from profilers.runtime.session import StepBudgetReached

    apply_trial_cpus()  # a trial of a parallel study: the cores it was given
    if args.module:
        check_module(args.script)
        name = args.script.rsplit(".", 1)[-1]
    else:
        script = Path(args.script)
        if not script.is_file():
            raise UsageError(f"script not found: {args.script}")
        name = script.stem
    launch = LaunchEnv.read()
    if args.backend is not None:
        _check_backend(args.backend)
    if args.run_dir is not None:
        _check_writable(args.run_dir)
        if launch.world_size == 1 and not args.overwrite and (args.run_dir / "run.db").exists():
            raise UsageError(f"{args.run_dir} already holds a run (use --overwrite or another --run-dir)")
    else:
        _check_writable(args.runs_root)
    options = _profile_options(args, name)
    options["command"] = [args.script, *args.script_args]
    prof = profile(**options)
    code = 0
    with prof:
        try:
            run_target(args.script, args.script_args, module=args.module)
        except StepBudgetReached as exc:
            prof.ended_by(exc)
            code = 0
        except SystemExit as exc:
            prof.ended_by(exc)
            code = exit_code_of(exc)
        except KeyboardInterrupt as exc:
            prof.ended_by(exc)
            print_user_traceback(exc)
            code = 130
        except BaseException as exc:
            prof.ended_by(exc)
            print_user_traceback(exc)
            code = 1
    if not args.quiet and launch.rank == 0 and prof.summary is not None:
        from rich.console import Console

        from autotune.console import render_summary

        console = Console(stderr=True)
        summary = render_summary(prof.summary, console, run_dir=prof.run_dir)
        if summary is None or summary.outcome == "no_steps":
            return code  # no step, no advice: the outcome line said what was (not) seen
        _say_what_is_missing(summary)
        from autotune.report.terminal import advise_at_end

        advise_at_end(prof.run_dir, console)
    return code


def _say_what_is_missing(summary: ProfileSummary) -> None:
    """Once, after a CUDA run without NVML figures: why they are missing."""
    if summary.device.kind == "cuda" and not summary.gpus:
        from profilers.runtime.backends import describe_unavailable

        reason = describe_unavailable() or "the sampling backend reported no GPU"
        print(f"autotune: no NVML figures (utilization, power, clocks): {reason}", file=sys.stderr)


def _check_backend(spec: str) -> None:
    """Pick the backend now (it is cached for the session), so a bad spec is bad input."""
    from profilers.runtime.backends import get_backend

    try:
        get_backend(spec)
    except (ValueError, OSError, RuntimeError) as exc:  # NvmlUnavailable is a RuntimeError
        raise UsageError(f"--backend {spec}: {exc}") from None


def add_dashboard_option(p: argparse.ArgumentParser) -> None:
    """``--dashboard``: open the terminal dashboard on the run while the command works."""
    p.add_argument(
        "--dashboard",
        action="store_true",
        help="follow the run in the terminal dashboard while it works (its output goes to RUN_DIR.log)",
    )


def _with_run_dir(args: argparse.Namespace, argv: list[str]) -> tuple[Path, list[str]]:
    """The run directory the command will write, and its arguments naming it explicitly."""
    if args.run_dir is not None:
        return args.run_dir, argv
    from profilers.runtime.rundir import slug

    if args.command == "tune":
        run_dir = default_run_dir(args.runs_root, study_name(args))
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
        if args.command == "profile":
            return cmd_profile(args)
        if args.command == "tune":
            return cmd_tune(args, UsageError)
        if args.command == "report":
            return cmd_report(args, UsageError)
        if args.command == "plan":
            return cmd_plan(args, UsageError)
        if args.command == "compare":
            return cmd_compare(args, UsageError)
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
