"""``autotune profile``: run a training script unmodified in a profiling session and measure it."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from autotune.cli.support import UsageError, check_module
from autotune.console import render_summary
from autotune.report.terminal import advise_at_end
from autotune.runscript import exit_code_of, print_user_traceback, run_target
from autotune.tuner.devices import apply_trial_cpus
from profilers.contract.profile_summary import ProfileSummary
from profilers.runtime.backends import describe_unavailable, get_backend
from profilers.runtime.launch_env import LaunchEnv
from profilers.runtime.options import PROFILE_OPTIONS
from profilers.runtime.stopping import StepBudgetReached


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
    from autotune.api import profile  # torch sizes its thread pool from the cores it sees: after the pinning

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
        console = Console(stderr=True)
        summary = render_summary(prof.figures, console, run_dir=prof.run_dir)
        if summary is None or summary.outcome == "no_steps":
            return code  # no step, no advice: the outcome line said what was (not) seen
        _say_what_is_missing(summary)

        advise_at_end(prof.run_dir, console)
    return code


def _say_what_is_missing(summary: ProfileSummary) -> None:
    """Once, after a CUDA run without NVML figures: why they are missing."""
    if summary.device.kind == "cuda" and not summary.gpus:
        reason = describe_unavailable() or "the sampling backend reported no GPU"
        print(f"autotune: no NVML figures (utilization, power, clocks): {reason}", file=sys.stderr)


def _check_backend(spec: str) -> None:
    """Pick the backend now (it is cached for the session), so a bad spec is bad input."""
    try:
        get_backend(spec)
    except (ValueError, OSError, RuntimeError) as exc:  # NvmlUnavailable is a RuntimeError
        raise UsageError(f"--backend {spec}: {exc}") from None
