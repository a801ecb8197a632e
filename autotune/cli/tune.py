"""``autotune tune [OPTIONS] SCRIPT [ARGS...]``: the command line of a tuning study.

Parses and checks the options (bad input: one line, exit 2), runs the study with a progress line
per trial on stderr, and ends with the best configuration against the baseline. Exit status 0
when the study ran to its end with a best trial; 1 when it had to stop (the baseline failed, the
script ignores what is tuned, no trial finished ok); 130 when interrupted (resume it).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console

from autotune.cli.parsers.tune import DEFAULT_ANCHOR_EVERY, DEFAULT_TRIALS, default_run_dir
from autotune.cli.support import UsageError, check_module
from autotune.presets import PRESETS
from autotune.report.terminal import advise_at_end
from autotune.search.space import Space
from autotune.tuner.config import TuneConfig, stored_config
from autotune.tuner.devices import visible_gpus
from autotune.tuner.objectives import Scoring
from autotune.tuner.progress import Progress
from autotune.tuner.trials import TrialSettings
from autotune.tuner.tune import TuneError
from autotune.tuner.tune_checks import check_space
from profilers.contract.schema import TRIALS_DIR


def run(args: argparse.Namespace) -> int:
    """Run ``autotune tune``; bad input raises UsageError (one line, exit 2)."""
    stored = None
    if args.resume:
        if args.run_dir is None:
            raise UsageError("--resume needs --run-dir DIR (the study to continue)")
        if not args.run_dir.is_dir():
            raise UsageError(f"--resume: no study in {args.run_dir} (no such directory)")
        try:
            stored = stored_config(args.run_dir, args.objective, args.price_per_gpu_hour)
        except ValueError as exc:
            raise UsageError(f"--resume: {exc}") from None
    elif args.run_dir is not None and (args.run_dir / "run.db").exists():
        raise UsageError(f"{args.run_dir} already holds a study or run (use --resume, or another --run-dir)")
    if stored is not None:
        settings = stored.settings
        if args.script is not None and [args.script, *args.script_args] != [
            settings.script,
            *settings.script_args,
        ]:
            command = " ".join([settings.script, *settings.script_args])
            raise UsageError(
                f"--resume: the study in {args.run_dir} tunes {command}; leave SCRIPT out or give the same"
            )
    else:
        if args.script is None:
            raise UsageError("the following arguments are required: SCRIPT")
        _check_script(args)
        settings = TrialSettings(
            script=args.script,
            script_args=tuple(args.script_args),
            max_steps=args.trial_steps,
            warmup_steps=args.warmup_steps,
            timeout_s=args.trial_timeout,
            memory_budget_bytes=args.memory_budget,
            distributed_world_size=args.nproc_per_node or 2,
            # a model-parallel preset's every trial, the baseline's too, runs over the ranks
            world_size=(args.nproc_per_node or 2) if args.preset and PRESETS[args.preset].distributed else 1,
            module=args.module,
            stable_within=args.stable_within or None,
            min_measured_steps=args.min_measured_steps,
            max_step_time_s=args.max_step_time,
            preset=args.preset,
            calm_wait_s=args.calm_wait,
            workdir=os.getcwd(),  # a resumed study's trials run where this one's do
        )
    space = None
    if args.preset is not None and args.space is not None:
        raise UsageError("--preset and --space both say what to tune: give one")
    if args.space is not None:
        try:
            space = Space.from_toml(args.space)
            check_space(space)
        except (OSError, ValueError) as exc:
            raise UsageError(f"--space {args.space}: {exc}") from None
    try:
        config = _config(args, settings, stored, space)
    except ValueError as exc:  # the scoring: an objective it cannot score, a price it cannot take
        raise UsageError(str(exc)) from None
    run_dir = args.run_dir or default_run_dir(args.runs_root, args.name or _name(settings))
    progress = Progress(quiet=args.quiet)
    try:
        tuner = progress.tuner(config, run_dir, resume=args.resume)
    except ValueError as exc:  # --executor ray without Ray
        raise UsageError(str(exc)) from None
    progress.header(tuner.config, run_dir, resumed=stored is not None)  # as the tuner settled it
    try:
        summary = tuner.run()
    except TuneError as exc:
        print(f"autotune tune: stopped: {exc}", file=sys.stderr)
        if tuner.study is not None:
            progress.result(tuner.summary())
        print(_saved_where(run_dir), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\nautotune tune: interrupted; continue with --resume --run-dir {run_dir}", file=sys.stderr)
        return 130
    except ValueError as exc:  # a stored study that does not match (space, objective...)
        raise UsageError(f"--resume: {exc}") from None
    progress.result(summary)
    print(f"Run directory: {run_dir}", file=sys.stderr)
    if not args.quiet:
        advise_at_end(run_dir, Console(stderr=True))
    return 0 if summary.best is not None else 1


def _saved_where(run_dir: Path) -> str:
    """Where what a stopped study measured can be read (a study only once it has a summary)."""
    if (run_dir / "summary.json").is_file():
        return f"Run directory: {run_dir}"

    baseline = run_dir / TRIALS_DIR / "trial-0000"
    if (baseline / "summary.json").is_file():
        return f"No study was saved; the baseline's own profile is in {baseline} (autotune report {baseline})"
    return f"No study was saved; the trial logs are in {run_dir / TRIALS_DIR}"


#: The options a resumed study takes from the command line (given): how many trials, re-measured how,
#: run where, billed how. The rest (the search, its seed, the early stop, the loss tolerance, the
#: plan prior) stays what the study started with.
CHANGEABLE_ON_RESUME = {
    "n_trials": "trials",
    "multi_objective": "multi_objective",
    "confirm_rounds": "confirm_rounds",
    "anchor_every": "anchor_every",
    "parallel": "parallel",
    "executor": "executor",
    "ray_address": "ray_address",
    "ray_resource": "ray_resource",
    "ray_storage": "ray_storage",
    "usage_hours_per_day": "usage_hours_per_day",
}


def _given(value: Any) -> bool:
    """An option given: not the parser's None, a flag left off or an empty text (0 is given)."""
    return value is not None and value is not False and value != ""


