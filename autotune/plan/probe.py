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

import torch
import torch.nn.functional as F
from torch import nn

from autotune.plan.calibrate import CpuCalibration, time_step_s
from autotune.plan.step import trace_step

#: Matrix side of the FLOP probes; elements of the bandwidth probe.
GEMM_SIDE = 256
#: Matrix side of the fp16 probe: smaller, as a CPU without fp16 units takes ~10 ms at 256.
FP16_SIDE = 128
STREAM_ELEMENTS = 1 << 22


def probe_costs(repeats: int = 7) -> CpuCalibration:
    """Seconds per fp32 FLOP, bf16 FLOP, fp16 FLOP, byte moved and op on this machine's CPU."""
    n = GEMM_SIDE
    a32, b32 = torch.randn(n, n), torch.randn(n, n)
    a16, b16 = a32.bfloat16(), b32.bfloat16()
    # fp16 apart: a CPU without fp16 matrix units runs it many times slower than bf16 (80x here)
    ah, bh = a32[:FP16_SIDE, :FP16_SIDE].half(), b32[:FP16_SIDE, :FP16_SIDE].half()
    x, y = torch.randn(STREAM_ELEMENTS), torch.randn(STREAM_ELEMENTS)
    out = torch.empty(STREAM_ELEMENTS)
    gemm_flops = 2 * n**3
    stream_bytes = 3 * 4 * STREAM_ELEMENTS
    op_s = _op_s()
    return CpuCalibration(
        s_per_fp32_flop=max(_best_s(lambda: torch.mm(a32, b32), repeats) - op_s, 0.0) / gemm_flops,
        s_per_low_flop=max(_best_s(lambda: torch.mm(a16, b16), repeats) - op_s, 0.0) / gemm_flops,
        s_per_byte=max(_best_s(lambda: torch.add(x, y, out=out), repeats) - op_s, 0.0) / stream_bytes,
        s_per_op=op_s,
        fitted_on=("probe",),
        held_out=(),
        s_per_fp16_flop=max(_best_s(lambda: torch.mm(ah, bh), repeats) - op_s, 0.0) / (2 * FP16_SIDE**3),
    )


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


def _op_s() -> float:
    """Seconds per op as the plan's tracer counts them: the tiny network's real step over its ops."""
    def batch(b: int) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        return (torch.randint(0, 32, (b, 4)),), torch.randn(b, 4, 16)

    def loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(out, target)

    def sgd(params: list[nn.Parameter]) -> torch.optim.Optimizer:
        return torch.optim.SGD(params, lr=1e-3)

    ops = trace_step(_Tiny, batch, loss, sgd, micro_batch=2).ops
    return time_step_s(_Tiny, batch, loss, sgd, micro_batch=2, steps=30) / max(ops, 1)


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
