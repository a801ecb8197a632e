"""From traced steps to predictions on a GPU: memory with the allocator's overhead, step time, cost.

Memory on a GPU is the traced peak of live tensor bytes, plus the CUDA caching allocator's rounding
of every live block to 512 bytes (counted at the traced peak), plus a framework reserve (CUDA
context, cuBLAS workspace) that is an assumption here (:data:`FRAMEWORK_RESERVE_BYTES`), not a
measurement. Between two traced micro-batches every figure is affine in the micro-batch (activations,
FLOPs and bytes grow with it; parameters, gradients and optimizer state do not), which
:class:`Affine` fits exactly from the two traces.

Step time is a roofline over op classes: GEMM and attention FLOPs at the GPU's dense peak for the
precision times an efficiency, the other ops' bytes at the memory bandwidth times an efficiency,
and a floor per kernel launch. The efficiencies are not calibrated yet (:data:`EFFICIENCY`); the
interval is the step time at the pessimistic and optimistic ends of their ranges, and the plan says
it is uncalibrated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autotune.plan.gpus import GpuSpec
from autotune.plan.step import StepFigures
from autotune.plan.trace import ATTENTION, GEMM, OTHER

#: CUDA context, cuBLAS workspace and the caching allocator's fragmentation, per GPU. An
#: assumption (a CUDA context takes several hundred MiB; cuBLAS keeps a workspace per stream), not
#: a measurement: ``autotune profile`` on the GPU measures the real figure.
FRAMEWORK_RESERVE_BYTES = 1 * 2**30


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Fractions of the peaks a step reaches, and the time floor of one kernel launch."""

    gemm: float
    attention: float
    memory: float
    launch_us: float


#: (pessimistic, expected, optimistic). This project's uncalibrated starting values: dense GEMMs
#: of training-sized shapes reach about half to 80% of the datasheet peak; attention less;
#: elementwise and reduction kernels most of the bandwidth; a kernel costs a few µs at least
#: (Holistic Trace Analysis: 5-20 µs per launch on the CPU side).
EFFICIENCY: tuple[Efficiency, Efficiency, Efficiency] = (
    Efficiency(gemm=0.35, attention=0.2, memory=0.5, launch_us=10.0),
    Efficiency(gemm=0.6, attention=0.4, memory=0.7, launch_us=5.0),
    Efficiency(gemm=0.8, attention=0.6, memory=0.85, launch_us=3.0),
)
#: The precision whose peak a step's GEMMs run at.
_PEAK_PRECISION = {"fp32": "fp32", "tf32": "tf32", "bf16": "bf16", "fp16": "fp16"}


@dataclass(frozen=True, slots=True)
class Affine:
    """``value(m) = intercept + slope × m``, fitted exactly through two traced micro-batches."""

    intercept: float
    slope: float

    @classmethod
    def through(cls, m1: int, v1: float, m2: int, v2: float) -> Affine:
        """The line through (m1, v1) and (m2, v2) (flat when m1 == m2)."""
        slope = (v2 - v1) / (m2 - m1) if m2 != m1 else 0.0
        return cls(v1 - slope * m1, slope)

    def at(self, m: float) -> float:
        """The value at micro-batch ``m``."""
        return self.intercept + self.slope * m


