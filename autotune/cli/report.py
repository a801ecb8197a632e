"""``autotune report RUN_DIR``: the HTML, Markdown or JSON report of a profile run or a study."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from autotune.cli.support import UsageError
from autotune.cost.prices import PriceTableError
from autotune.report.make import CostOptions, make_report, render, report_path, write_report
from autotune.report.snapshot_report import RENDERERS, headline
from autotune.report.terminal import print_advice
from profilers.contract.rundir import RunDirError
from profilers.traces.kineto import TraceError
from profilers.traces.snapshot import SnapshotError, analyse_snapshot, is_snapshot_path, read_snapshot


def cost_options(args: argparse.Namespace) -> Any:
    """The CostOptions of parsed arguments."""
    return CostOptions(
        price_per_gpu_hour=args.price_per_gpu_hour,
        provider=args.provider,
        prices_file=args.prices,
        duty_cycle=args.duty_cycle,
        dataset_samples=args.dataset_samples,
        usage_hours_per_day=args.usage_hours_per_day,
    )


def _snapshot_report(args: argparse.Namespace, formats: tuple[str, ...]) -> int:
    """``autotune report SNAPSHOT.pickle``: a CUDA memory snapshot's peak, its holders, an OOM."""
    try:
        analysis = analyse_snapshot(read_snapshot(args.run_dir))
    except SnapshotError as exc:
        raise UsageError(str(exc)) from None
    source = str(args.run_dir)
    if args.output == "-":
        sys.stdout.write(RENDERERS[formats[0]](analysis, source))
        return 0
    for fmt in formats:
        path = Path(args.output) if args.output else report_path(args.run_dir, fmt)
        try:
            path.write_text(RENDERERS[fmt](analysis, source))
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
        if not args.quiet:
            print(f"autotune report: wrote {path}", file=sys.stderr)
    if not args.quiet:
        print(headline(analysis), file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    """Build the report and write it; bad input raises UsageError (one line, exit 2)."""
    if args.prices is not None and not args.prices.is_file():
        raise UsageError(f"--prices {args.prices}: no such file")
    formats = ("html", "md", "json") if args.format == "all" else (args.format,)
    if args.output is not None and len(formats) > 1:
        raise UsageError("--format all writes report.html, report.md and report.json; leave out -o")

    if args.run_dir.is_file() and is_snapshot_path(args.run_dir):
        return _snapshot_report(args, formats)
    try:
        report = make_report(args.run_dir, cost_options(args))
        if args.output == "-":
            sys.stdout.write(render(report, formats[0]))
            return 0
        for fmt in formats:
            path = Path(args.output) if args.output else report_path(args.run_dir, fmt)
            try:
                write_report(report, fmt, path)
            except OSError as exc:
                raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
            if not args.quiet:
                print(f"autotune report: wrote {path}", file=sys.stderr)
    except (RunDirError, PriceTableError, TraceError) as exc:
        raise UsageError(str(exc)) from None
    except UsageError:
        raise
    except Exception as exc:  # a fault of ours: one line, never a traceback; the run is untouched
        first = str(exc).splitlines()[0] if str(exc) else ""
        print(
            f"autotune report: internal error ({type(exc).__name__}: {first}); the run directory is "
            "unchanged; please report this with the run's summary.json",
            file=sys.stderr,
        )
        return 1
    if not args.quiet:
        print_advice(report.advice, Console(stderr=True))
    return 0
