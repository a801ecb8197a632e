"""The costs per FLOP, byte and op of this CPU, from a second of small kernels (no model needed).

What :func:`autotune.plan.calibrate.calibrate` fits from real steps of a model, read instead from
a matrix product in fp32 and in bf16, a large elementwise add, and the training step of a tiny
transformer-like network (embedding, layer norms, GELUs, residuals, SGD) whose time is all per-op
overhead: dispatch, autograd, allocation. Its seconds over the ops the plan's tracer counts in the
same step are the cost of an op as the plan counts them (measured here: 9 µs; a one-element add
alone takes 1 µs, which made every micro-batch look alike). Good enough to rank configurations
of a model before any of them ran (the tuner's prior, scaled by the baseline's measured step), not
to predict absolute times. The threads are torch's current ones, as a single-process trial's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from autotune.plan.cpu_costs import CpuCalibration
from autotune.plan.step import prepare_step, trace_step

#: Matrix sides of the FLOP probes (two each: the cost per FLOP is the slope between them).
GEMM_SIDES = (128, 256)
#: The fp16 probe's: smaller, as a CPU without fp16 units takes ~10 ms at 256.
FP16_SIDES = (64, 128)
#: Elements of the bandwidth probe (its call's fixed cost is 0.1% of it: no second size needed; two
#: sizes around the last-level cache gave two answers 2.4× apart).
STREAM_ELEMENTS = 1 << 22
#: Times the whole probe runs: each kernel's time is the fastest of all its rounds' samples.
ROUNDS = 3


def probe_costs(repeats: int = 7, rounds: int = ROUNDS) -> CpuCalibration:
    """Seconds per fp32 FLOP, bf16 FLOP, fp16 FLOP, byte moved and op on this machine's CPU.

    The probe runs ``rounds`` times; each kernel's time is the fastest sample of all rounds (a busy
    neighbour only slows a sample), and ``spread`` is how far the rounds' own costs ranged, over the
    lowest (0.04 here on a quiet machine). A cost per FLOP is the slope between two sizes of a
    matrix product, so the fixed cost of a call cancels out rather than being subtracted (a
    subtraction once left 0 per fp32 FLOP), and it is never 0.
    """
    return from_rounds([probe_round(repeats) for _ in range(max(1, rounds))])


def from_rounds(timings: list[dict[str, float]]) -> CpuCalibration:
    """The costs of the probe's rounds (:func:`probe_round`): each kernel's fastest, and the spread."""
    fastest = {k: min(t[k] for t in timings) for k in timings[0]}
    costs = _costs(fastest)
    per_round = [_costs(t) for t in timings]
    spread = max((max(r[k] for r in per_round) - min(r[k] for r in per_round)) / costs[k] for k in costs)
    return CpuCalibration(
        s_per_fp32_flop=costs["fp32"],
        s_per_low_flop=costs["bf16"],
        s_per_byte=costs["byte"],
        s_per_op=costs["op"],
        fitted_on=("probe",),
        held_out=(),
        s_per_fp16_flop=costs["fp16"],
        spread=spread,
    )


def probe_round(repeats: int = 7) -> dict[str, float]:
    """One round of the probe: the fastest seconds of each kernel at each size."""
    out: dict[str, float] = {}
    for name, dtype, sides in (("fp32", torch.float32, GEMM_SIDES), ("bf16", torch.bfloat16, GEMM_SIDES),
                               ("fp16", torch.float16, FP16_SIDES)):  # fmt: skip
        for side in sides:
            a, b = torch.randn(side, side).to(dtype), torch.randn(side, side).to(dtype)
            out[f"{name}@{side}"] = _best_s(partial(torch.mm, a, b), repeats)
    x, y, result = torch.randn(STREAM_ELEMENTS), torch.randn(STREAM_ELEMENTS), torch.empty(STREAM_ELEMENTS)
    out["add"] = _best_s(partial(torch.add, x, y, out=result), repeats)
    out["op"] = _op_s(repeats)
    return out


def _costs(timings: dict[str, float]) -> dict[str, float]:
    """Seconds per unit from the kernels' seconds: FLOPs as the slope between two sizes."""

    def slope(name: str, sides: tuple[int, int]) -> float:
        small, large = (timings[f"{name}@{n}"] for n in sides)
        u_small, u_large = (2 * n**3 for n in sides)
        per_flop = (large - small) / (u_large - u_small)
        return per_flop if per_flop > 0 else large / u_large  # noise: the larger's own (an upper bound)

    return {
        "fp32": slope("fp32", GEMM_SIDES),
        "bf16": slope("bf16", GEMM_SIDES),
        "fp16": slope("fp16", FP16_SIDES),
        "byte": timings["add"] / (3 * 4 * STREAM_ELEMENTS),
        "op": timings["op"],
    }


class _Tiny(nn.Module):
    """A transformer-like network too small for its FLOPs or bytes to count: its step is its ops."""

    def __init__(self, width: int = 16, layers: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(32, width)
        self.norm = nn.LayerNorm(width)
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(layers))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        for layer in self.layers:
            h = h + F.gelu(layer(self.norm(h)))
        return h


def _op_s(repeats: int) -> float:
    """Seconds per op as the plan's tracer counts them: the tiny network's real step over its ops.

    The fastest of ``repeats`` samples of a few steps each, as the kernels' probes.
    """
    def batch(b: int) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        return (torch.randint(0, 32, (b, 4)),), torch.randn(b, 4, 16)

    def loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(out, target)

    def sgd(params: list[nn.Parameter]) -> torch.optim.Optimizer:
        return torch.optim.SGD(params, lr=1e-3)

    ops = trace_step(_Tiny, batch, loss, sgd, micro_batch=2).ops
    torch.manual_seed(0)
    step = prepare_step(_Tiny(), batch, loss, sgd, 2, "fp32", False)
    return _best_s(step.run, 5 * repeats, inner=1) / max(ops, 1)


def _best_s(work: Callable[[], object], repeats: int, inner: int = 3) -> float:
    """Seconds of one call of ``work``: the fastest of ``repeats`` samples of ``inner`` calls each.

    The fastest, not the median: on a shared machine a busy neighbour only ever slows a sample, and
    two OpenMP threads wanting a busy core slow a matrix product tenfold, which would make every
    configuration look FLOP-bound.
    """
    work()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            work()
        samples.append((time.perf_counter() - start) / inner)
    return min(samples)


__all__ = ["from_rounds", "probe_costs", "probe_round"]
