"""The plan's GPU step time against published training throughputs, and its calibration on them.

    python benchmarks/gpu_anchors.py [--only NAME,...]

Each anchor is a published measurement with its source: a model (a GPT of the given width, depth,
heads, sequence length and vocabulary), a GPU, the number of GPUs, micro-batch, gradient
accumulation, precision and layout, and the tokens per second per GPU the publisher measured. For
each, this project's own GPT (``autotune.demo.models.TinyGPT``, pre-LN, learned positions, GELU
MLP, tied embeddings, ``scaled_dot_product_attention``; the same parameter count as the
publisher's model to 0.1%) is traced under fake tensors at that micro-batch, and the plan's time
model predicts the step on that GPU. Printed side by side: published and predicted tokens/s per GPU
with the plan's efficiencies as shipped (:data:`autotune.plan.model.EFFICIENCY`), then the
efficiencies fitted on the anchors (least squares of the log error over a grid), with the
leave-one-out error of each anchor (fitted on the others, predicted without it): the figure that
says how well the model predicts a configuration it was not fitted on. Then, for a model measured
on several GPUs, the ranking by $ per token at the price table's prices, published against
predicted.

Sources (tables copied as figures, not code):

- mosaicml/llm-foundry ``scripts/train/benchmarking/README.md`` (commit 061f2c7): MPT models on
  MosaicML's platform with Composer, FSDP ``FULL_SHARD``, bf16, flash attention, no activation
  checkpointing in the rows used; "Throughput (T/s/GPU)". The MPT shapes are llm-foundry's
  ``mpt-*.yaml``: vocabulary 50,368, MLP ratio 4; the parameter counts in the table match the GPT
  traced here (e.g. 1b: 1,315,950,592).
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LLM_FOUNDRY = "mosaicml/llm-foundry scripts/train/benchmarking/README.md (061f2c7)"
#: (d_model, n_layers, n_heads) of llm-foundry's MPT sizes.
MPT = {"125m": (768, 12, 12), "350m": (1024, 24, 16), "760m": (1536, 24, 12), "1b": (2048, 24, 16),
       "3b": (2560, 32, 20), "7b": (4096, 32, 32)}  # fmt: skip


@dataclass(frozen=True)
class Anchor:
    """One published measurement of training throughput."""

    name: str
    source: str
    gpu: str  # the plan's GPU key
    gpus: int
    shape: str  # a key of MPT
    seq_len: int
    micro_batch: int
    accumulation: int
    layout: str  # "fsdp" or "ddp"
    tokens_per_s_per_gpu: float
    vocab: int = 50368


ANCHORS = (
    Anchor("mpt-125m A100-80GB", LLM_FOUNDRY, "A100-80GB", 8, "125m", 2048, 32, 2, "fsdp", 141_737),
    Anchor("mpt-350m A100-80GB", LLM_FOUNDRY, "A100-80GB", 8, "350m", 2048, 32, 2, "fsdp", 58_782),
    Anchor("mpt-760m A100-80GB", LLM_FOUNDRY, "A100-80GB", 8, "760m", 2048, 24, 2, "fsdp", 32_434),
    Anchor("mpt-1b A100-80GB", LLM_FOUNDRY, "A100-80GB", 8, "1b", 2048, 14, 4, "fsdp", 20_513),
    Anchor("mpt-3b A100-80GB", LLM_FOUNDRY, "A100-80GB", 8, "3b", 2048, 10, 2, "fsdp", 10_811),
    Anchor("mpt-7b A100-80GB", LLM_FOUNDRY, "A100-80GB", 8, "7b", 2048, 6, 2, "fsdp", 4_641),
    Anchor("mpt-3b A100-40GB", LLM_FOUNDRY, "A100-40GB", 8, "3b", 2048, 5, 8, "fsdp", 10_065),
    Anchor("mpt-760m H100-SXM", LLM_FOUNDRY, "H100-SXM", 8, "760m", 2048, 24, 2, "fsdp", 63_147),
    Anchor("mpt-1b H100-SXM", LLM_FOUNDRY, "H100-SXM", 8, "1b", 2048, 14, 1, "fsdp", 45_455),
    Anchor("mpt-7b H100-SXM", LLM_FOUNDRY, "H100-SXM", 8, "7b", 2048, 6, 1, "fsdp", 10_643),
)


def step_models(anchor: Anchor) -> tuple[object, int]:
    """The traced step of the anchor's GPT (fitted in the micro-batch), and its parameter count."""
    from autotune.demo.models import GPTConfig
    from autotune.demo.plan import demo_workload
    from autotune.plan.model import StepModel
    from autotune.plan.script import scaled
    from autotune.plan.step import trace_step

    d, layers, heads = MPT[anchor.shape]
    cfg = GPTConfig(
        vocab_size=anchor.vocab, seq_len=anchor.seq_len, d_model=d, n_layers=layers, n_heads=heads
    )
    factory, batch, loss, adamw, _ = demo_workload("gpt", cfg)
    one = trace_step(factory, batch, loss, adamw, anchor.micro_batch, "bf16")
    return StepModel.fit(one, scaled(one, 2 * anchor.micro_batch)), one.parameters


def predicted_tokens_per_s(anchor: Anchor, step: object, eff: object) -> float | None:
    """Tokens/s per GPU the plan predicts for the anchor with efficiencies ``eff``."""
    from autotune.plan.gpus import gpu_spec
    from autotune.plan.plan import Layout

    spec = gpu_spec(anchor.gpu)
    assert spec is not None, anchor.gpu
    seconds = Layout(anchor.layout, anchor.gpus, 0).step_s(
        spec, step, anchor.micro_batch, anchor.accumulation, eff  # type: ignore[arg-type]
    )
    if seconds is None:
        return None
    return anchor.micro_batch * anchor.accumulation * anchor.seq_len / seconds


