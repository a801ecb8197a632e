"""``autotune demo``: profile the built-in demo models and print what the profiler saw.

Runs a baseline of each demo model (synthetic data, nothing downloaded) under
``autotune.profile()`` and prints the readable summary of each, then tunes the demo GPT in a
short study of isolated trials (:mod:`autotune.demo.tuning`) and prints the best configuration
and its speedup over the baseline.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape

import autotune
from autotune.cli.support import dashboard_alongside, wants_dashboard
from autotune.console import render_summary
from autotune.demo.tuning import DEFAULT_TRIALS, tune_demo
from autotune.report.terminal import advise_at_end
from profilers.contract.study.verdict import verdict_of

#: Models ``--model all`` runs, in order.
DEMO_MODELS: tuple[str, ...] = ("gpt", "cnn")
DEFAULT_STEPS = 30


def build_parser() -> argparse.ArgumentParser:
    """Build the ``autotune demo`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="autotune demo",
        description="Profile the built-in demo models (a small GPT and a small CNN on synthetic data).",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=DEFAULT_STEPS,
        help=f"training steps per model, warm-up and deep-profile steps included (default {DEFAULT_STEPS})",
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda", "auto"),
        default="auto",
        help="device to train on; auto picks CUDA when available (default auto)",
    )
    parser.add_argument(
        "--runs-root",
        "--run-root",  # the name this option had first
        dest="run_root",
        type=Path,
        default=None,
        help="folder to create the run directories in (default: ./runs, as profile and tune)",
    )
    parser.add_argument(
        "--model", choices=(*DEMO_MODELS, "all"), default="all", help="which demo model (default all)"
    )
    parser.add_argument(
        "--tune-trials",
        type=int,
        default=DEFAULT_TRIALS,
        help=f"trials of the tuning phase (gpt), baseline included; 0 = none (default {DEFAULT_TRIALS})",
    )
    parser.add_argument(
        "--confirm-rounds",
        type=int,
        default=3,
        help="rounds re-measuring the best against the baseline after the search; 0 = none (default 3)",
    )
    parser.add_argument(
        "--dashboard",
        action="store_true",
        help="follow the demo's runs in the terminal dashboard (its output goes to runs/dashboard.log)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``autotune demo``; returns the process exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)

    if wants_dashboard(args.dashboard):
        return dashboard_alongside(None, args.run_root or Path("runs"), ["demo", *argv])
    console = Console()
    if args.steps < 1:
        console.print("[red]error:[/red] --steps must be at least 1")
        return 2
    if args.tune_trials < 0:
        console.print("[red]error:[/red] --tune-trials must be 0 or more")
        return 2

    # Imported here so `autotune demo --help` stays fast.
    import torch

    from autotune.demo.models import default_config, train

    if args.device == "cuda" and not torch.cuda.is_available():
        console.print("[red]error:[/red] --device cuda was asked for, but CUDA is not available here")
        return 2
    device = "cuda" if args.device == "auto" and torch.cuda.is_available() else args.device
    device = "cpu" if device == "auto" else device
    models = DEMO_MODELS if args.model == "all" else (args.model,)

    started = time.perf_counter()
    run_dirs: list[tuple[str, Path | None]] = []
    for model in models:
        batch_size = default_config(model).default_batch_size
        console.rule(f"demo-{model}")
        console.print(f"Training demo {model} on {device}: {args.steps} steps at batch {batch_size}, fp32")
        where = {} if args.run_root is None else {"runs_root": args.run_root}
        with autotune.profile(name=f"demo-{model}", **where) as prof:
            loss = train(model, steps=args.steps, batch_size=batch_size, device=device)
        console.print(f"final loss {loss:.3f}")
        if prof.figures is None:
            console.print("[yellow]the profiler produced no summary for this run[/yellow]")
        else:
            render_summary(prof.figures, console, run_dir=prof.run_dir)
        run_dirs.append((model, prof.run_dir))

    tuned = None
    if args.tune_trials > 0:
        console.rule("demo-tune")
        tuned = tune_demo(
            console, device, args.tune_trials, args.run_root, confirm_rounds=args.confirm_rounds
        )

    console.rule()
    console.print(f"Demo finished in {time.perf_counter() - started:.1f} s.")
    for model, run_dir in run_dirs:
        console.print(f"  demo-{model}: {run_dir or 'n/a (no run directory could be written)'}")
    if tuned is not None and tuned.best is not None:
        params = ", ".join(f"{k}={v}" for k, v in tuned.best.params.items()) or "the defaults"
        verdict = verdict_of(tuned)
        console.print(f"  demo-tune: {verdict.best_label.lower()} {params} ({tuned.run_dir})")
        console.print(f"  verdict: {escape(verdict.headline)}")

    tune_dir = tuned.run_dir if tuned is not None else None
    advised = Path(tune_dir) if tune_dir else next((d for _, d in run_dirs if d), None)
    advise_at_end(advised, console, write=("html", "md", "json"))
    return 0 if args.tune_trials == 0 or tuned is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
