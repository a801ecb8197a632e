"""``autotune profile``'s options: its parser, built at every command's start-up (kept light)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from autotune.cli.support import add_dashboard_option
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