def pct(predicted: float | None, published: float) -> str:
    """The signed error of a prediction, in percent."""
    return f"{100 * ((predicted or 0.0) / published - 1):+.1f}%"


def log_error(predicted: float | None, published: float) -> float:
    return math.inf if not predicted else abs(math.log(predicted / published))


def main() -> None:
    from autotune.plan.model import EFFICIENCY, Efficiency

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", default="", help="comma-separated anchor names")
    args = parser.parse_args()
    anchors = [a for a in ANCHORS if not args.only or a.name in args.only.split(",")]
    started = time.perf_counter()
    models = {}
    for a in anchors:
        models[a.name], params = step_models(a)
        print(f"traced {a.name}: {params / 1e6:,.0f}M parameters ({time.perf_counter() - started:.0f} s)")

    shipped = EFFICIENCY[1]
    print(f"\n{'anchor':22s} {'published':>10s} {'shipped':>10s} {'error':>7s}  interval (tokens/s per GPU)")
    inside = 0
    for a in anchors:
        p = predicted_tokens_per_s(a, models[a.name], shipped) or 0.0
        slow = predicted_tokens_per_s(a, models[a.name], EFFICIENCY[0]) or 0.0
        fast = predicted_tokens_per_s(a, models[a.name], EFFICIENCY[2]) or 0.0
        inside += slow <= a.tokens_per_s_per_gpu <= fast
        print(
            f"{a.name:22s} {a.tokens_per_s_per_gpu:10,.0f} {p:10,.0f} {pct(p, a.tokens_per_s_per_gpu):>7s}"
            f"  {slow:,.0f}-{fast:,.0f}"
        )
    print(f"published inside the predicted interval: {inside} of {len(anchors)}")

    grid = {
        "gemm": [0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95],
        "attention": [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
        "memory": [0.3, 0.4, 0.5, 0.6, 0.7, 0.85, 1.0, 1.5],
        "launch_us": [0.0, 2.0, 5.0, 10.0],
    }
    candidates = [Efficiency(*v) for v in itertools.product(*grid.values())]

    def fit(on: list[Anchor]) -> Efficiency:
        def cost(e: Efficiency) -> float:
            return sum(
                log_error(predicted_tokens_per_s(a, models[a.name], e), a.tokens_per_s_per_gpu) ** 2
                for a in on
            )

        return min(candidates, key=cost)

    best = fit(anchors)
    print(f"\nfitted on all {len(anchors)}: {best}")
    print(f"{'anchor':22s} {'published':>10s} {'fitted':>10s} {'error':>7s} {'leave-one-out':>14s}")
    loo = []
    for a in anchors:
        fitted = predicted_tokens_per_s(a, models[a.name], best)
        others = fit([x for x in anchors if x is not a])
        q = predicted_tokens_per_s(a, models[a.name], others)
        loo.append(abs((q or 0) / a.tokens_per_s_per_gpu - 1))
        print(
            f"{a.name:22s} {a.tokens_per_s_per_gpu:10,.0f} {fitted or 0:10,.0f} "
            f"{pct(fitted, a.tokens_per_s_per_gpu):>7s} {pct(q, a.tokens_per_s_per_gpu):>14s}"
        )
    shipped_errors = [
        abs((predicted_tokens_per_s(a, models[a.name], shipped) or 0) / a.tokens_per_s_per_gpu - 1)
        for a in anchors
    ]
    print(
        f"median |error|: shipped efficiencies {100 * statistics.median(shipped_errors):.1f}%, "
        f"leave-one-out {100 * statistics.median(loo):.1f}% ({time.perf_counter() - started:.0f} s)"
    )
    ranking(anchors, models, shipped)


def ranking(anchors: list[Anchor], models: dict[str, object], eff: object) -> None:
    """For each model measured on several GPUs: cheapest per token, published against predicted."""
    from autotune.cost.prices import load_prices, resolve_price

    table = load_prices(None)
    by_shape: dict[tuple[str, int], list[Anchor]] = {}
    for a in anchors:
        by_shape.setdefault((a.shape, a.seq_len), []).append(a)
    print("\n$ per million tokens at the price table's prices (shipped efficiencies), cheapest first:")
    agree = total = 0
    for (shape, seq), group in by_shape.items():
        if len(group) < 2:
            continue
        rows = []
        for a in group:
            quote = resolve_price(a.gpu, table=table)
            if quote is None:
                continue
            predicted = predicted_tokens_per_s(a, models[a.name], eff) or math.nan
            usd = quote.usd_per_gpu_hour / 3600 * 1e6
            rows.append((a.gpu, usd / a.tokens_per_s_per_gpu, usd / predicted))
        published = [r[0] for r in sorted(rows, key=lambda r: r[1])]
        predicted_order = [r[0] for r in sorted(rows, key=lambda r: r[2])]
        total += 1
        agree += published == predicted_order
        print(
            f"  mpt-{shape} seq {seq}: published "
            + ", ".join(f"{g} ${u:.2f}" for g, u, _ in sorted(rows, key=lambda r: r[1]))
            + " | predicted "
            + ", ".join(f"{g} ${p:.2f}" for g, _, p in sorted(rows, key=lambda r: r[2]))
            + (" (same order)" if published == predicted_order else " (DIFFERENT order)")
        )
    print(f"  the same cheapest-first order for {agree} of {total} models")


if __name__ == "__main__":
    main()
