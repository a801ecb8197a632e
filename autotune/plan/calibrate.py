"""Calibrate the time model on the machine at hand: real steps timed, a cost per FLOP, byte and op fitted.

A step's time here is modelled as ``s_fp32 × FLOPs in fp32 + s_low × FLOPs in bf16/fp16 + s_byte ×
bytes the other ops move + s_op × ops`` (GEMM and attention FLOPs by the dtype they run in; a CPU's
bf16 GEMMs can be slower than its fp32 ones). :func:`calibrate` times real steps of the model at
some configurations (the median of several steps after warm-up), fits the four costs by least
squares on their traces, each at least half of what this CPU's probe measured for it (never 0),
and predicts held-out configurations it did not time, so the error it reports is one the fit did
not see.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from autotune.plan.cpu_costs import CpuCalibration, features
from autotune.plan.probe import probe_costs
from autotune.plan.step import BatchFn, LossFn, OptimizerFn, StepFigures, prepare_step, trace_step
from autotune.plan.workspace import Config, config_label

#: A fitted cost is at least this share of what the probe (:mod:`autotune.plan.probe`) measured.
FLOOR_SHARE = 0.5


def time_step_s(
    model_fn: Any,
    batch_fn: BatchFn,
    loss_fn: LossFn,
    optimizer_fn: OptimizerFn,
    micro_batch: int,
    precision: str = "fp32",
    checkpointing: bool = False,
    steps: int = 8,
    warmup: int = 2,
) -> float:
    """Median seconds of a real training step here (after ``warmup`` steps)."""
    torch.manual_seed(0)
    step = prepare_step(model_fn(), batch_fn, loss_fn, optimizer_fn, micro_batch, precision, checkpointing)
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        step.run()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def fit(points: list[tuple[list[float], float]], floors: list[float] | None = None) -> list[float]:
    """Least squares of measured seconds on features, each cost at least its floor (else 0).

    Exact for a few features: every subset of the costs above their floors is solved, and the
    best whose costs all stay at or above them wins.
    """
    if floors is not None:  # c = floor + d, d >= 0: fit d on what the floors leave unexplained
        rest = [(x, y - sum(a * f for a, f in zip(x, floors, strict=True))) for x, y in points]
        return [f + d for f, d in zip(floors, fit(rest), strict=True)]
    n = len(points[0][0])
    scale = [max((abs(p[0][j]) for p in points), default=0.0) or 1.0 for j in range(n)]
    rows = [([x / scale[j] for j, x in enumerate(p[0])], p[1]) for p in points]
    best: tuple[float, list[float]] = (math.inf, [0.0] * n)
    for mask in range(1, 1 << n):
        cols = [j for j in range(n) if mask >> j & 1]
        coef = _least_squares([[r[0][j] for j in cols] for r in rows], [r[1] for r in rows])
        if coef is None or min(coef) < 0:
            continue
        full = [0.0] * n
        for j, c in zip(cols, coef, strict=True):
            full[j] = c
        residual = sum((sum(a * c for a, c in zip(r[0], full, strict=True)) - r[1]) ** 2 for r in rows)
        if residual < best[0]:
            best = (residual, full)
    return [c / scale[j] for j, c in enumerate(best[1])]


def _least_squares(a: list[list[float]], y: list[float]) -> list[float] | None:
    """Solve the normal equations AᵀA c = Aᵀy by Gaussian elimination; None when singular."""
    k = len(a[0])
    m = [[sum(r[i] * r[j] for r in a) for j in range(k)] + [sum(r[i] * v for r, v in zip(a, y, strict=True))]
         for i in range(k)]  # fmt: skip
    for col in range(k):
        pivot = max(range(col, k), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) < 1e-12:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(k):
            if r != col:
                factor = m[r][col] / m[col][col]
                m[r] = [x - factor * z for x, z in zip(m[r], m[col], strict=True)]
    return [m[i][k] / m[i][i] for i in range(k)]


def calibrate(
    model_fn: Any,
    batch_fn: BatchFn,
    loss_fn: LossFn,
    optimizer_fn: OptimizerFn,
    fit_on: list[Config],
    held_out: list[Config],
    steps: int = 8,
    traced: Callable[[Config], StepFigures] | None = None,
) -> CpuCalibration:
    """Time ``fit_on`` and ``held_out`` configurations for real, fit on the first, predict the second.

    ``traced``: a configuration's trace (:func:`trace_step` of the model by default), so a caller that
    also calibrates memory traces each configuration once.
    """
    label = config_label

    def measured(c: Config) -> tuple[StepFigures, float]:
        figures = traced(c) if traced else trace_step(model_fn, batch_fn, loss_fn, optimizer_fn, *c)
        return figures, time_step_s(model_fn, batch_fn, loss_fn, optimizer_fn, c[0], c[1], c[2], steps=steps)

    probe = probe_costs()
    # no cost under half the probe's best-case rate: a fit of few points once set one to 0
    probed = (probe.s_per_fp32_flop, probe.s_per_low_flop, probe.s_per_byte, probe.s_per_op)
    floors = [FLOOR_SHARE * c for c in probed]
    fitted = [measured(c) for c in fit_on]
    fp32, low, per_byte, per_op = fit([(features(f), s) for f, s in fitted], floors)
    labels = tuple(label(c) for c in fit_on)
    result = CpuCalibration(fp32, low, per_byte, per_op, fitted_on=labels, held_out=())
    rows = []
    for c in held_out:
        figures, seconds = measured(c)
        rows.append((label(c), result.predict_s(figures), seconds))
    return CpuCalibration(
        fp32, low, per_byte, per_op, fitted_on=labels, held_out=tuple(rows), spread=probe.spread
    )


__all__ = ["CpuCalibration", "calibrate", "features", "fit", "time_step_s"]
