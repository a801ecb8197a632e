"""``autotune compare``'s options (kept light)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

FORMATS = ("text", "md", "json")


def add_parser(sub: Any) -> None:
    """Register ``autotune compare``."""
    p = sub.add_parser(
        "compare",
        help="what changed between two runs, two traces, or a study's baseline and best trial",
        description=(
            "Compare B against A: step time (median and spread), throughput, peak memory, each kind "
            "of GPU time per step (busy, idle, compute, non-compute, communication, memcpy), host "
            "op time per step, and the kernels and operators whose time per step changed most. A "
            "and B are profile run directories, torch.profiler traces (a file or a folder), or, "
            "given alone, a tuning study: its baseline trial against its best."
        ),
    )
    p.add_argument("a", metavar="A", type=Path, help="a run, a trace (file or folder), or a study alone")
    p.add_argument("b", metavar="B", type=Path, nargs="?", help="the run or trace to compare against A")
    p.add_argument("--format", choices=FORMATS, default="text", help="text (default), md or json")
    p.add_argument("-o", "--output", metavar="FILE", help="write it to FILE (default: standard output)")
    p.add_argument(
        "--fail-if-slower",
        metavar="PCT",
        type=_pct,
        help=(
            "a gate for CI: exit 1 when B's throughput is below A's by more than PCT percent (5 or "
            "5%%), the whole 95%% interval of B / A (with the spread between processes) below 1 - "
            "PCT/100 and the loads alike burst by burst; 0 when it is not; 3 when it cannot tell "
            "(loads differ, too few steps, a trace); the reason in one line"
        ),
    )


def _pct(text: str) -> float:
    """The argparse type of ``--fail-if-slower``: the gate's parser, its error in one line."""
    from autotune.compare_gate import parse_pct

    try:
        return parse_pct(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
