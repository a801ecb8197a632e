"""``autotune report``'s options, and the pricing options it shares (kept light)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from autotune.cli.support import number

FORMATS = ("html", "md", "json", "all")


def add_parser(sub: Any) -> None:
    """Register ``autotune report``."""
    p = sub.add_parser(
        "report",
        help="write the report of a run, a tuning study or torch.profiler traces (HTML, Markdown or JSON)",
        description=(
            "Write the report of RUN_DIR (a profile run or a tuning study): recommendations with "
            "their evidence and savings, cost, step time, GPU time, timelines, trials. RUN_DIR may "
            "also be a torch.profiler trace (.json or .json.gz, as export_chrome_trace or "
            "tensorboard_trace_handler write it) or a folder of per-rank traces: the report then "
            "shows each rank's GPU time (idle, compute, non-compute, communication overlap, as "
            "Holistic Trace Analysis defines them), top kernels and operators, launch evidence and "
            "the advice a trace supports. HTML is self-contained and works offline; Markdown pastes "
            "into a pull request; JSON is for CI."
        ),
    )
    p.add_argument(
        "run_dir",
        metavar="RUN_DIR",
        type=Path,
        help="the run or study directory, a trace file or a folder of traces",
    )
    p.add_argument("--format", choices=FORMATS, default="html", help="html (default), md, json, or all three")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help=(
            "where to write it ('-' = standard output; default RUN_DIR/report.<format>, or "
            "TRACE.report.<format> next to a trace file)"
        ),
    )
    add_cost_options(p)
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")


def add_cost_options(p: argparse.ArgumentParser) -> None:
    """The pricing options shared by ``report`` (and the dashboard)."""
    g = p.add_argument_group("cost")
    g.add_argument(
        "--price-per-gpu-hour",
        metavar="USD",
        type=number(float, 0, None, "a price in USD > 0", low_open=True),
        help="price of one device-hour (default: the built-in table of public on-demand prices)",
    )
    g.add_argument("--provider", help="which provider's price to take from the table (aws, gcp, azure, …)")
    g.add_argument(
        "--prices", type=Path, metavar="TOML", help="a price table that overrides the built-in one"
    )
    usage = g.add_mutually_exclusive_group()
    usage.add_argument(
        "--duty-cycle",
        type=number(float, 0, 1, "a fraction in (0, 1]", low_open=True),
        help="share of the month the job runs (a study's --usage-hours-per-day / 24, else 1.0)",
    )
    usage.add_argument(
        "--usage-hours-per-day",
        type=number(float, 0, 24, "hours in (0, 24]", low_open=True),
        metavar="HOURS",
        help="hours a day the job trains: the monthly cost, and when a study pays itself back",
    )
    g.add_argument(
        "--dataset-samples",
        type=number(int, 1, None, "a positive integer"),
        help="samples in one epoch, for the cost of an epoch",
    )
