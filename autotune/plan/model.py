"""From traced steps to predictions on a GPU: memory with the allocator's overhead, step time, cost.

Memory on a GPU is the traced peak of live tensor bytes, plus the CUDA caching allocator's rounding
of every live block to 512 bytes (counted at the traced peak), plus a framework reserve (CUDA
context, cuBLAS workspace) that is an assumption here (:data:`FRAMEWORK_RESERVE_BYTES`), not a
measurement. Between two traced micro-batches every figure is affine in the micro-batch (activations,
FLOPs and bytes grow with it; parameters, gradients and optimizer state do not), which
:class:`Affine` fits exactly from the two traces.

Step time is a roofline over op classes: GEMM and attention FLOPs at the GPU's dense peak for the
precision times an efficiency, the other ops' bytes at the memory bandwidth times an efficiency,
and a floor per kernel launch. The efficiencies (:data:`EFFICIENCY`) are fitted on published
training throughputs (``benchmarks/gpu_anchors.py``); the interval is the step time at the
pessimistic and optimistic ends of their ranges.

The host issues the step's ops one after another while the GPU runs them: a step takes the longer
of the GPU's work and the host's (ops × the host's cost per op, measured on an H200's host). Small
models in eager PyTorch are bound by the host; ``Layout.host_bound`` says which applies.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from autotune.plan.blocks import ForwardSides, busiest_stage_blocks
from autotune.plan.envelope import CATEGORIES, phase_of, upper_envelope
from autotune.plan.gpus import GpuSpec
from autotune.plan.step import StepFigures
from autotune.plan.trace import ATTENTION, GEMM, OTHER

#: CUDA context, cuBLAS workspace and the caching allocator's fragmentation, per GPU. An
#: assumption, checked once: on an H200 (torch 2.11, CUDA 13; ``benchmarks/plan_gpu_check.py`` in
#: ``scripts/gpu_check.sh``) the context and libraries held 742 MiB outside the allocator, and cuBLAS
#: 64 MiB inside it (a 32 MiB workspace per thread that runs GEMMs: the forward's and autograd's),
#: 806 MiB in all; other GPUs, drivers and CUDA versions differ. ``autotune profile`` on the GPU
#: measures the real figure.
FRAMEWORK_RESERVE_BYTES = 1 * 2**30


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Fractions of the peaks a step reaches, and the floors of one op on the GPU and on the host.

    ``launch_us``: the GPU's time per kernel at least; ``host_us_per_op``: the host's to issue an op
    (eager PyTorch: Python, the dispatcher, autograd, the launch call).
    """

    gemm: float
    attention: float
    memory: float
    launch_us: float
    host_us_per_op: float = 0.0


