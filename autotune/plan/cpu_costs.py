"""A CPU's costs of a step: seconds per FLOP (fp32, bf16, fp16), per byte moved and per op.

What :mod:`autotune.plan.probe` measures and :mod:`autotune.plan.calibrate` fits, and how a traced
step is priced with them (:meth:`CpuCalibration.predict_s`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from autotune.plan.step import StepFigures
from autotune.plan.trace import OTHER
from autotune.plan.workspace import MemoryCalibration

_LOW = ("bfloat16", "float16")


def features(f: StepFigures) -> list[float]:
    """(FLOPs in fp32, FLOPs in bf16/fp16, bytes of the other ops, ops) of a traced step."""
    low, other_bytes = f.flops_in(*_LOW), f.bytes_by_class.get(OTHER, 0)
    return [float(max(f.math_flops - low, 0)), float(low), float(other_bytes), float(f.ops)]


@dataclass(frozen=True, slots=True)
class CpuCalibration:
    """Fitted costs (seconds per FLOP, byte, op) and how well they predict configurations not timed."""

    s_per_fp32_flop: float
    s_per_low_flop: float
    s_per_byte: float
    s_per_op: float
    fitted_on: tuple[str, ...]
    held_out: tuple[tuple[str, float, float], ...]  # (configuration, predicted s, measured s)
    #: The memory a real step takes here beyond its trace (kernel workspaces), when measured.
    memory: MemoryCalibration | None = None
    #: Seconds per fp16 FLOP where measured apart from bf16 (the probe); else the low-precision cost.
    s_per_fp16_flop: float | None = None
    #: The largest relative range of a cost between the probe's rounds (None: not probed).
    spread: float | None = None

    def fp16_flop_s(self) -> float:
        """Seconds per fp16 FLOP: measured apart, else the fitted low-precision cost."""
        return self.s_per_low_flop if self.s_per_fp16_flop is None else self.s_per_fp16_flop

    def predict_s(self, f: StepFigures) -> float:
        """Predicted seconds of a traced step on this machine."""
        x = features(f)
        fp16 = min(x[1], float(f.flops_in("float16")))
        return (
            x[0] * self.s_per_fp32_flop
            + (x[1] - fp16) * self.s_per_low_flop
            + fp16 * self.fp16_flop_s()
            + x[2] * self.s_per_byte
            + x[3] * self.s_per_op
        )

    @property
    def held_out_median_error(self) -> float | None:
        """Median of |predicted / measured − 1| over the held-out configurations."""
        errors = [abs(p / m - 1) for _, p, m in self.held_out if m > 0]
        return statistics.median(errors) if errors else None


__all__ = ["CpuCalibration", "features"]
