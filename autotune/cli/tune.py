"""``autotune tune [OPTIONS] SCRIPT [ARGS...]``: the command line of a tuning study.

Parses and checks the options (bad input: one line, exit 2), runs the study with a progress line
per trial on stderr, and ends with the best configuration against the baseline. Exit status 0
when the study ran to its end with a best trial; 1 when it had to stop (the baseline failed, the
script ignores what is tuned, no trial finished ok); 130 when interrupted (resume it).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.cli.support import UsageError, add_dashboard_option, check_module, number
from autotune.presets import PRESETS
from autotune.search.space import Space
from autotune.tuner.progress import Progress
from profilers.contract.schema import TRIALS_DIR

if TYPE_CHECKING:
    from autotune.tuner.config import TuneConfig
    from autotune.tuner.trials import TrialSettings

DEFAULT_TRIALS = 12
#: The baseline runs again before the first search trial and every this many after (TuneConfig.anchor_every).
DEFAULT_ANCHOR_EVERY = 4
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


def parse_bytes(text: str) -> int:
    """A byte count from ``"8GiB"``, ``"512MB"`` or ``"1000000"`` (ArgumentTypeError otherwise)."""
    match = _SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"expected a size in bytes such as 8GiB or 500MB, got {text!r}")
    number, unit = float(match.group(1)), (match.group(2) or "").lower()
    scale = 1024 ** " kmgt".index(unit[0]) if unit.endswith(("ib", "i")) else _UNITS[unit[:1]]
    value = int(number * scale)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a size above 0, got {text!r}")
    return value


def add_parser(sub: Any) -> None:
    """Register ``autotune tune``."""
    positive_int = number(int, 1, None, "a positive integer")
    non_negative_int = number(int, 0, None, "an integer >= 0")
    positive = number(float, 0, None, "a positive number", True)
    fraction = number(float, 0, 1, "a fraction between 0 and 1")
    p = sub.add_parser(
        "tune",
        help="search batch size, precision and layout in short isolated trials of a script",
        description=(
            "Run SCRIPT (options before it; everything after it goes to the script) in short trials, "
            "one configuration each, and search for the best. A baseline with the script's own "
            "defaults runs first."
        ),
    )
    p.add_argument("--space", type=Path, help="TOML file of [space.NAME] tables (default: built-in knobs)")
    p.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        help=(
            "tune an unmodified Hugging Face TrainingArguments, LightningCLI or torchtitan-style "
            "(--parallelism.*_degree) script through its own flags"
        ),
    )
    p.add_argument(
        "--trials", type=positive_int, help="trials in all, baseline included (12; on --resume: as stored)"
    )
    p.add_argument(
        "--searcher", choices=("bayes", "structured", "random", "grid"), default="bayes", help="(bayes)"
    )
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of the searcher (0)")
    p.add_argument(
        "--objective", choices=("throughput", "cost", "energy"), help="what to optimize (throughput)"
    )
    p.add_argument("--price-per-gpu-hour", type=positive, metavar="USD", help="price of one device-hour")
    p.add_argument(
        "--usage-hours-per-day",
        type=number(float, 0, 24, "hours in (0, 24]", low_open=True),
        metavar="HOURS",
        help="hours a day the team trains: when the study pays itself back (unsaid: in hours of training)",
    )
    p.add_argument("--memory-budget", type=parse_bytes, metavar="BYTES", help="peak memory allowed (8GiB)")
    p.add_argument("--max-step-time", type=positive, metavar="SECONDS", help="slowest step time allowed")
    p.add_argument("--multi-objective", action="store_true", help="keep the Pareto front too")
    p.add_argument("--run-dir", type=Path, help="the study's directory (default runs/<time>-tune-<name>)")
    p.add_argument("--runs-root", type=Path, default=Path("runs"), help="parent of default run directories")
    p.add_argument("--name", help="study name (default: the script's name)")
    p.add_argument("--resume", action="store_true", help="continue the study in --run-dir")
    p.add_argument(
        "--nproc-per-node", type=positive_int, help="ranks of ddp/fsdp trials (2; also tries layouts)"
    )
    p.add_argument("--trial-steps", type=positive_int, default=40, help="most steps in a trial (40)")
    p.add_argument("--warmup-steps", type=non_negative_int, default=3, help="warm-up steps of a trial (3)")
    p.add_argument(
        "--stable-within",
        type=fraction,
        default=0.05,
        help="end a trial once its step time is known within this fraction, 0 = never (0.05)",
    )
    # the bound of autotune profile's own --min-measured-steps, which every trial passes it to
    p.add_argument(
        "--min-measured-steps",
        type=number(int, 2, None, "an integer >= 2"),
        default=8,
        help="before a trial may end (8)",
    )
    p.add_argument("--trial-timeout", type=positive, default=600.0, help="seconds per trial (600)")
    p.add_argument(
        "--early-stop",
        type=fraction,
        default=0.5,
        help="stop a losing trial early: below the best's lower bound less the spread between processes, "
        "or below this share of the best until that spread is measured; 0 = off (0.5)",
    )
    p.add_argument(
        "--loss-tolerance", type=positive_or_zero(), default=0.1, help="loss drift vs fp32, 0 = off"
    )
    p.add_argument(
        "--confirm-rounds",
        type=non_negative_int,
        help="re-measure the best against the baseline, interleaved, this many rounds, 0 = off (3)",
    )
    p.add_argument(
        "--anchor-every",
        type=non_negative_int,
        help="run the baseline's configuration again before the first search trial and every N after, "
        "in that trial's slot: the spread between processes each ratio carries, 0 = off (4)",
    )
    p.add_argument(
        "--calm-wait",
        type=positive_or_zero(),
        default=60.0,
        help="a trial short of CPU for most of its steps runs again once the machine leaves it its "
        "cores, waiting up to this many seconds, else is left out as busy; 0 = never again (60)",
    )
    p.add_argument(
        "--no-plan-prior",
        action="store_true",
        help="search without the plan's prediction of each configuration (random first trials instead)",
    )
    p.add_argument(
        "--parallel",
        type=positive_int,
        help="trials of the search at once, each on its own GPUs (or its share of the cores) (1)",
    )
    p.add_argument(
        "--executor", choices=("local", "ray"), help="where trials run: this machine, or a Ray cluster"
    )
    p.add_argument("--ray-address", metavar="ADDR", help="the Ray cluster (default: a local one)")
    p.add_argument("--ray-resource", metavar="NAME", help="the Ray resource a trial asks per rank (GPU)")
    p.add_argument(
        "--ray-storage",
        choices=("shipped", "shared"),
        help="trial directories sent back by each task, or written where every node sees them (shipped)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("-m", dest="module", action="store_true", help="SCRIPT is a module name, as in python -m")
    p.add_argument("script", metavar="SCRIPT", nargs="?", help="the training script (or module with -m)")
    p.add_argument("script_args", metavar="ARGS", nargs=argparse.REMAINDER, help="arguments for the script")
    add_dashboard_option(p)


def positive_or_zero() -> Any:
    """An argparse type for a number >= 0."""
    return number(float, 0, None, "a number >= 0")


def run(args: argparse.Namespace) -> int:
    """Run ``autotune tune``; bad input raises UsageError (one line, exit 2)."""
    from autotune.tuner.config import stored_config
    from autotune.tuner.trials import TrialSettings
    from autotune.tuner.tune import TuneError
    from autotune.tuner.tune_checks import check_space

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
            progress.result(tuner.summary_record())
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
        from rich.console import Console

        from autotune.report.terminal import advise_at_end

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
    from autotune.tuner.config import TuneConfig
    from autotune.tuner.devices import visible_gpus
    from autotune.tuner.objectives import Scoring

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


def study_name(args: argparse.Namespace) -> str:
    """The study's name: ``--name``, else the script's (or module's) name."""
    if args.name:
        return str(args.name)
    script = str(args.script or "study")
    return script.rsplit(".", 1)[-1] if args.module else Path(script).stem


def default_run_dir(runs_root: Path, name: str) -> Path:
    """``runs/<timestamp>-tune-<name>``, the study directory when ``--run-dir`` is not given."""
    from profilers.runtime.rundir import slug

    return runs_root / f"{time.strftime('%Y%m%d-%H%M%S')}-tune-{slug(name)}"