def _config(
    args: argparse.Namespace, settings: TrialSettings, stored: TuneConfig | None, space: Space | None
) -> TuneConfig:
    """The study's configuration: the options as given, or, resumed, the stored study's.

    A resumed study takes the options given now that it may change (:data:`CHANGEABLE_ON_RESUME`).
    ValueError from the scoring (an objective without the price it needs).
    """
    asked = TuneConfig(
        settings=settings,
        n_trials=args.trials or DEFAULT_TRIALS,
        searcher=args.searcher,
        seed=args.seed,
        multi_objective=args.multi_objective,
        early_stop_ratio=args.early_stop,
        loss_tolerance=args.loss_tolerance,
        confirm_rounds=3 if args.confirm_rounds is None else args.confirm_rounds,
        anchor_every=DEFAULT_ANCHOR_EVERY if args.anchor_every is None else args.anchor_every,
        plan_prior=not args.no_plan_prior,
        parallel=args.parallel or 0,  # 0: one, or as many as a Ray cluster holds
        executor=args.executor or "local",
        ray_address=args.ray_address or None,
        ray_resource=args.ray_resource or None,
        ray_storage=args.ray_storage or "shipped",
        usage_hours_per_day=args.usage_hours_per_day,
    )
    if stored is None:
        base = replace(asked, scoring=Scoring(args.objective or "throughput", args.price_per_gpu_hour))
    else:  # its scoring already takes --objective and the price given now (stored_config)
        given = [n for n, opt in CHANGEABLE_ON_RESUME.items() if _given(getattr(args, opt))]
        base = replace(stored, **{name: getattr(asked, name) for name in given})
    return replace(
        base,
        space=space,
        layouts=args.nproc_per_node is not None and args.nproc_per_node > 1,
        # what the trials run on: GPUs to give out one each under --parallel, else the CPU's cores
        device_kind="cuda" if visible_gpus() else "cpu",
    )


def _check_script(args: argparse.Namespace) -> None:
    if args.module:
        check_module(args.script)
    elif not Path(args.script).is_file():
        raise UsageError(f"script not found: {args.script}")


def _name(settings: Any) -> str:
    return str(settings.script).rsplit(".", 1)[-1] if settings.module else Path(settings.script).stem
