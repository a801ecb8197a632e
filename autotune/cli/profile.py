"""``autotune profile``: run a training script unmodified in a profiling session and measure it."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from autotune.cli.support import UsageError, add_dashboard_option, check_module
from profilers.contract.summaries import ProfileSummary
from profilers.runtime.launch_env import LaunchEnv
from profilers.runtime.options import PROFILE_OPTIONS


def add_parser(sub: Any) -> None:
    """Register ``autotune profile``."""
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
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if kind is int else 'a number'} {spec.what}, got {text!r}"
            )
        return value

    return parse


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


def run(args: argparse.Namespace) -> int:
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
    if not args.quiet and launch.rank == 0 and prof.figures is not None:
        from rich.console import Console

        from autotune.console import render_summary

        console = Console(stderr=True)
        summary = render_summary(prof.figures, console, run_dir=prof.run_dir)
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
