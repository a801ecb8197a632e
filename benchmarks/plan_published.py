"""The plan against every published llm-foundry run that no fit used: tokens/s per GPU and whether it fits.

    python benchmarks/plan_published.py [--limit N] [--tables A100,H100]

``benchmarks/gpu_anchors.py`` fits the plan's efficiencies on 21 published runs and checks each
one left out. This script judges the plan on the runs no parameter is fitted on: every other row of
mosaicml/llm-foundry's benchmark tables (``scripts/train/benchmarking/README.md``, transcribed in
``benchmarks/data/llm_foundry_runs.json``) on the stack the plan models: FSDP ``FULL_SHARD``,
bf16 (``amp_bf16``, and the A100 40GB tables' pure bf16, as the fitted A100 40GB anchor is),
activation checkpointing of whole blocks or none, no CPU offload. Left out: the fp8 table (the
plan has no fp8 step of its own) and ``SHARD_GRAD_OP`` (ZeRO-2, not a layout the plan has).

Each run is traced as ``gpu_anchors.py`` traces its anchors (this project's GPT at the MPT shape,
FSDP's mixed-precision policy, flash-attn's fused loss) and planned with the shipped efficiencies
(:data:`autotune.plan.model.EFFICIENCY`) and overlap, as ``autotune plan`` would plan it. Printed:
published and predicted tokens/s per GPU, the error, whether the published figure lies in the
plan's interval, the memory per GPU planned and whether it fits the GPU; then the share within
10%, the median error and the fit count, by table, by checkpointing and by sequence length.
About 12 minutes on 2 cores (each model, sequence and micro-batch is traced once).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_anchors import (
    A100_INTER_NODE_GB_S,
    ANCHORS,
    FOUNDRY_RUNS,
    LLM_FOUNDRY,
    SCALING,
    Anchor,
    planned_memory_gib,
    predicted_tokens_per_s,
    step_models,
)

#: Share of the published figure a prediction must be within to count as right (the issue's bar).
WITHIN = 0.10


def judged_runs(path: Path = FOUNDRY_RUNS) -> list[Anchor]:
    """Every transcribed run on the stack the plan models that is not one of the fitted anchors."""
    doc = json.loads(path.read_text())
    columns = doc["columns"]
    fitted = {_key(a) for a in (*ANCHORS, *SCALING) if a.source == LLM_FOUNDRY}
    runs = []
    for values in doc["rows"]:
        row = dict(zip(columns, values, strict=True))
        if row["sharding"] != "FULL_SHARD" or row["precision"] not in ("amp_bf16", "bf16"):
            continue
        if row["activation_cpu_offload"]:
            continue
        nodes = max(1, row["gpus"] // 8)
        shape = f"s{row['seq_len']} {row['micro_batch']}x{row['accumulation']}"
        run = Anchor(
            f"mpt-{row['model']} {row['gpu']} {row['gpus']}x {shape}",
            LLM_FOUNDRY, row["gpu"], row["gpus"], row["model"], row["seq_len"], row["micro_batch"],
            row["accumulation"], "fsdp", float(row["tokens_per_s_per_gpu"]), nodes=nodes,
            inter_node_gb_s=A100_INTER_NODE_GB_S if row["gpu"].startswith("A100") else 50.0,
            checkpointing=bool(row["activation_checkpointing"]),
        )  # fmt: skip
        if _key(run) not in fitted:
            runs.append(run)
    return runs


def _key(a: Anchor) -> tuple[object, ...]:
    return (a.gpu, a.gpus, a.shape, a.seq_len, a.micro_batch, a.accumulation)


def judge(runs: list[Anchor]) -> list[dict[str, object]]:
    """Each run planned as ``autotune plan`` plans it: predicted tokens/s, interval, memory, fit."""
    from autotune.plan.layouts import OVERLAP
    from autotune.plan.model import EFFICIENCY

    traced: dict[tuple[object, ...], tuple[object, int, object]] = {}
    results = []
    started = time.perf_counter()
    for i, run in enumerate(runs):
        key = (run.shape, run.seq_len, run.micro_batch, run.checkpointing)
        if key not in traced:
            traced[key] = step_models(run)
        step, _, units = traced[key]
        predicted = predicted_tokens_per_s(run, step, EFFICIENCY[1], OVERLAP[1]) or 0.0
        slow = predicted_tokens_per_s(run, step, EFFICIENCY[0], OVERLAP[0]) or 0.0
        fast = predicted_tokens_per_s(run, step, EFFICIENCY[2], OVERLAP[2]) or 0.0
        memory_gib, gpu_gib = planned_memory_gib(run, step, units)  # type: ignore[arg-type]
        error = predicted / run.tokens_per_s_per_gpu - 1
        result = {
            "run": run, "predicted": predicted, "error": error,
            "inside": slow <= run.tokens_per_s_per_gpu <= fast, "memory_gib": memory_gib,
            "fits": memory_gib <= gpu_gib, "gpu_gib": gpu_gib,
        }  # fmt: skip
        results.append(result)
        print(
            f"{run.name:44s} {'ckpt' if run.checkpointing else '    '} {run.tokens_per_s_per_gpu:9,.0f} "
            f"{predicted:9,.0f} {100 * error:+6.1f}% {'in ' if result['inside'] else 'OUT'} "
            f"{slow:9,.0f}-{fast:<9,.0f} {memory_gib:6.1f}/{gpu_gib:4.0f} GiB "
            f"{'fits' if result['fits'] else 'NO'}  ({i + 1}/{len(runs)}, "
            f"{time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    return results


def summary(title: str, results: Iterable[dict[str, object]]) -> str:
    """Share within 10%, median |error|, inside the interval, planned to fit, for a group of runs."""
    group = list(results)
    if not group:
        return f"{title:34s} no runs"
    errors = [abs(float(r["error"])) for r in group]  # type: ignore[arg-type]
    within = sum(e <= WITHIN for e in errors)
    return (
        f"{title:34s} {len(group):4d} runs: {within:4d} within {WITHIN:.0%} ({within / len(group):4.0%}), "
        f"median |error| {100 * statistics.median(errors):4.1f}%, inside the interval "
        f"{sum(bool(r['inside']) for r in group):4d}, planned to fit {sum(bool(r['fits']) for r in group):4d}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--limit", type=int, default=0, help="judge only the first N runs (a quick look)")
    parser.add_argument("--tables", default="", help="comma-separated GPU prefixes (A100, H100)")
    args = parser.parse_args()
    runs = judged_runs()
    if args.tables:
        runs = [r for r in runs if r.gpu.startswith(tuple(args.tables.split(",")))]
    if args.limit:
        runs = runs[: args.limit]
    print(f"{'run (GPUs x, sequence, micro-batch x accumulation)':44s} ckpt published predicted  error "
          f"interval             memory/GPU      fit")  # fmt: skip
    results = judge(runs)
    print()
    print(summary("every judged run", results))
    for gpu in sorted({r.gpu for r in runs}):
        print(summary(f"  on {gpu}", (x for x in results if x["run"].gpu == gpu)))  # type: ignore[attr-defined]
    print(summary("  no checkpointing", (x for x in results if not x["run"].checkpointing)))  # type: ignore[attr-defined]
    print(summary("  full checkpointing", (x for x in results if x["run"].checkpointing)))  # type: ignore[attr-defined]
    print(summary("  sequence <= 2048", (x for x in results if x["run"].seq_len <= 2048)))  # type: ignore[attr-defined]
    print(summary("  sequence 4096 to 8192", (x for x in results if 2048 < x["run"].seq_len <= 8192)))  # type: ignore[attr-defined]
    print(summary("  sequence > 8192", (x for x in results if x["run"].seq_len > 8192)))  # type: ignore[attr-defined]
    print(summary("  several nodes", (x for x in results if x["run"].nodes > 1)))  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