#: (pessimistic, expected, optimistic). The expected values are fitted (least squares of the log
#: error over a grid, ``benchmarks/gpu_anchors.py``) on the 16 published runs within one node:
#: mosaicml/llm-foundry's benchmark table (MPT 125M to 13B, FSDP, bf16, flash attention, 8 × A100
#: 40/80GB and H100, sequences of 2048 and four of 16384 and 32768) and torchtitan's Llama 3.1 8B on
#: 8 H100s, each traced under FSDP's mixed-precision policy and with its loss as it ran
#: (llm-foundry's fused cross-entropy), with Hopper's compute and attention scales
#: (:attr:`~profilers.hardware.gpus.GpuSheet.compute_scale`), and torchtitan's runs with their
#: selective checkpointing: median error 4.9% on runs left out of the fit; on the 184 other
#: published llm-foundry runs on that stack (``benchmarks/plan_published.py``), no parameter fitted
#: on them (their errors, seen once, led to the attention scale and the long-sequence anchors), 90%
#: within 10%. They are effective values of an optimised stack: attention FLOPs are counted for the
#: whole score matrix while flash attention skips the masked half, and the memory efficiency is over
#: the bytes of the bf16 eager ops traced. A script of plain eager ops runs toward the pessimistic
#: end, which the interval spans.
#:
#: The host's time per op is measured, not fitted: 20 real steps of 5 small models on an H200
#: (torch 2.11, CUDA 13; ``benchmarks/plan_gpu_check.py``, rows in
#: ``benchmarks/data/plan_gpu_h200.json``) took 11.0 to 24.3 µs per traced op, median 13.8 (convolution
#: and LSTM steps toward the top). Another host CPU or PyTorch version moves it.
EFFICIENCY: tuple[Efficiency, Efficiency, Efficiency] = (
    Efficiency(gemm=0.55, attention=0.25, memory=0.2, launch_us=15.0, host_us_per_op=25.0),
    Efficiency(gemm=0.75, attention=0.6, memory=0.4, launch_us=10.0, host_us_per_op=14.0),
    Efficiency(gemm=0.95, attention=1.0, memory=1.5, launch_us=1.0, host_us_per_op=10.0),
)
#: What :data:`EFFICIENCY` was fitted on, and how well it predicts runs left out of the fit.
CALIBRATED_ON = (
    "21 published runs (mosaicml/llm-foundry: MPT 125M-13B, sequences 2048-32768, FSDP, bf16, 8-64 x "
    "A100/H100; pytorch/torchtitan: Llama 3.1 8B on 8 and 128 H100); median error 4.9% within a node "
    "and 6.7% across nodes on runs left out of the fit (benchmarks/gpu_anchors.py); 90% of 184 other "
    "published runs within 10% (benchmarks/plan_published.py)"
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
    #: Each phase's own peak ("forward", "backward", "optimizer") by category (CATEGORIES): the
    #: step's peak at a micro-batch is the largest phase there.
    phases: dict[str, dict[str, Affine]]
    parameters: Affine
    rounding: Affine
    flops: dict[str, Affine]  # op class -> FLOPs
    moved: dict[str, Affine]  # op class -> bytes read and written
    ops: Affine
    optimizer_bytes: float
    optimizer_ops: float
    #: Share of the GEMM and attention FLOPs that run in bf16 or fp16 (the rest in fp32).
    low_precision_share: float = 0.0
    #: The part of those in fp16 (a CPU runs fp16 matrix products far slower than bf16 ones).
    fp16_share: float = 0.0
    #: The repeated blocks, and the elements passed between two of them per micro-batch.
    blocks: int = 0
    block_io: Affine = Affine(0.0, 0.0)
    #: The forward's and backward's peaks of a micro-batch after an optimizer step's first, the
    #: gradients of the earlier ones held (as :attr:`phases`; empty when not traced).
    held_phases: dict[str, dict[str, Affine]] = field(default_factory=dict)
    #: How the low precision is applied (``autocast``, or FSDP's ``param_dtype``: :meth:`fsdp_mixed`).
    policy: str = "autocast"
    #: Checkpointing per op (torchtitan's selective mode) rather than of whole blocks.
    selective: bool = False
    #: The forward's work before the first block and after the last, as traced.
    sides: ForwardSides = field(default_factory=ForwardSides)

    @classmethod
    def fit(cls, a: StepFigures, b: StepFigures) -> StepModel:
        """The model through two traced steps at different micro-batches."""

        def fit(f: str) -> Affine:
            return Affine.through(a.micro_batch, float(getattr(a, f)), b.micro_batch, float(getattr(b, f)))

        def klass(field: str, k: str) -> Affine:
            va, vb = getattr(a, field).get(k, 0), getattr(b, field).get(k, 0)
            return Affine.through(a.micro_batch, va, b.micro_batch, vb)

        two_traces = b.scaled_from != a.micro_batch or a.scaled_from

        def through(
            pa: dict[str, dict[str, int]], pb: dict[str, dict[str, int]]
        ) -> dict[str, dict[str, Affine]]:
            if two_traces:  # their envelopes' ops are not the same ops: each phase's peak alone
                pa = {k: v for k, v in pa.items() if "." not in k}
            return {
                phase: {
                    k: Affine.through(a.micro_batch, v, b.micro_batch, pb[phase].get(k, 0))
                    for k, v in pa[phase].items()
                }
                for phase in pa
                if phase in pb
            }

        return cls(
            precision=a.precision,
            checkpointing=a.checkpointing,
            phases=matched_phases(a, b) or through(a.memory_phases(), b.memory_phases()),
            held_phases=matched_phases(a, b, held=True) or through(a.held_phase_memory, b.held_phase_memory),
            parameters=Affine.through(
                a.micro_batch,
                a.memory_by_category["parameters"],
                b.micro_batch,
                b.memory_by_category["parameters"],
            ),
            rounding=fit("rounding_bytes"),
            flops={k: klass("flops_by_class", k) for k in (GEMM, ATTENTION, OTHER)},
            moved={k: klass("bytes_by_class", k) for k in (GEMM, ATTENTION, OTHER)},
            ops=fit("ops"),
            optimizer_bytes=float(a.optimizer_bytes),
            optimizer_ops=float(a.optimizer_ops),
            low_precision_share=_low_share(a),
            fp16_share=_low_share(a, ("float16",)),
            blocks=a.blocks,
            block_io=fit("block_io_elements"),
            policy=a.policy,
            selective=a.selective,
            sides=a.sides,
        )

    def fsdp_mixed(self) -> StepModel:
        """A step traced with its weights in low precision, as FSDP's mixed-precision policy runs it.

        ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`` (torchtitan's default)
        computes and keeps activations in bf16 from bf16 copies of the weights it gathers, while
        the sharded weights, the reduced gradients, the optimizer's state and its update stay fp32:
        twice the traced bytes of those (the trace ran them in bf16), the update's temporaries and
        traffic with them.
        """

        def master(phases: dict[str, dict[str, Affine]]) -> dict[str, dict[str, Affine]]:
            out = {}
            for phase, by in phases.items():
                doubled: tuple[str, ...] = ("parameters", "gradients", "optimizer_state")
                if phase_of(phase) == "optimizer":
                    doubled += ("temporaries",)
                out[phase] = {
                    k: Affine(2 * f.intercept, 2 * f.slope) if k in doubled else f for k, f in by.items()
                }
            return out

        other = self.moved[OTHER]
        return dataclasses.replace(
            self,
            phases=master(self.phases),
            held_phases=master(self.held_phases),
            parameters=Affine(2 * self.parameters.intercept, 2 * self.parameters.slope),
            optimizer_bytes=2 * self.optimizer_bytes,
            moved={**self.moved, OTHER: Affine(other.intercept + self.optimizer_bytes, other.slope)},
        )

    def phases_at(self, accumulation: int | None = 1) -> dict[str, dict[str, Affine]]:
        """The phases a step of ``accumulation`` micro-batches goes through (None: any number).

        After the first micro-batch the forward and backward hold the earlier ones' gradients
        (:attr:`held_phases`, keyed ``phase.held``).
        """
        if accumulation == 1 or not self.held_phases:
            return self.phases
        return self.phases | {f"{phase}.held": by for phase, by in self.held_phases.items()}

    def phase_memory(self, micro_batch: float, accumulation: int | None = 1) -> dict[str, dict[str, float]]:
        """Each phase's peak by category at ``micro_batch`` (live tensors only)."""
        return {
            phase: {k: f.at(micro_batch) for k, f in by.items()}
            for phase, by in self.phases_at(accumulation).items()
        }

    def peak_phase(self, micro_batch: float, accumulation: int | None = 1) -> str:
        """The phase whose live bytes peak highest at ``micro_batch``."""
        memory = self.phase_memory(micro_batch, accumulation)
        return max(memory, key=lambda phase: sum(memory[phase].values()))

    def live_peak_bytes(self, micro_batch: float, accumulation: int | None = 1) -> float:
        """The step's peak of live tensor bytes at ``micro_batch``: its largest phase."""
        return max(sum(by.values()) for by in self.phase_memory(micro_batch, accumulation).values())

    def memory_bytes(self, micro_batch: int, gpu: bool, accumulation: int | None = 1) -> int:
        """Peak memory of a step at ``micro_batch``: live tensors (+ allocator and reserve on a GPU)."""
        live = self.live_peak_bytes(micro_batch, accumulation)
        if gpu:
            live += self.rounding.at(micro_batch) + FRAMEWORK_RESERVE_BYTES
        return math.ceil(live)

    def memory_by_category(
        self, micro_batch: int, gpu: bool, phase: str | None = None, accumulation: int | None = 1
    ) -> dict[str, int]:
        """The peak (or ``phase``'s) by category; on a GPU with the allocator's rounding and reserve."""
        phases = self.phases_at(None)
        chosen = phases[phase or self.peak_phase(micro_batch, accumulation)]
        out = {k: f.at(micro_batch) for k, f in chosen.items()}
        if gpu:
            out["allocator_rounding"] = self.rounding.at(micro_batch)
            out["framework_reserve"] = FRAMEWORK_RESERVE_BYTES
        return {k: round(v) for k, v in out.items()}

    def largest_micro_batch(self, budget_bytes: float, gpu: bool, accumulation: int | None = 1) -> int:
        """The largest micro-batch whose peak (every phase's) fits ``budget_bytes`` (0 when none does)."""
        fixed = FRAMEWORK_RESERVE_BYTES if gpu else 0.0
        lines = []
        for by in self.phases_at(accumulation).values():
            slope = sum(f.slope for f in by.values()) + (self.rounding.slope if gpu else 0.0)
            intercept = sum(f.intercept for f in by.values()) + fixed
            lines.append((intercept + (self.rounding.intercept if gpu else 0.0), slope))
        return largest_under(lines, budget_bytes)

    def step_time_s(
        self, spec: GpuSpec, micro_batch: int, accumulation: int, eff: Efficiency, shards: int = 1
    ) -> float | None:
        """Seconds for one optimizer step of ``accumulation`` micro-batches (None: no such precision).

        ``shards``: GPUs the optimizer's state is split over (FSDP), each updating its share.
        """
        parts = self.micro_and_optimizer_s(spec, micro_batch, eff)
        if parts is None:
            return None
        micro_s, opt_s = parts
        bw = spec.sheet.bandwidth_gb_s * 1e9
        shared = self.optimizer_bytes / (bw * eff.memory) * (1 - 1 / max(shards, 1))
        host_micro_s, host_opt_s = self.host_micro_and_optimizer_s(micro_batch, eff)
        return accumulation * max(micro_s, host_micro_s) + max(opt_s - shared, host_opt_s)

    def host_micro_and_optimizer_s(self, micro_batch: int, eff: Efficiency) -> tuple[float, float]:
        """Seconds the host takes to issue one micro-batch's ops and the optimizer's step's ops."""
        opt_s = self.optimizer_ops * eff.host_us_per_op * 1e-6
        return self.ops.at(micro_batch) * eff.host_us_per_op * 1e-6 - opt_s, opt_s

    def micro_and_optimizer_s(
        self, spec: GpuSpec, micro_batch: int, eff: Efficiency
    ) -> tuple[float, float] | None:
        """Seconds of one micro-batch's forward and backward, and of the optimizer's step, on one GPU.

        None: the GPU has no tensor cores for this precision.
        """
        dense = self._dense_flops_s(spec)
        if dense is None:
            return None
        flops_per_s = dense * spec.sheet.compute_scale
        attention_flops_per_s = dense * spec.sheet.attention_compute_scale
        bw = spec.sheet.bandwidth_gb_s * 1e9
        m = micro_batch

        def roof(k: str, rate: float) -> float:
            return max(self.flops[k].at(m) / rate, self.moved[k].at(m) / (bw * eff.memory))

        math_s = roof(GEMM, flops_per_s * eff.gemm) + roof(ATTENTION, attention_flops_per_s * eff.attention)
        other_s = self.moved[OTHER].at(m) / (bw * eff.memory)
        launch_s = self.ops.at(m) * eff.launch_us * 1e-6
        opt_s = self.optimizer_bytes / (bw * eff.memory) + self.optimizer_ops * eff.launch_us * 1e-6
        return math_s + other_s + launch_s - opt_s, opt_s

    def stage_share(self, spec: GpuSpec, eff: Efficiency, pp: int) -> float:
        """The share of a micro-batch's GPU work on the busiest of ``pp`` pipeline stages.

        ``ceil(blocks / pp)`` of the blocks, and the larger of the work before them (the first
        stage's embedding) and after them (the last stage's head and loss), each side's FLOPs at the
        GEMMs' rate and its bytes at memory's. Whole-block checkpointing runs the blocks' forward
        twice (four passes to the sides' three). An even ``1 / pp`` when the sides were not traced.
        """
        if pp <= 1:
            return 1.0
        dense = self._dense_flops_s(spec)
        if not self.blocks or not self.sides.flops or dense is None:
            return 1.0 / pp
        flops_per_s = dense * spec.sheet.compute_scale * eff.gemm
        pre, post = self.sides.shares(flops_per_s, spec.sheet.bandwidth_gb_s * 1e9 * eff.memory)
        blocks = max(0.0, 1.0 - pre - post) * (4 / 3 if self.checkpointing and not self.selective else 1.0)
        whole = blocks + pre + post
        return min(1.0, (blocks * busiest_stage_blocks(self.blocks, pp) + max(pre, post)) / whole)

    def _dense_flops_s(self, spec: GpuSpec) -> float | None:
        """The GPU's datasheet dense FLOP/s at the step's precision (None: no tensor cores for it)."""
        peak = spec.peak
        tflops = None if peak is None else peak.tflops(_PEAK_PRECISION[self.precision])
        return tflops * 1e12 if tflops else None

    def cpu_step_time_s(self, costs: Costs, micro_batch: int, accumulation: int) -> float:
        """Seconds for one optimizer step on a CPU whose ``costs`` are known (ops one after another)."""
        m = micro_batch
        matmul = self.flops[GEMM].at(m) + self.flops[ATTENTION].at(m)
        low = matmul * self.low_precision_share
        fp16 = min(low, matmul * self.fp16_share)
        micro_s = (
            (matmul - low) * costs.s_per_fp32_flop
            + (low - fp16) * costs.s_per_low_flop
            + fp16 * costs.fp16_flop_s()
            + self.moved[OTHER].at(m) * costs.s_per_byte
            + self.ops.at(m) * costs.s_per_op
        )
        opt_s = self.optimizer_bytes * costs.s_per_byte + self.optimizer_ops * costs.s_per_op
        return accumulation * (micro_s - opt_s) + opt_s


#: The largest micro-batch a plan considers (a step whose memory does not grow with it fits any).
MAX_MICRO_BATCH = 1 << 20


def largest_under(lines: Sequence[tuple[float, float]], budget_bytes: float) -> int:
    """The largest micro-batch at which every line (bytes at 0, bytes per sample) stays within budget."""
    largest = MAX_MICRO_BATCH
    for at_zero, slope in lines:
        if slope <= 0:
            largest = min(largest, 0 if at_zero > budget_bytes else MAX_MICRO_BATCH)
        else:
            largest = min(largest, max(0, math.floor((budget_bytes - at_zero) / slope)))
    return largest


class Costs(Protocol):
    """Seconds per fp32 FLOP, bf16/fp16 FLOP, byte and op (as ``calibrate.CpuCalibration`` holds)."""

    s_per_fp32_flop: float
    s_per_low_flop: float
    s_per_byte: float
    s_per_op: float

    def fp16_flop_s(self) -> float:
        """Seconds per fp16 FLOP (the low-precision cost where fp16 was not measured apart)."""


def matched_phases(a: StepFigures, b: StepFigures, held: bool = False) -> dict[str, dict[str, Affine]]:
    """Every op's bytes as a line through two traces of one op sequence, and the ops that can peak.

    Each phase keyed by its peak at the larger traced micro-batch, and ``phase.t`` for every op
    ``t`` whose line is the highest at some micro-batch (from 1/1024 of the smaller traced one up):
    where the peak moves from one op to another between the traced sizes, the lines of both ops
    hold it (a line through each phase's two peaks alone ran 12-28% high in between on the demo
    GPT). Empty when the traces' ops differ (or either was scaled rather than traced).
    """
    ma, mb = a.marks, b.marks
    if ma is None or mb is None or ma.phases != mb.phases or ma.later_from != mb.later_from:
        return {}
    if a.micro_batch == b.micro_batch:
        return {}
    live_a, live_b = (ma.held, mb.held) if held else (ma.live, mb.live)
    kept = ma.later if held else ma.first
    marks = [t for t in range(len(ma.phases)) if kept(t)]
    if not marks:
        return {}
    span = b.micro_batch - a.micro_batch
    slope = {t: sum(live_b[c][t] - live_a[c][t] for c in CATEGORIES) / span for t in marks}
    at_zero = {t: sum(live_a[c][t] for c in CATEGORIES) - slope[t] * a.micro_batch for t in marks}

    def lines(t: int) -> dict[str, Affine]:
        return {
            c: Affine.through(a.micro_batch, live_a[c][t], b.micro_batch, live_b[c][t]) for c in CATEGORIES
        }

    top = max(a.micro_batch, b.micro_batch)
    out: dict[str, dict[str, Affine]] = {}
    for phase in dict.fromkeys(ma.phase(t) for t in marks):
        own = [t for t in marks if ma.phase(t) == phase]
        out[phase] = lines(max(own, key=lambda t: at_zero[t] + slope[t] * top))
    smallest = min(a.micro_batch, b.micro_batch)
    points = tuple(smallest * 2.0**k for k in range(-10, 21))
    for t in upper_envelope([(slope[t], at_zero[t], t) for t in marks], points):
        out[f"{ma.phase(t)}.{t}"] = lines(t)
    return out


def _low_share(f: StepFigures, dtypes: tuple[str, ...] = ("bfloat16", "float16")) -> float:
    """The share of the matrix-product FLOPs that run in ``dtypes``."""
    low, math_flops = f.flops_in(*dtypes), f.math_flops
    return min(1.0, low / math_flops) if math_flops > 0 else 0.0


__all__ = [
    "CALIBRATED_ON", "EFFICIENCY", "FRAMEWORK_RESERVE_BYTES", "MAX_MICRO_BATCH", "Affine", "Costs",
    "Efficiency", "StepModel", "largest_under",
]  # fmt: skip
