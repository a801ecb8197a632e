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

import statistics
import time
from collections.abc import Callable, Sequence
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from autotune.plan.calibrate import CpuCalibration
from autotune.plan.step import prepare_step, trace_step

#: Matrix sides of the FLOP probes (two each: the cost per FLOP is the slope between them).
GEMM_SIDES = (128, 256)
#: The fp16 probe's: smaller, as a CPU without fp16 units takes ~10 ms at 256.
FP16_SIDES = (64, 128)
#: Elements of the bandwidth probe (its call's fixed cost is 0.1% of it: no second size needed; two
#: sizes around the last-level cache gave two answers 2.4× apart).
STREAM_ELEMENTS = 1 << 22
#: Times the whole probe runs: each cost is the median of its rounds.
ROUNDS = 3


def probe_costs(repeats: int = 7, rounds: int = ROUNDS) -> CpuCalibration:
    """Seconds per fp32 FLOP, bf16 FLOP, fp16 FLOP, byte moved and op on this machine's CPU.

    The probe runs ``rounds`` times and each cost is the median of its rounds (one disturbed round
    is left out); ``spread`` is the largest relative range of a cost between rounds. A cost per
    FLOP is the slope between two sizes of a matrix product, so the fixed cost of a call cancels
    out rather than being subtracted (a subtraction once left 0 per fp32 FLOP), and it is never 0.
    """
    samples = [_probe_once(repeats) for _ in range(max(1, rounds))]
    costs = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    spread = max(
        (max(s[k] for s in samples) - min(s[k] for s in samples)) / costs[k] for k in costs if costs[k] > 0
    )
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


def _probe_once(repeats: int) -> dict[str, float]:
    """One round of the probe: each cost, in seconds per unit."""

    def gemm(dtype: torch.dtype, sides: tuple[int, int]) -> float:
        pairs = [(torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)) for n in sides]
        return _slope_s([partial(torch.mm, a, b) for a, b in pairs], [2 * n**3 for n in sides], repeats)

    x, y, out = torch.randn(STREAM_ELEMENTS), torch.randn(STREAM_ELEMENTS), torch.empty(STREAM_ELEMENTS)
    return {
        "fp32": gemm(torch.float32, GEMM_SIDES),
        "bf16": gemm(torch.bfloat16, GEMM_SIDES),
        "fp16": gemm(torch.float16, FP16_SIDES),
        "byte": _best_s(partial(torch.add, x, y, out=out), repeats) / (3 * 4 * STREAM_ELEMENTS),
        "op": _op_s(repeats),
    }


def _slope_s(works: Sequence[Callable[[], object]], units: list[int], repeats: int) -> float:
    """Seconds per unit between two sizes of one kernel (the fixed cost of a call cancels out).

    Where noise makes the larger size no slower, the larger one's seconds per unit (an upper bound).
    """
    (small, large), (u_small, u_large) = [_best_s(w, repeats) for w in works], units
    slope = (large - small) / (u_large - u_small)
    return slope if slope > 0 else large / u_large


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


__all__ = ["probe_costs"]
