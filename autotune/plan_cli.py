"""``autotune plan``: predict memory, speed and cost of every configuration on every GPU, before renting."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

FORMATS = ("table", "json")


def add_plan_parser(sub: Any, number: Any) -> None:
    """Register ``autotune plan``; ``number`` is the CLI's checked-number argparse type factory."""
    p = sub.add_parser(
        "plan",
        help="predict memory, step time and $ of every configuration on every GPU (no GPU needed)",
        description=(
            "Trace the training step with fake tensors (no memory is allocated for the model) and "
            "predict, for each GPU of the price table (or --gpu) and each configuration (micro-batch "
            "× gradient accumulation at the global batch, precision, activation checkpointing): peak "
            "memory by category and whether it fits, the largest micro-batch that fits, step time "
            "with an interval, samples/s, $ per million samples and for the run; cheapest first. "
            "This version plans the built-in demo models (--demo) and, from Python, any model "
            "(autotune.plan.plan.plan); unmodified scripts are next."
        ),
    )
    p.add_argument("--demo", choices=("gpt", "cnn"), required=True, help="plan a built-in demo model")
    p.add_argument("--gpu", action="append", default=[], metavar="KEY", help="a GPU to plan for (repeatable)")
    p.add_argument("--gpus", type=number(int, 1, 1024, "a GPU count"), default=1, help="GPUs per job (1)")
    p.add_argument("--global-batch", type=number(int, 1, None, "a positive integer"), default=64,
                   help="samples per optimizer step (64)")  # fmt: skip
    p.add_argument("--precision", action="append", choices=("fp32", "tf32", "bf16", "fp16"),
                   help="precisions to plan (fp32 and bf16)")  # fmt: skip
    p.add_argument("--checkpointing", action="store_true", help="also plan activation checkpointing")
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="time real steps here (~15 s), fit this CPU's costs, check them on configurations not "
        "timed, and add this machine ('this-cpu') to the plan",
    )
    p.add_argument("--headroom", type=number(float, 0, 1, "a fraction in [0, 1]"), default=0.1,
                   help="memory kept free, as a fraction of the GPU's (0.1)")  # fmt: skip
    run = p.add_argument_group("the run, for its total $ (one of)")
    run.add_argument("--samples", type=number(int, 1, None, "a positive integer"),
                     help="samples the run trains on")  # fmt: skip
    run.add_argument("--tokens", type=number(int, 1, None, "a positive integer"),
                     help="tokens the run trains on (samples = tokens / sequence length)")  # fmt: skip
    run.add_argument("--epochs", type=number(float, 0, None, "a positive number", low_open=True),
                     help="epochs of --dataset-samples samples each")  # fmt: skip
    run.add_argument("--dataset-samples", type=number(int, 1, None, "a positive integer"),
                     help="samples in one epoch (with --epochs)")  # fmt: skip
    p.add_argument("--format", choices=FORMATS, default="table", help="table (default) or json")
    p.add_argument("--top", type=number(int, 1, None, "a positive integer"), default=20,
                   help="rows of the table (20; JSON has every configuration)")  # fmt: skip


def cmd_plan(args: argparse.Namespace, usage_error: type[Exception]) -> int:
    """Plan and print; bad input raises ``usage_error`` (one line, exit 2)."""
    from autotune.plan.demo import demo_plan, demo_workload

    run_samples = args.samples
    if sum(x is not None for x in (args.samples, args.tokens, args.epochs)) > 1:
        raise usage_error("give the run as one of --samples, --tokens, or --epochs with --dataset-samples")
    if (args.epochs is None) != (args.dataset_samples is None):
        raise usage_error("--epochs and --dataset-samples go together")
    if args.epochs is not None:
        run_samples = round(args.epochs * args.dataset_samples)
    if args.tokens is not None:
        per_sample = demo_workload(args.demo)[4]
        if not per_sample:
            raise usage_error(f"--tokens: the {args.demo} demo model does not train on tokens; use --samples")
        run_samples = -(-args.tokens // per_sample)
    try:
        result = demo_plan(
            args.demo,
            global_batch=args.global_batch,
            gpus=tuple(args.gpu),
            gpus_per_node=args.gpus,
            precisions=tuple(args.precision or ("fp32", "bf16")),
            checkpointing=(False, True) if args.checkpointing else (False,),
            headroom=args.headroom,
            run_samples=run_samples,
            calibrate=args.calibrate,
        )
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    if args.format == "json":
        sys.stdout.write(json.dumps(plan_dict(result), indent=2, allow_nan=False) + "\n")
        return 0
    _print_table(result, args.top)
    return 0


def plan_dict(result: Any) -> dict[str, Any]:
    """The plan as JSON: ``configs``, ``model``, ``calibration``."""
    from autotune.report.jsonout import clean_json

    data = {"configs": [dataclasses.asdict(c) for c in result.configs], "model": result.model,
            "calibration": result.calibration, "trace_s": result.trace_s}  # fmt: skip
    cleaned: dict[str, Any] = clean_json(data)
    return cleaned


def _print_table(result: Any, top: int) -> None:
    from rich.console import Console
    from rich.table import Table

    from autotune.fmt import NA, format_bytes, format_seconds, format_usd

    table = Table(
        title="Plan: cheapest first (uncalibrated step times; see the interval)", title_justify="left"
    )
    for name in ("GPU", "micro-batch × accum", "precision", "ckpt", "peak memory", "fits", "step",
                 "interval", "samples/s", "$/M samples"):  # fmt: skip
        table.add_column(name, justify="left" if name in ("GPU", "precision", "fits") else "right")
    for c in result.configs[:top]:
        p = c.params
        low_high = c.step_time_s_interval
        table.add_row(
            f"{c.gpu} × {c.gpus}" if c.gpus > 1 else c.gpu,
            f"{p['micro_batch']} × {p['grad_accum']}",
            p["precision"],
            "yes" if p["activation_checkpointing"] else "no",
            format_bytes(c.peak_memory_bytes),
            "yes" if c.fits else f"no: {c.why_not}",
            format_seconds(c.step_time_s),
            f"{format_seconds(low_high[0])}–{format_seconds(low_high[1])}" if low_high else NA,
            NA if c.samples_per_s is None else f"{c.samples_per_s:,.0f}",
            format_usd(c.usd_per_million_samples) if c.usd_per_million_samples is not None else NA,
        )
    console = Console()
    console.print(table)
    cpu = result.calibration.get("cpu")
    if cpu:
        errors = ", ".join(
            f"{row['config']} {100 * (row['predicted_s'] / row['measured_s'] - 1):+.0f}%"
            for row in cpu["held_out"]
        )
        console.print(
            f"This CPU, calibrated on {len(cpu['fitted_on'])} timed configurations; on "
            f"{len(cpu['held_out'])} others: median error "
            f"{100 * (cpu['held_out_median_error'] or 0):.1f}% ({errors})."
        )
    console.print(
        f"{len(result.configs)} configurations; traced in {result.trace_s:.1f} s; "
        f"{result.model.get('parameters', 0):,} parameters. {result.calibration['note']}."
    )


__all__ = ["add_plan_parser", "cmd_plan", "plan_dict"]
