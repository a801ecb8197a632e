"""``autotune report RUN_DIR``: the HTML, Markdown or JSON report of a profile run or a study."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from autotune.cli.support import UsageError, number

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


def cost_options(args: argparse.Namespace) -> Any:
    """The CostOptions of parsed arguments."""
    from autotune.report.make import CostOptions

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
    from autotune.report.make import report_path
    from autotune.report.snapshot_report import RENDERERS, headline
    from profilers.traces.snapshot import SnapshotError, analyse_snapshot, read_snapshot

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
    from autotune.cost.prices import PriceTableError
    from autotune.report.make import make_report, render, report_path, write_report
    from profilers.contract.rundir import RunDirError
    from profilers.traces.kineto import TraceError

    if args.prices is not None and not args.prices.is_file():
        raise UsageError(f"--prices {args.prices}: no such file")
    formats = ("html", "md", "json") if args.format == "all" else (args.format,)
    if args.output is not None and len(formats) > 1:
        raise UsageError("--format all writes report.html, report.md and report.json; leave out -o")
    from profilers.traces.snapshot import is_snapshot_path

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
        from rich.console import Console

        from autotune.report.terminal import print_advice

        print_advice(report.advice, Console(stderr=True))
    return 0
