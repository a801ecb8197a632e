"""Plan a training job: every configuration on every GPU, predicted, priced and ranked.

:func:`plan` traces the model's training step with fake tensors at the smallest and the largest
candidate micro-batch for each precision × checkpointing (two traces each, whatever the number of
GPUs), fits each figure as affine in the micro-batch (:class:`~autotune.plan.model.StepModel`) and
predicts, per GPU × configuration: peak memory by category and whether it fits with the headroom,
the largest micro-batch that fits, step time with its interval, samples/s and tokens/s, $ per
million samples and tokens, $ for the run. Configurations are ranked cheapest first; the ones that
do not fit, or cannot run on that GPU, come last with the reason.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any

from autotune.cost.prices import load_prices, resolve_price
from autotune.plan.calibrate import CpuCalibration
from autotune.plan.gpus import GPUS, GpuSpec, gpu_spec
from autotune.plan.model import (
    CALIBRATED_ON,
    EFFICIENCY,
    FRAMEWORK_RESERVE_BYTES,
    Affine,
    Efficiency,
    StepModel,
)
from autotune.plan.step import BatchFn, LossFn, OptimizerFn, largest_unit_bytes, model_notes, trace_step
from autotune.plan.workspace import MemoryCalibration

PRECISIONS = ("fp32", "bf16")
#: Share of the all-reduce time a real DDP job hid behind compute: the NCCL kernels' overlap with
#: compute kernels on rank 0 of an A100 DDP trace (HTA's nccl_data test trace, ResNet, world size
#: 2: tests/data/gpu_traces/a100_ddp2), as :mod:`profilers.gpu_time` measures it, 14.8%. One job:
#: the interval around it runs from none hidden to all.
MEASURED_HIDDEN_SHARE = 0.148
#: Share of a layout's communication hidden behind compute: (pessimistic, expected, optimistic).
HIDDEN_COMM = (0.0, MEASURED_HIDDEN_SHARE, 1.0)
#: GPU-to-GPU bandwidth between nodes, one direction, GB/s per GPU: one 400 Gb/s InfiniBand NDR
#: adapter per GPU, as in NVIDIA's DGX H100 datasheet (8 × ConnectX-7 400 Gb/s), and AWS p5
#: (3,200 Gb/s EFA for 8 GPUs). Clouds differ (AWS p4d: 400 Gb/s for 8 A100s, 6.25 GB/s per GPU):
#: ``--inter-node-gb-s`` sets it.
INTER_NODE_GB_S = 50.0


@dataclass(frozen=True, slots=True)
class PlannedConfig:
    """One configuration on one GPU model, predicted (the JSON's ``configs[i]``)."""

    gpu: str
    gpus: int  # every GPU of the job (nodes × per node)
    nodes: int
    params: dict[str, Any]  # micro_batch, grad_accum, precision, activation_checkpointing, layout
    peak_memory_bytes: int | None
    memory_by_category: dict[str, int]
    fits: bool
    why_not: str | None  # when it does not fit or cannot run
    largest_micro_batch: int | None
    step_time_s: float | None
    step_time_s_interval: tuple[float, float] | None
    samples_per_s: float | None
    tokens_per_s: float | None
    usd_per_gpu_hour: float | None
    usd_per_million_samples: float | None
    usd_per_million_tokens: float | None
    usd_total: float | None


@dataclass(frozen=True, slots=True)
class Plan:
    """The ranked configurations, the model's figures, and how far the time model can be trusted."""

    configs: tuple[PlannedConfig, ...]
    model: dict[str, Any]
    calibration: dict[str, Any]
    trace_s: float  # time spent tracing
    notes: tuple[str, ...] = field(default_factory=tuple)


def plan(
    model: Any,
    batch_fn: BatchFn,
    loss_fn: LossFn,
    optimizer_fn: OptimizerFn,
    global_batch: int,
    gpus: tuple[str, ...] = (),
    gpus_per_node: int = 1,
    precisions: tuple[str, ...] = PRECISIONS,
    checkpointing: tuple[bool, ...] = (False,),
    headroom: float = 0.1,
    tokens_per_sample: int | None = None,
    run_samples: int | None = None,
    prices: Any = None,
    cpu: CpuCalibration | None = None,
    nodes: int = 1,
    inter_node_gb_s: float = INTER_NODE_GB_S,
) -> Plan:
    """Predict every configuration (see the module's doc). ``model`` is a module or a factory.

    With ``cpu`` (a calibration of this machine, :func:`autotune.plan.calibrate.calibrate`) the
    plan also predicts each configuration on this machine's CPU (``gpu`` is ``"this-cpu"``).
    """
    micro = micro_batches(global_batch, gpus_per_node * nodes)
    lo, hi = micro[0], micro[-1] if micro[-1] != micro[0] else micro[0] + 1
    started = time.perf_counter()
    models: dict[tuple[str, bool], StepModel] = {}
    cpu_times: dict[tuple[str, bool], Affine] = {}
    for precision in precisions:
        for ckpt in checkpointing:
            a = trace_step(model, batch_fn, loss_fn, optimizer_fn, lo, precision, ckpt)
            b = trace_step(model, batch_fn, loss_fn, optimizer_fn, hi, precision, ckpt)
            models[(precision, ckpt)] = StepModel.fit(a, b)
            if cpu is not None:
                cpu_times[(precision, ckpt)] = Affine.through(lo, cpu.predict_s(a), hi, cpu.predict_s(b))
    figures = {
        "parameters": a.parameters,
        "parameter_bytes": a.parameter_bytes,
        "flops_per_sample": (b.flops - a.flops) / (hi - lo),
        "ops_per_step": a.ops,
    }
    trace_s = time.perf_counter() - started
    unit = largest_unit_bytes(model) if gpus_per_node * nodes > 1 else 0
    result = plan_models(
        models, figures, global_batch, gpus=gpus, gpus_per_node=gpus_per_node, unit_bytes=unit,
        headroom=headroom, tokens_per_sample=tokens_per_sample, run_samples=run_samples, prices=prices,
        cpu_times=cpu_times, cpu_memory=cpu.memory if cpu is not None else None, nodes=nodes,
        inter_node_gb_s=inter_node_gb_s, notes=tuple(model_notes(model)),
    )  # fmt: skip
    return dataclasses.replace(result, calibration=with_cpu(result.calibration, cpu), trace_s=trace_s)


def with_cpu(calibration: dict[str, Any], cpu: CpuCalibration | None) -> dict[str, Any]:
    """A plan's ``calibration`` with this machine's (``cpu``: its costs, checks and memory), if any."""
    if cpu is None:
        return calibration
    return {
        **calibration,
        "cpu": {
            "s_per_fp32_flop": cpu.s_per_fp32_flop,
            "s_per_low_precision_flop": cpu.s_per_low_flop,
            "s_per_byte": cpu.s_per_byte,
            "s_per_op": cpu.s_per_op,
            "fitted_on": list(cpu.fitted_on),
            "held_out": [{"config": c, "predicted_s": p, "measured_s": m} for c, p, m in cpu.held_out],
            "held_out_median_error": cpu.held_out_median_error,
            "memory": cpu.memory.as_dict() if cpu.memory is not None else None,
        },
    }


def micro_batches(global_batch: int, gpus_per_node: int, extra: tuple[int, ...] = ()) -> list[int]:
    """Candidate micro-batches: powers of two (and ``extra``) that split ``global_batch`` over the GPUs."""
    candidates = sorted({*_powers_of_two(global_batch), *extra})
    micro = [m for m in candidates if global_batch % (m * gpus_per_node) == 0]
    if not micro:
        raise ValueError(f"a global batch of {global_batch} does not split over {gpus_per_node} GPUs")
    return micro


def plan_models(
    models: dict[tuple[str, bool], StepModel],
    figures: dict[str, Any],
    global_batch: int,
    gpus: tuple[str, ...] = (),
    gpus_per_node: int = 1,
    unit_bytes: int = 0,
    headroom: float = 0.1,
    tokens_per_sample: int | None = None,
    run_samples: int | None = None,
    prices: Any = None,
    cpu_times: dict[tuple[str, bool], Affine] | None = None,
    cpu_memory: MemoryCalibration | None = None,
    notes: tuple[str, ...] = (),
    extra_micro_batches: tuple[int, ...] = (),
    nodes: int = 1,
    inter_node_gb_s: float = INTER_NODE_GB_S,
) -> Plan:
    """Predict, price and rank every configuration of fitted step models (precision, checkpointing).

    ``unit_bytes`` is the parameter bytes of the largest unit FSDP would wrap (with several GPUs);
    ``cpu_times`` this machine's calibrated seconds per micro-batch of each model, when known, and
    ``cpu_memory`` the memory its steps take beyond their traces (measured kernel workspaces);
    ``extra_micro_batches`` are planned beside the powers of two (a script's own micro-batch);
    ``nodes`` of ``gpus_per_node`` GPUs each, joined at ``inter_node_gb_s`` per GPU.
    """
    specs = [_spec(g) for g in gpus] if gpus else list(GPUS)
    n = gpus_per_node * nodes
    micro = micro_batches(global_batch, n, extra_micro_batches)
    layouts = [Layout("single", 1, 0)]
    if n > 1:
        layouts = [Layout(name, n, unit_bytes, nodes, inter_node_gb_s) for name in ("ddp", "fsdp")]
    table = prices if prices is not None else load_prices(None)
    configs = []
    for spec in specs:
        quote = resolve_price(spec.key, table=table)
        price = quote.usd_per_gpu_hour if quote is not None else None
        for step in models.values():
            for layout in layouts:
                for m in micro:
                    configs.append(
                        _predict(spec, layout, step, m, global_batch // (m * n), headroom, price,
                                 tokens_per_sample, run_samples)
                    )  # fmt: skip
    for key, step in models.items():
        if cpu_times and key in cpu_times and n == 1:
            configs += [
                _predict_cpu(step, cpu_times[key], m, global_batch // m, tokens_per_sample, cpu_memory)
                for m in micro
            ]
    configs.sort(key=_rank)
    calibration: dict[str, Any] = {
        "calibrated": True,
        "calibrated_on": CALIBRATED_ON,
        "efficiency": [_eff(e) for e in EFFICIENCY],
        "framework_reserve_bytes": FRAMEWORK_RESERVE_BYTES,
        "note": "GPU step times at efficiencies fitted on published runs of an optimised stack (flash "
        f"attention, fused kernels): {CALIBRATED_ON}; plain eager scripts run toward the slow end of the "
        "interval; memory is traced, with the framework reserve assumed",
    }
    return Plan(tuple(configs), figures, calibration, 0.0, notes)


def with_run(result: Plan, run_samples: int) -> Plan:
    """``result`` with each configuration's $ for a run of ``run_samples`` samples."""
    def total(c: PlannedConfig) -> float | None:
        return None if c.usd_per_million_samples is None else c.usd_per_million_samples * run_samples / 1e6

    configs = tuple(dataclasses.replace(c, usd_total=total(c)) for c in result.configs)
    return dataclasses.replace(result, configs=configs)


def _eff(e: Any) -> dict[str, float]:
    return {"gemm": e.gemm, "attention": e.attention, "memory": e.memory, "launch_us": e.launch_us}


def _spec(key: str) -> GpuSpec:
    spec = gpu_spec(key)
    if spec is None:
        known = ", ".join(g.key for g in GPUS)
        raise ValueError(f"unknown GPU {key!r} (known: {known})")
    return spec


def _powers_of_two(limit: int) -> list[int]:
    return [1 << i for i in range(int(math.log2(max(limit, 1))) + 1)]




@dataclass(frozen=True, slots=True)
class Layout:
    """How a step spreads over ``gpus`` GPUs, on ``nodes`` nodes."""

    name: str  # "single", "ddp", "fsdp"
    gpus: int  # all of them, every node's
    unit_bytes: int  # FSDP: parameter bytes of the largest wrapped unit (gathered whole)
    nodes: int = 1
    inter_node_gb_s: float = INTER_NODE_GB_S

    def memory(self, step: StepModel, micro_batch: int) -> tuple[int, dict[str, int]]:
        """Peak bytes per GPU and their categories under this layout."""
        by = step.memory_by_category(micro_batch, gpu=True)
        peak = step.memory_bytes(micro_batch, gpu=True)
        if self.name == "ddp":  # DDP's buckets hold a copy of the gradients (without gradient_as_bucket_view)
            by["ddp_buckets"] = round(step.parameters.at(micro_batch))
            peak += by["ddp_buckets"]
        elif self.name == "fsdp":  # parameters, gradients and optimizer state sharded; one unit gathered
            for key in ("parameters", "gradients", "optimizer_state"):
                shard = by[key] // self.gpus
                peak -= by[key] - shard
                by[key] = shard
            by["fsdp_gathered_units"] = 2 * self.unit_bytes  # the unit in use and the one prefetched
            peak += by["fsdp_gathered_units"]
        return peak, by

    def step_s(
        self,
        spec: GpuSpec,
        step: StepModel,
        micro_batch: int,
        accumulation: int,
        eff: Efficiency = EFFICIENCY[1],
        hidden: float = HIDDEN_COMM[1],
    ) -> float | None:
        """Seconds of one optimizer step: compute, and the share ``1 - hidden`` of the communication.

        With FSDP each GPU updates its shard of the optimizer state. None: no such precision.
        """
        shards = self.gpus if self.name == "fsdp" else 1
        compute = step.step_time_s(spec, micro_batch, accumulation, eff, shards)
        if compute is None:
            return None
        return compute + self.comm_s(spec, step, micro_batch, accumulation) * (1 - hidden)

    def comm_s(self, spec: GpuSpec, step: StepModel, micro_batch: int, accumulation: int) -> float:
        """Seconds of communication per optimizer step, none hidden (ring collectives)."""
        if self.name == "single":
            return 0.0
        ring = (self.gpus - 1) / self.gpus
        # a ring across nodes runs at its slowest hop: the link between nodes, when it is slower
        link = (spec.link_gb_s if self.nodes == 1 else min(spec.link_gb_s, self.inter_node_gb_s)) * 1e9
        params = step.parameters.at(micro_batch)
        if self.name == "ddp":  # one all-reduce of the gradients per optimizer step (no_sync between)
            return 2 * ring * params / link
        # FSDP, each micro-batch: all-gather in forward and backward, reduce-scatter of gradients
        return accumulation * 3 * ring * params / link


def _predict(
    spec: GpuSpec,
    layout: Layout,
    step: StepModel,
    micro_batch: int,
    accumulation: int,
    headroom: float,
    price: float | None,
    tokens_per_sample: int | None,
    run_samples: int | None,
) -> PlannedConfig:
    gpus = layout.gpus
    params = {"micro_batch": micro_batch, "grad_accum": accumulation, "precision": step.precision,
              "activation_checkpointing": step.checkpointing, "layout": layout.name}  # fmt: skip
    peak, by_category = layout.memory(step, micro_batch)
    budget = spec.memory_bytes / (1 + headroom)
    extra = peak - step.memory_bytes(micro_batch, gpu=True)  # what the layout adds (or saves)
    largest = step.largest_micro_batch(budget - extra, gpu=True)
    slow, expected, fast = (
        layout.step_s(spec, step, micro_batch, accumulation, eff, hidden)
        for eff, hidden in zip(EFFICIENCY, HIDDEN_COMM, strict=True)
    )
    why = None
    if expected is None:
        why = f"{spec.key} has no {step.precision} tensor cores"
    elif peak > budget:
        why = (
            f"needs {peak / 2**30:.1f} GiB, over {budget / 2**30:.1f} GiB "
            f"({spec.key} less {headroom:.0%} headroom)"
        )
    interval = (fast, slow) if fast is not None and slow is not None else None
    samples = micro_batch * accumulation * gpus
    rate = samples / expected if expected else None
    tokens = rate * tokens_per_sample if rate is not None and tokens_per_sample else None
    per_m = price * gpus / 3600 / rate * 1e6 if price is not None and rate else None
    per_m_tokens = per_m / tokens_per_sample if per_m is not None and tokens_per_sample else None
    total = per_m * run_samples / 1e6 if per_m is not None and run_samples else None
    return PlannedConfig(
        gpu=spec.key,
        gpus=gpus,
        nodes=layout.nodes,
        params=params,
        peak_memory_bytes=peak,
        memory_by_category=by_category,
        fits=why is None,
        why_not=why,
        largest_micro_batch=largest,
        step_time_s=expected,
        step_time_s_interval=interval,
        samples_per_s=rate,
        tokens_per_s=tokens,
        usd_per_gpu_hour=price,
        usd_per_million_samples=per_m,
        usd_per_million_tokens=per_m_tokens,
        usd_total=total,
    )


def _predict_cpu(
    step: StepModel,
    seconds: Affine,
    micro_batch: int,
    accumulation: int,
    tokens_per_sample: int | None,
    memory: MemoryCalibration | None = None,
) -> PlannedConfig:
    """A configuration on this machine's CPU, timed by its calibration (no price: it is yours).

    Its memory is the trace's plus the workspace measured on this machine (``memory``), if any.
    """
    workspace = memory.workspace_bytes(step.precision, step.checkpointing, micro_batch) if memory else 0.0
    by_category = step.memory_by_category(micro_batch, gpu=False)
    if memory is not None:
        by_category["kernel_workspace"] = round(workspace)
    params = {"micro_batch": micro_batch, "grad_accum": accumulation, "precision": step.precision,
              "activation_checkpointing": step.checkpointing, "layout": "single"}  # fmt: skip
    step_s = accumulation * seconds.at(micro_batch)
    rate = micro_batch * accumulation / step_s if step_s > 0 else None
    return PlannedConfig(
        gpu="this-cpu",
        gpus=1,
        nodes=1,
        params=params,
        peak_memory_bytes=step.memory_bytes(micro_batch, gpu=False) + round(workspace),
        memory_by_category=by_category,
        fits=True,
        why_not=None,
        largest_micro_batch=None,
        step_time_s=step_s,
        step_time_s_interval=None,
        samples_per_s=rate,
        tokens_per_s=rate * tokens_per_sample if rate is not None and tokens_per_sample else None,
        usd_per_gpu_hour=None,
        usd_per_million_samples=None,
        usd_per_million_tokens=None,
        usd_total=None,
    )


def _rank(c: PlannedConfig) -> tuple[bool, float, float]:
    """Fitting first, then cheapest per sample (unpriced after priced), then fastest."""
    cost = c.usd_per_million_samples if c.usd_per_million_samples is not None else math.inf
    speed = -(c.samples_per_s or 0.0)
    return (not c.fits, cost, speed)


__all__ = [
    "PRECISIONS",
    "Plan",
    "PlannedConfig",
    "micro_batches",
    "plan",
    "plan_models",
    "with_cpu",
    "with_run",
]
