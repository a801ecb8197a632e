"""``autotune plan``'s options (kept light)."""

from __future__ import annotations

import argparse
from typing import Any

from autotune.cli.support import number

FORMATS = ("table", "json", "md", "html")


def add_parser(sub: Any) -> None:
    """Register ``autotune plan``."""
    p = sub.add_parser(
        "plan",
        help="predict memory, step time and $ of every configuration on every GPU (no GPU needed)",
        description=(
            "Trace the training step with fake tensors (no memory is allocated for the model) and "
            "predict, for each GPU of the price table (or --gpu) and each configuration (micro-batch "
            "× gradient accumulation at the global batch, precision, activation checkpointing): peak "
            "memory by category and whether it fits, the largest micro-batch that fits, step time "
            "with an interval, samples/s, $ per million samples and for the run; cheapest first. "
            "SCRIPT runs unmodified, under fake tensors, up to its second optimizer step (seconds; a "
            "64B-parameter model about 12 s on 2 cores); its own micro-batch and accumulation are the "
            "starting point. Over --gpus/--nodes: DDP, FSDP, CPU offload, tensor and pipeline parallel "
            "layouts, and a suggestion of the cheapest configuration that fits. "
            "--demo plans a built-in model instead; from Python, any model (autotune.plan.plan.plan)."
        ),
    )
    p.add_argument("--demo", choices=("gpt", "cnn"), help="plan a built-in demo model instead of SCRIPT")
    p.add_argument("--gpu", action="append", default=[], metavar="KEY", help="a GPU to plan for (repeatable)")
    p.add_argument("--gpus", type=number(int, 1, 1024, "a GPU count"), default=1, help="GPUs per node (1)")
    p.add_argument("--nodes", type=number(int, 1, 4096, "a node count"), default=1, help="nodes (1)")
    p.add_argument(
        "--inter-node-gb-s",
        type=number(float, 0, None, "a positive number", low_open=True),
        default=50.0,
        metavar="GB_S",
        help="GB/s per GPU between nodes, one direction (50: one 400 Gb/s NDR adapter per GPU)",
    )
    p.add_argument(
        "--pp-schedule", choices=("1f1b", "gpipe"), default="1f1b",
        help="the pipeline schedule of the pipeline-parallel rows (1f1b: at most pp micro-batches' "
        "activations on the first stage; gpipe: all of them)",
    )  # fmt: skip
    p.add_argument("--global-batch", type=number(int, 1, None, "a positive integer"),
                   help="samples per optimizer step (the script's own; 64 for --demo)")  # fmt: skip
    p.add_argument("--precision", action="append", choices=("fp32", "tf32", "bf16", "fp16"),
                   help="precisions to plan (the script's own; fp32 and bf16 for --demo)")  # fmt: skip
    p.add_argument("--checkpointing", action="store_true", help="also plan activation checkpointing")
    p.add_argument(
        "--selective-checkpointing", action="store_true",
        help="also plan selective (per-op) checkpointing, as torchtitan's 'op' mode: each block keeps its "
        "attention's and every other matrix product's outputs and recomputes the rest",
    )  # fmt: skip
    p.add_argument(
        "--compile", action="store_true",
        help="also plan each row under torch.compile, at its published effect on step time and memory "
        "(an estimate: torchtitan's Llama 3.1 8B on H100s, 2024-12)",
    )  # fmt: skip
    p.add_argument(
        "--float8", action="store_true",
        help="also plan bf16 rows with torch.compile and float8 matrix products (torchao) on GPUs with fp8 "
        "tensor cores, at their published effect (an estimate, from the same runs)",
    )  # fmt: skip
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="add this machine ('this-cpu') to the plan: with --demo, real steps timed (~15 s), this "
        "CPU's costs fitted and checked on configurations not timed, the kernel workspace measured; with "
        "a SCRIPT, a few-second probe of this CPU's costs and the script's step run once more for real to "
        "measure its workspace",
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
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="table (default), json (for CI), md (for a pull request) or html (with its chart)",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write it there (json, md, html; default: stdout)")
    p.add_argument("--top", type=number(int, 1, None, "a positive integer"), default=20,
                   help="rows of the table (20; JSON has every configuration)")  # fmt: skip
    p.add_argument("script", metavar="SCRIPT", nargs="?", help="the training script to plan")
    p.add_argument("script_args", metavar="ARGS", nargs=argparse.REMAINDER, help="arguments for the script")
    # each option of plan's own, and whether it takes a value: a script given one gets a hint
    own = {s: a.nargs != 0 for a in p._actions for s in a.option_strings if s not in ("-h", "--help")}
    p.set_defaults(plan_options=own)
