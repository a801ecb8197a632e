"""What a step allocates on this machine that its trace does not see, measured and fitted per sample.

A fake-tensor trace sees every tensor the dispatcher hands out, but not the memory a kernel takes
for itself below it: oneDNN's convolution and batch-norm workspaces on a CPU, its fused RNN's
buffers kept for the backward (under fake tensors ``nn.LSTM`` runs torch's decomposition instead).
:func:`calibrate_memory` runs real steps at a few configurations, takes the allocator's own peak
(:func:`~autotune.plan.measure.measured_step_peak_bytes`) less the trace's figure for the same
thing, and fits that residual as a line in the micro-batch for each precision and checkpointing
setting; configurations it did not run are then predicted and run, so the error it reports is one
the fit did not see. It describes this machine (a GPU's cuDNN workspaces are other sizes), so the
plan adds it to the ``this-cpu`` configurations only.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune.plan.measure import batch_bytes, measured_step_peak_bytes, predicted_step_peak_bytes
from autotune.plan.step import SELECTIVE, BatchFn, LossFn, OptimizerFn, StepFigures, trace_step
from profilers.contract.plan_doc import CpuMemoryFacts, WeighedOut, WorkspaceLine

Config = tuple[int, str, bool]  # (micro_batch, precision, checkpointing)
#: A measured setting's key: (micro_batch, precision, checkpointing: False, True (whole blocks) or
#: "selective" (per op)), each checkpointing mode with its own workspace.
MeasuredConfig = tuple[int, str, bool | str]


def config_label(c: MeasuredConfig) -> str:
    """``micro_batch=8 bf16 checkpointing`` (``selective checkpointing`` per op)."""
    mode = "" if not c[2] else " selective checkpointing" if c[2] == SELECTIVE else " checkpointing"
    return f"micro_batch={c[0]} {c[1]}{mode}"


@dataclass(frozen=True, slots=True)
class MemoryCalibration:
    """The measured residual (bytes) per (precision, checkpointing): intercept and bytes per sample.

    Checkpointing is False, True (whole blocks) or "selective" (per op): each keeps its own workspace.
    """

    residual: dict[tuple[str, bool | str], tuple[float, float]]
    fitted_on: tuple[str, ...]
    held_out: tuple[tuple[str, float, float], ...]  # (configuration, predicted bytes, measured bytes)

    def workspace_bytes(self, precision: str, checkpointing: bool | str, micro_batch: int) -> float:
        """Bytes a step at ``micro_batch`` takes beyond its trace here (0 for a setting never measured).

        Never negative: where the trace sees everything the fitted line scatters around 0.
        """
        line = self.residual.get((precision, checkpointing))
        if line is None:
            return 0.0
        return max(0.0, line[0] + line[1] * micro_batch)

    @property
    def held_out_median_error(self) -> float | None:
        """Median of |predicted / measured − 1| over the held-out configurations."""
        errors = [abs(p / m - 1) for _, p, m in self.held_out if m > 0]
        return statistics.median(errors) if errors else None

    def facts(self) -> CpuMemoryFacts:
        """A plan's ``calibration.cpu.memory``: the workspace lines, where fitted and how far they held."""
        lines = tuple(
            WorkspaceLine(p, c, a, b)
            for (p, c), (a, b) in sorted(self.residual.items(), key=lambda kv: (kv[0][0], str(kv[0][1])))
        )
        held = tuple(WeighedOut(c, p, m) for c, p, m in self.held_out)
        return CpuMemoryFacts(lines, tuple(self.fitted_on), held, self.held_out_median_error)


def fit_residuals(
    points: list[tuple[MeasuredConfig, float]],
) -> dict[tuple[str, bool | str], tuple[float, float]]:
    """A line in the micro-batch through each setting's residuals (least squares; through 0 for one)."""
    groups: dict[tuple[str, bool | str], list[tuple[int, float]]] = {}
    for (micro, precision, ckpt), residual in points:
        groups.setdefault((precision, ckpt), []).append((micro, residual))
    lines = {}
    for key, pts in groups.items():
        xs = [float(x) for x, _ in pts]
        if len(set(xs)) < 2:
            lines[key] = (0.0, statistics.fmean(r / x for x, r in pts))  # workspace scales with the batch
            continue
        mx, my = statistics.fmean(xs), statistics.fmean(r for _, r in pts)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (r - my) for x, (_, r) in zip(xs, pts, strict=True)) / sxx
        lines[key] = (my - slope * mx, slope)
    return lines


def calibrate_memory(
    model_fn: Any,
    batch_fn: BatchFn,
    loss_fn: LossFn,
    optimizer_fn: OptimizerFn,
    fit_on: list[Config],
    held_out: list[Config],
    traced: Callable[[Config], StepFigures] | None = None,
) -> MemoryCalibration:
    """Run ``fit_on`` and ``held_out`` configurations for real, fit on the first, predict the second.

    ``traced``: a configuration's trace (as :func:`autotune.plan.calibrate.calibrate` takes it).
    """

    def traced_and_measured(c: Config) -> tuple[float, float]:
        figures = traced(c) if traced else trace_step(model_fn, batch_fn, loss_fn, optimizer_fn, *c)
        seen = predicted_step_peak_bytes(figures, batch_bytes(batch_fn, c[0]))
        return seen, measured_step_peak_bytes(model_fn, batch_fn, loss_fn, optimizer_fn, *c)

    fitted = [(c, *traced_and_measured(c)) for c in fit_on]
    lines = fit_residuals([(c, measured - seen) for c, seen, measured in fitted])
    result = MemoryCalibration(lines, tuple(config_label(c) for c in fit_on), ())
    rows = []
    for c in held_out:
        seen, measured = traced_and_measured(c)
        rows.append((config_label(c), seen + result.workspace_bytes(c[1], c[2], c[0]), measured))
    return MemoryCalibration(lines, result.fitted_on, tuple(rows))


__all__ = [
    "Config", "MeasuredConfig", "MemoryCalibration", "calibrate_memory", "config_label", "fit_residuals",
]  # fmt: skip