@dataclass(frozen=True, slots=True)
class StepModel:
    """Every figure a prediction needs, affine in the micro-batch (from two traced steps)."""

    precision: str
    checkpointing: bool
    peak: Affine
    parameters: Affine
    gradients: Affine
    optimizer_state: Affine
    activations: Affine
    temporaries: Affine
    rounding: Affine
    flops: dict[str, Affine]  # op class -> FLOPs
    moved: dict[str, Affine]  # op class -> bytes read and written
    ops: Affine
    optimizer_bytes: float
    optimizer_ops: float

    @classmethod
    def fit(cls, a: StepFigures, b: StepFigures) -> StepModel:
        """The model through two traced steps at different micro-batches."""

        def fit(f: str) -> Affine:
            return Affine.through(a.micro_batch, float(getattr(a, f)), b.micro_batch, float(getattr(b, f)))

        def cat(name: str) -> Affine:
            return Affine.through(
                a.micro_batch, a.memory_by_category[name], b.micro_batch, b.memory_by_category[name]
            )

        def klass(field: str, k: str) -> Affine:
            va, vb = getattr(a, field).get(k, 0), getattr(b, field).get(k, 0)
            return Affine.through(a.micro_batch, va, b.micro_batch, vb)

        return cls(
            precision=a.precision,
            checkpointing=a.checkpointing,
            peak=fit("peak_bytes"),
            parameters=cat("parameters"),
            gradients=cat("gradients"),
            optimizer_state=cat("optimizer_state"),
            activations=cat("activations"),
            temporaries=cat("temporaries"),
            rounding=fit("rounding_bytes"),
            flops={k: klass("flops_by_class", k) for k in (GEMM, ATTENTION, OTHER)},
            moved={k: klass("bytes_by_class", k) for k in (GEMM, ATTENTION, OTHER)},
            ops=fit("ops"),
            optimizer_bytes=float(a.optimizer_bytes),
            optimizer_ops=float(a.optimizer_ops),
        )

    def memory_bytes(self, micro_batch: int, gpu: bool) -> int:
        """Peak memory of a step at ``micro_batch``: live tensors (+ allocator and reserve on a GPU)."""
        live = self.peak.at(micro_batch)
        if gpu:
            live += self.rounding.at(micro_batch) + FRAMEWORK_RESERVE_BYTES
        return math.ceil(live)

    def memory_by_category(self, micro_batch: int, gpu: bool) -> dict[str, int]:
        """The peak by category; on a GPU with the allocator's rounding and the framework's reserve."""
        out = {
            "parameters": self.parameters.at(micro_batch),
            "gradients": self.gradients.at(micro_batch),
            "optimizer_state": self.optimizer_state.at(micro_batch),
            "activations": self.activations.at(micro_batch),
            "temporaries": self.temporaries.at(micro_batch),
        }
        if gpu:
            out["allocator_rounding"] = self.rounding.at(micro_batch)
            out["framework_reserve"] = FRAMEWORK_RESERVE_BYTES
        return {k: round(v) for k, v in out.items()}

    def largest_micro_batch(self, budget_bytes: float, gpu: bool) -> int:
        """The largest micro-batch whose peak fits ``budget_bytes`` (0 when none does)."""
        fixed = FRAMEWORK_RESERVE_BYTES if gpu else 0.0
        slope = self.peak.slope + (self.rounding.slope if gpu else 0.0)
        intercept = self.peak.intercept + (self.rounding.intercept if gpu else 0.0) + fixed
        if slope <= 0:
            return 0 if intercept > budget_bytes else 1 << 20
        return max(0, math.floor((budget_bytes - intercept) / slope))

    def step_time_s(
        self, spec: GpuSpec, micro_batch: int, accumulation: int, eff: Efficiency
    ) -> float | None:
        """Seconds for one optimizer step of ``accumulation`` micro-batches (None: no such precision)."""
        peak = spec.peak
        tflops = None if peak is None else peak.tflops(_PEAK_PRECISION[self.precision])
        if not tflops:
            return None
        flops_per_s = tflops * 1e12
        bw = spec.bandwidth_gb_s * 1e9
        m = micro_batch

        def roof(k: str, efficiency: float) -> float:
            return max(
                self.flops[k].at(m) / (flops_per_s * efficiency), self.moved[k].at(m) / (bw * eff.memory)
            )

        math_s = roof(GEMM, eff.gemm) + roof(ATTENTION, eff.attention)
        other_s = self.moved[OTHER].at(m) / (bw * eff.memory)
        launch_s = self.ops.at(m) * eff.launch_us * 1e-6
        micro_s = math_s + other_s + launch_s
        opt_s = self.optimizer_bytes / (bw * eff.memory) + self.optimizer_ops * eff.launch_us * 1e-6
        return accumulation * (micro_s - opt_s) + opt_s


__all__ = ["EFFICIENCY", "FRAMEWORK_RESERVE_BYTES", "Affine", "Efficiency", "StepModel"]
