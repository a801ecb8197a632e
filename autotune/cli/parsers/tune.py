"""``autotune tune``'s options, and the study directory it decides before it runs (kept light)."""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path
from typing import Any

from autotune.cli.support import add_dashboard_option, number
from autotune.presets import PRESETS
from autotune.search.registry import DEFAULT_SEARCHER, SEARCHERS
from profilers.runtime.rundir import slug

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
        "--searcher",
        choices=tuple(SEARCHERS),
        default=DEFAULT_SEARCHER,
        help=f"({DEFAULT_SEARCHER}; bayes: scikit-optimize's Gaussian process)",
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


def study_name(args: argparse.Namespace) -> str:
    """The study's name: ``--name``, else the script's (or module's) name."""
    if args.name:
        return str(args.name)
    script = str(args.script or "study")
    return script.rsplit(".", 1)[-1] if args.module else Path(script).stem


def default_run_dir(runs_root: Path, name: str) -> Path:
    """``runs/<timestamp>-tune-<name>``, the study directory when ``--run-dir`` is not given."""
    return runs_root / f"{time.strftime('%Y%m%d-%H%M%S')}-tune-{slug(name)}"
