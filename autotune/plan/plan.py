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
from functools import partial
from typing import Any

from autotune.cost.prices import load_prices, resolve_price
from autotune.fmt import format_usd
from autotune.plan.calibrate import CpuCalibration
from autotune.plan.fsdp_units import NO_UNITS, FsdpUnits
from autotune.plan.gpus import GPUS, GpuSpec, gpu_spec
from autotune.plan.layouts import (
    HOST_OPTIMIZER_BYTES_PER_S,
    INTER_NODE_GB_S,
    OVERLAP,
    Layout,
    layouts_for,
)
from autotune.plan.model import (
    CALIBRATED_ON,
    EFFICIENCY,
    FRAMEWORK_RESERVE_BYTES,
    Affine,
    StepModel,
)
from autotune.plan.published import EAGER, OPTIMIZATIONS, applies, ratios
from autotune.plan.published import notes as published_notes
from autotune.plan.step import (
    POLICY_PARAM_DTYPE,
    SELECTIVE,
    BatchFn,
    LossFn,
    OptimizerFn,
    StepFigures,
    fsdp_units,
    lowered,
    model_notes,
    trace_step,
)
from autotune.plan.two_at_once import at_once
from autotune.plan.workspace import MemoryCalibration
from profilers.contract.plan_doc import (
    CpuCalibrationFacts,
    EfficiencyFigures,
    ParallelDegrees,
    PlanCalibration,
    PlanConfig,
    PlanDocument,
    PlanModel,
    PlanParams,
    SuggestedConfig,
    Suggestion,
    TimedOut,
)

PRECISIONS = ("fp32", "bf16")
#: A traced setting: (precision, checkpointing: False, True or :data:`SELECTIVE`).
Setting = tuple[str, bool | str]


def plan(
    model: Any,
    batch_fn: BatchFn,
    loss_fn: LossFn,
    optimizer_fn: OptimizerFn,
    global_batch: int,
    gpus: tuple[str, ...] = (),
    gpus_per_node: int = 1,
    precisions: tuple[str, ...] = PRECISIONS,
    checkpointing: tuple[bool | str, ...] = (False,),
    headroom: float = 0.1,
    tokens_per_sample: int | None = None,
    run_samples: int | None = None,
    prices: Any = None,
    cpu: CpuCalibration | None = None,
    nodes: int = 1,
    inter_node_gb_s: float = INTER_NODE_GB_S,
    optimizations: tuple[str, ...] = (EAGER,),
    pp_schedule: str = "1f1b",
) -> PlanDocument:
    """Predict every configuration (see the module's doc). ``model`` is a module or a factory.

    With ``cpu`` (a calibration of this machine, :func:`autotune.plan.calibrate.calibrate`) the
    plan also predicts each configuration on this machine's CPU (``gpu`` is ``"this-cpu"``).
    ``checkpointing``: False (none), True (whole blocks) and :data:`SELECTIVE` (per op, as
    torchtitan's ``op`` mode), each planned. ``optimizations``: keys of
    :data:`autotune.plan.published.OPTIMIZATIONS`, each planned (beside eager, rows estimated at
    their published effect). ``pp_schedule``: the pipeline rows' schedule, ``1f1b`` or ``gpipe``.
    """
    unknown = [o for o in optimizations if o not in OPTIMIZATIONS]
    if unknown:
        raise ValueError(f"unknown optimization {unknown[0]!r}: one of {', '.join(OPTIMIZATIONS)}")
    micro = micro_batches(global_batch, gpus_per_node * nodes)
    lo, hi = micro[0], micro[-1] if micro[-1] != micro[0] else micro[0] + 1
    models: dict[Setting, StepModel] = {}
    fsdp_models: dict[Setting, StepModel] = {}
    unmixed: dict[Setting, str] = {}  # why a setting could not be traced with bf16 weights
    cpu_times: dict[Setting, Affine] = {}
    trace_s = 0.0

    def trace(settings: tuple[bool | str, ...]) -> tuple[StepFigures, StepFigures]:
        nonlocal trace_s
        started = time.perf_counter()
        for precision in precisions:
            for ckpt in settings:
                selective = ckpt == SELECTIVE
                traced = partial(trace_step, model, batch_fn, loss_fn, optimizer_fn, selective=selective)
                a, b = at_once(traced, lo, hi, precision, bool(ckpt))
                models[(precision, ckpt)] = StepModel.fit(a, b)
                if lowered(precision, POLICY_PARAM_DTYPE) and (precision, ckpt) not in unmixed:
                    try:  # FSDP's rows: its mixed-precision policy (the weights themselves in bf16)
                        mixed = partial(
                            trace_step, model, batch_fn, loss_fn, optimizer_fn, policy=POLICY_PARAM_DTYPE,
                            selective=selective,
                        )  # fmt: skip
                        pair = at_once(mixed, lo, hi, precision, bool(ckpt))
                        fsdp_models[(precision, ckpt)] = StepModel.fit(*pair).fsdp_mixed()
                    except Exception as exc:  # the model's forward cannot run on bf16 weights
                        unmixed[(precision, ckpt)] = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
                if cpu is not None:
                    cpu_times[(precision, ckpt)] = Affine.through(lo, cpu.predict_s(a), hi, cpu.predict_s(b))
        trace_s += time.perf_counter() - started
        return a, b

    a, b = trace(checkpointing)
    figures = PlanModel(
        parameters=a.parameters,
        parameter_bytes=a.parameter_bytes,
        flops_per_sample=(b.flops - a.flops) / (hi - lo),
        ops_per_step=a.ops,
        tokens_per_sample=tokens_per_sample,
    )
    units = fsdp_units(model)
    auto_checkpointing = checkpointing == (False,) and a.blocks > 0
    notes = tuple(model_notes(model))

    def planned(search_bigger: bool) -> PlanDocument:
        return plan_models(
            models, figures, global_batch, gpus=gpus, gpus_per_node=gpus_per_node, units=units,
            headroom=headroom, tokens_per_sample=tokens_per_sample, run_samples=run_samples, prices=prices,
            cpu_times=cpu_times, cpu_memory=cpu.memory if cpu is not None else None, nodes=nodes,
            inter_node_gb_s=inter_node_gb_s, notes=notes, search_bigger=search_bigger,
            fsdp_models=fsdp_models, optimizations=optimizations, pp_schedule=pp_schedule,
        )  # fmt: skip

    result = planned(search_bigger=not auto_checkpointing)
    if auto_checkpointing and not fits_anywhere(result):
        trace((True,))
        notes += (NOTHING_FIT_WITHOUT_CHECKPOINTING,)
        result = planned(search_bigger=True)
    if unmixed:
        why = next(iter(unmixed.values()))
        result = dataclasses.replace(result, notes=(*result.notes, f"{UNMIXED} ({why})"))
    return dataclasses.replace(result, calibration=with_cpu(result.calibration, cpu), trace_s=trace_s)


#: The note of a plan whose model could not be traced as FSDP's mixed-precision policy runs it.
UNMIXED = (
    "the model's step did not run with its weights in bf16 (FSDP's mixed-precision policy, which "
    "casts neither buffers nor the model's own tensors): its FSDP rows are autocast's"
)
#: The note of a plan that nothing fitted until activation checkpointing was planned too.
NOTHING_FIT_WITHOUT_CHECKPOINTING = (
    "nothing fitted on the GPUs asked for without activation checkpointing: it was planned too"
)


def fits_anywhere(result: PlanDocument) -> bool:
    """Whether any GPU configuration of ``result`` fits (this machine's own rows aside)."""
    return any(c.fits for c in result.configs if c.gpu != "this-cpu")


def with_cpu(calibration: PlanCalibration, cpu: CpuCalibration | None) -> PlanCalibration:
    """A plan's ``calibration`` with this machine's (``cpu``: its costs, checks and memory), if any."""
    if cpu is None:
        return calibration
    memory = cpu.memory
    facts = CpuCalibrationFacts(
        s_per_fp32_flop=cpu.s_per_fp32_flop,
        s_per_low_precision_flop=cpu.s_per_low_flop,
        s_per_fp16_flop=cpu.fp16_flop_s(),
        s_per_byte=cpu.s_per_byte,
        s_per_op=cpu.s_per_op,
        spread=cpu.spread,
        fitted_on=tuple(cpu.fitted_on),
        held_out=tuple(TimedOut(c, p, m) for c, p, m in cpu.held_out),
        held_out_median_error=cpu.held_out_median_error,
        memory=None if memory is None else memory.facts(),
    )
    return dataclasses.replace(calibration, cpu=facts)


def micro_batches(global_batch: int, gpus_per_node: int, extra: tuple[int, ...] = ()) -> list[int]:
    """Candidate micro-batches: powers of two (and ``extra``) that split ``global_batch`` over the GPUs."""
    candidates = sorted({*_powers_of_two(global_batch), *extra})
    micro = [m for m in candidates if global_batch % (m * gpus_per_node) == 0]
    if not micro:
        raise ValueError(f"a global batch of {global_batch} does not split over {gpus_per_node} GPUs")
    return micro


def plan_models(
    models: dict[Setting, StepModel],
    figures: PlanModel,
    global_batch: int,
    gpus: tuple[str, ...] = (),
    gpus_per_node: int = 1,
    units: FsdpUnits = NO_UNITS,
    headroom: float = 0.1,
    tokens_per_sample: int | None = None,
    run_samples: int | None = None,
    prices: Any = None,
    cpu_times: dict[Setting, Affine] | None = None,
    cpu_memory: MemoryCalibration | None = None,
    notes: tuple[str, ...] = (),
    extra_micro_batches: tuple[int, ...] = (),
    nodes: int = 1,
    inter_node_gb_s: float = INTER_NODE_GB_S,
    search_bigger: bool = True,
    fsdp_models: dict[Setting, StepModel] | None = None,
    optimizations: tuple[str, ...] = (EAGER,),
    pp_schedule: str = "1f1b",
) -> PlanDocument:
    """Predict, price and rank every configuration of fitted step models (precision, checkpointing).

    ``fsdp_models``: the low-precision steps as FSDP's mixed-precision policy runs them, for its
    rows (:meth:`StepModel.fsdp_mixed`; without them FSDP's rows are autocast's).

    ``units`` is what FSDP would gather whole (its largest block, the root's own; several GPUs);
    ``cpu_times`` this machine's calibrated seconds per micro-batch of each model, when known, and
    ``cpu_memory`` the memory its steps take beyond their traces (measured kernel workspaces);
    ``extra_micro_batches`` are planned beside the powers of two (a script's own micro-batch);
    ``nodes`` of ``gpus_per_node`` GPUs each, joined at ``inter_node_gb_s`` per GPU; with
    ``search_bigger``, when nothing fits the suggestion looks at more GPUs (:func:`suggest`);
    pipeline rows run ``pp_schedule`` (:data:`~autotune.plan.layouts.PP_SCHEDULES`).
    """
    specs = [_spec(g) for g in gpus] if gpus else list(GPUS)
    n = gpus_per_node * nodes
    table = prices if prices is not None else load_prices(None)
    blocks = max((step.blocks for step in models.values()), default=0)
    layouts = layouts_for(gpus_per_node, nodes, units, blocks, inter_node_gb_s, pp_schedule)
    configs = predict_all(
        models, specs, layouts, global_batch, headroom, table, tokens_per_sample, run_samples,
        extra_micro_batches, fsdp_models, optimizations,
    )  # fmt: skip
    if not configs:
        raise ValueError(f"a global batch of {global_batch} does not split over {n} GPUs")
    for key, step in models.items():
        if cpu_times and key in cpu_times and n == 1:
            micro = micro_batches(global_batch, 1, extra_micro_batches)
            configs += [
                _predict_cpu(step, cpu_times[key], m, global_batch // m, tokens_per_sample, cpu_memory)
                for m in micro
            ]
    configs.sort(key=_rank)
    calibration = PlanCalibration(
        calibrated=True,
        calibrated_on=CALIBRATED_ON,
        efficiency=tuple(
            EfficiencyFigures(e.gemm, e.attention, e.memory, e.launch_us, e.host_us_per_op)
            for e in EFFICIENCY
        ),
        framework_reserve_bytes=FRAMEWORK_RESERVE_BYTES,
        note="GPU step times at efficiencies fitted on published runs of an optimised stack (flash "
        f"attention, fused kernels): {CALIBRATED_ON}; plain eager scripts run toward the slow end of the "
        "interval; memory is traced, with the framework reserve assumed",
    )
    notes += layout_notes(configs)
    notes += tuple(published_notes(optimizations, {c.params.optimizations for c in configs}))
    suggestion = suggest(
        configs, models, specs, global_batch, gpus_per_node, nodes, units, headroom, table,
        tokens_per_sample, run_samples, inter_node_gb_s, search_bigger, fsdp_models, optimizations,
        pp_schedule,
    )  # fmt: skip
    return PlanDocument(tuple(configs), figures, calibration, 0.0, notes, suggestion)


def predict_all(
    models: dict[Setting, StepModel],
    specs: list[GpuSpec],
    layouts: list[Layout],
    global_batch: int,
    headroom: float,
    prices: Any,
    tokens_per_sample: int | None,
    run_samples: int | None,
    extra_micro_batches: tuple[int, ...] = (),
    fsdp_models: dict[Setting, StepModel] | None = None,
    optimizations: tuple[str, ...] = (EAGER,),
) -> list[PlanConfig]:
    """Every GPU × step model × layout × micro-batch × optimization that splits the global batch.

    FSDP's layouts take the step of ``fsdp_models`` where there is one (its mixed-precision policy);
    each optimization other than eager is its published effect on the eager row (an estimate).
    """
    configs = []
    for spec in specs:
        quote = resolve_price(spec.key, table=prices)
        price = quote.usd_per_gpu_hour if quote is not None else None
        for key, own in models.items():
            for layout in layouts:
                step = (fsdp_models or {}).get(key, own) if layout.name == "fsdp" else own
                try:
                    micro = micro_batches(global_batch, layout.dp, extra_micro_batches)
                except ValueError:
                    continue
                budget = spec.sheet.memory_bytes / (1 + headroom)
                # by accumulation and optimization: held gradients, a pipeline's in flight
                largest: dict[tuple[int, str], int] = {}
                has_fp8 = bool(spec.peak and spec.peak.tflops("fp8"))
                names = [o for o in optimizations if applies(o, step.precision, has_fp8)]
                for m in micro:
                    host_bound = layout.host_bound(spec, step, m, EFFICIENCY[1])
                    accumulation = global_batch // (m * layout.dp)
                    # the published gains are a GPU-bound step's: none is promised to a host-bound one
                    for name in names if not host_bound else [n for n in names if n == EAGER]:
                        if (accumulation, name) not in largest:
                            within = budget / ratios(name)[1]
                            largest[accumulation, name] = layout.largest_micro_batch(
                                step, within, accumulation
                            )
                        configs.append(
                            _predict(spec, layout, step, m, accumulation, headroom, price, tokens_per_sample,
                                     run_samples, largest[accumulation, name], host_bound, name)
                        )  # fmt: skip
    return configs


#: How far :func:`suggest` looks when nothing fits the GPUs asked for: up to this many nodes of 8.
MAX_SUGGESTED_NODES = 64


def suggest(
    configs: list[PlanConfig],
    models: dict[Setting, StepModel],
    specs: list[GpuSpec],
    global_batch: int,
    gpus_per_node: int,
    nodes: int,
    units: FsdpUnits,
    headroom: float,
    prices: Any,
    tokens_per_sample: int | None,
    run_samples: int | None,
    inter_node_gb_s: float,
    search_bigger: bool = True,
    fsdp_models: dict[Setting, StepModel] | None = None,
    optimizations: tuple[str, ...] = (EAGER,),
    pp_schedule: str = "1f1b",
) -> Suggestion | None:
    """The cheapest configuration that fits: among ``configs`` when one does, else on more GPUs.

    More GPUs means the node filled up to 8, then 2, 4, 8... nodes of 8 (up to
    :data:`MAX_SUGGESTED_NODES`), every layout of each; the first size where something fits gives
    its cheapest configuration.
    """
    asked = f"{gpus_per_node * nodes} × " if gpus_per_node * nodes > 1 else ""
    where = f"{asked}{'/'.join(s.key for s in specs)}" if len(specs) <= 3 else f"{asked}any priced GPU"
    fitting = [c for c in configs if c.fits and c.gpu != "this-cpu"]
    if fitting:
        return _suggestion(min(fitting, key=_rank), "cheapest that fits", True)
    if not search_bigger:
        return None
    blocks = max((step.blocks for step in models.values()), default=0)
    for per_node, n_nodes in _bigger(gpus_per_node, nodes):
        layouts = layouts_for(per_node, n_nodes, units, blocks, inter_node_gb_s, pp_schedule)
        predicted = predict_all(
            models, specs, layouts, global_batch, headroom, prices, tokens_per_sample, run_samples,
            fsdp_models=fsdp_models, optimizations=optimizations,
        )  # fmt: skip
        rows = [c for c in predicted if c.fits]
        if rows:
            best = min(rows, key=_rank)
            flags = f"--gpus {per_node}" + (f" --nodes {n_nodes}" if n_nodes > 1 else "")
            return _suggestion(best, f"nothing fits {where}; the cheapest that fits: ({flags})", False)
    text = f"nothing fits {where}, nor on up to {MAX_SUGGESTED_NODES} nodes of 8"
    return Suggestion(text, fits_as_asked=False)


def _bigger(gpus_per_node: int, nodes: int) -> list[tuple[int, int]]:
    """Larger jobs to try, smallest first: the node filled to 8 GPUs, then more nodes of 8."""
    sizes = [(g, 1) for g in (2, 4, 8) if nodes == 1 and g > gpus_per_node]
    per_node = max(gpus_per_node, 8)
    n = nodes * 2
    while n <= MAX_SUGGESTED_NODES:
        sizes.append((per_node, n))
        n *= 2
    return sizes


def _suggestion(c: PlanConfig, lead: str, as_asked: bool) -> Suggestion:
    p = c.params
    where = c.gpu if c.gpus == 1 else f"{c.gpus} × {c.gpu}" + (f" on {c.nodes} nodes" if c.nodes > 1 else "")
    ckpt = ""
    if p.activation_checkpointing:
        ckpt = f", {'selective ' if p.checkpointing_mode == SELECTIVE else ''}activation checkpointing"
    cost = (
        f", {format_usd(c.usd_per_million_tokens)} per million tokens"
        if c.usd_per_million_tokens is not None
        else f", {format_usd(c.usd_per_million_samples)} per million samples"
        if c.usd_per_million_samples is not None
        else ""
    )
    peak = (c.peak_memory_bytes or 0) / 2**30
    optimized = "" if p.optimizations == EAGER else f", {p.optimizations} (estimate)"
    text = (
        f"{lead} {where}, {p.layout}, micro-batch {p.micro_batch} × {p.grad_accum}, "
        f"{p.precision}{ckpt}{optimized}: {peak:.1f} GiB per GPU{cost}"
    )
    config = SuggestedConfig(c.gpu, c.gpus, c.nodes, p, c.peak_memory_bytes, c.step_time_s,
                             c.usd_per_million_samples, c.usd_per_million_tokens)  # fmt: skip
    return Suggestion(text, as_asked, config)


#: What each row's ``precision_policy`` means.
PRECISION_POLICIES = {
    "fp32": "fp32 weights, activations and compute",
    "autocast": "torch.autocast over fp32 weights (matrix products in the low precision, a cached "
    "low-precision copy of each weight, normalisations and the loss in fp32)",
    POLICY_PARAM_DTYPE: "FSDP's MixedPrecisionPolicy(param_dtype=bf16 or fp16, reduce_dtype=fp32), as "
    "torchtitan sets it: weights gathered, activations kept and compute in the low precision, fp32 "
    "sharded weights, gradients reduced in fp32, fp32 optimizer state",
}


def checkpointing_mode(step: StepModel) -> str:
    """``none``, ``full`` (whole blocks recomputed) or ``selective`` (per op)."""
    if not step.checkpointing:
        return "none"
    return SELECTIVE if step.selective else "full"


def precision_policy(step: StepModel) -> str:
    """How a row's precision is applied (a key of :data:`PRECISION_POLICIES`)."""
    return "fp32" if step.precision in ("fp32", "tf32") else step.policy


def layout_notes(configs: list[PlanConfig]) -> tuple[str, ...]:
    """What the layouts planned assume, for the layouts that are in the plan."""
    notes = []
    if any(c.params.checkpointing_mode == SELECTIVE for c in configs):
        notes.append(
            "selective checkpointing rows: per op, as torchtitan's 'op' mode: each block keeps its "
            "attention's outputs and every other matrix product's, and recomputes the rest in the backward"
        )
    if any(c.params.precision_policy == POLICY_PARAM_DTYPE for c in configs):
        notes.append(
            f"low-precision FSDP rows: {PRECISION_POLICIES[POLICY_PARAM_DTYPE]}; other low-precision rows: "
            f"{PRECISION_POLICIES['autocast']} (precision_policy in the JSON)"
        )
    if any(c.step_bound == "host" for c in configs):
        slow, expected, fast = (e.host_us_per_op for e in EFFICIENCY)
        notes.append(
            f"rows whose step is marked (host): the GPU waits for its host to issue the step's ops "
            f"({expected:g} µs per op, {fast:g} to {slow:g}, measured on an H200's host), not for its own "
            "work; CUDA graphs or torch.compile (fewer launches) or a larger micro-batch (more work per op) "
            "shorten them"
        )
    if any(c.params.offload for c in configs):
        notes.append(
            f"CPU offload rows assume the host updates each GPU's shard at "
            f"{HOST_OPTIMIZER_BYTES_PER_S / 1e9:.0f} GB/s of the update's memory traffic (an assumption, not "
            "a measurement), and hold the shards in host memory (host_memory_bytes)"
        )
    if any(c.params.degrees.tp > 1 for c in configs):
        notes.append(
            "tensor parallel rows: Megatron-style column/row split with sequence parallelism, its "
            "collectives on NVLink and not overlapped (async TP would hide part)"
        )
    if any(c.params.degrees.pp > 1 for c in configs):
        gpipe = any("-gpipe" in c.params.layout for c in configs)
        schedule = (
            "GPipe (every forward before the first backward: the first stage holds all M micro-batches' "
            "activations)" if gpipe else "1F1B"
        )
        notes.append(
            f"pipeline rows: {schedule}, grad_accum is the pipeline's micro-batches "
            "(bubble (pp-1)/(M+pp-1)); "
            "each slot is the busiest stage's: ceil(blocks/pp) blocks and the larger of the embedding "
            "(first stage) and the head with the loss (last stage), a tied weight held by both"
        )
    return tuple(notes)


def with_run(result: PlanDocument, run_samples: int) -> PlanDocument:
    """``result`` with each configuration's $ for a run of ``run_samples`` samples."""

    def total(c: PlanConfig) -> float | None:
        return None if c.usd_per_million_samples is None else c.usd_per_million_samples * run_samples / 1e6

    configs = tuple(dataclasses.replace(c, usd_total=total(c)) for c in result.configs)
    return dataclasses.replace(result, configs=configs)


def _spec(key: str) -> GpuSpec:
    spec = gpu_spec(key)
    if spec is None:
        known = ", ".join(g.key for g in GPUS)
        raise ValueError(f"unknown GPU {key!r} (known: {known})")
    return spec


def _powers_of_two(limit: int) -> list[int]:
    return [1 << i for i in range(int(math.log2(max(limit, 1))) + 1)]


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
    largest: int,
    host_bound: bool | None,
    optimization: str = EAGER,
) -> PlanConfig:
    """One configuration predicted.

    ``host_bound``: :meth:`Layout.host_bound` at the expected efficiencies (its ``step_bound``).
    """
    gpus = layout.gpus
    params = PlanParams(
        micro_batch, accumulation, step.precision, step.checkpointing, layout.label,
        ParallelDegrees(layout.dp, layout.tp, layout.pp), layout.offload, precision_policy(step),
        checkpointing_mode(step), optimization,
    )  # fmt: skip
    peak, by_category = layout.memory(step, micro_batch, accumulation)
    time_ratio, memory_ratio = ratios(optimization)
    if memory_ratio != 1.0:  # the published effect, an estimate, as a category of its own
        by_category["published_effect"] = round(peak * memory_ratio) - peak
        peak += by_category["published_effect"]
    budget = spec.sheet.memory_bytes / (1 + headroom)
    host = layout.host_bytes(step, micro_batch)
    slow, expected, fast = (
        None if s is None else s * time_ratio
        for s in (
            layout.step_s(spec, step, micro_batch, accumulation, eff, overlap)
            for eff, overlap in zip(EFFICIENCY, OVERLAP, strict=True)
        )
    )
    why = None
    if expected is None:
        why = f"{spec.key} has no {step.precision} tensor cores"
    elif layout.offload and host > spec.sheet.host_memory_gib * 2**30 / (1 + headroom):
        why = (
            f"offload needs {host / 2**30:.0f} GiB of host memory per GPU, "
            f"over {spec.sheet.host_memory_gib / (1 + headroom):.0f} GiB"
        )
    elif peak > budget:
        why = (
            f"needs {peak / 2**30:.1f} GiB, over {budget / 2**30:.1f} GiB "
            f"({spec.key} less {headroom:.0%} headroom)"
        )
    interval = (fast, slow) if fast is not None and slow is not None else None
    samples = micro_batch * accumulation * layout.dp
    rate = samples / expected if expected else None
    tokens = rate * tokens_per_sample if rate is not None and tokens_per_sample else None
    per_m = price * gpus / 3600 / rate * 1e6 if price is not None and rate else None
    per_m_tokens = per_m / tokens_per_sample if per_m is not None and tokens_per_sample else None
    total = per_m * run_samples / 1e6 if per_m is not None and run_samples else None
    return PlanConfig(
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
        host_memory_bytes=host,
        step_bound=None if host_bound is None else "host" if host_bound else "device",
    )


def _predict_cpu(
    step: StepModel,
    seconds: Affine,
    micro_batch: int,
    accumulation: int,
    tokens_per_sample: int | None,
    memory: MemoryCalibration | None = None,
) -> PlanConfig:
    """A configuration on this machine's CPU, timed by its calibration (no price: it is yours).

    Its memory is the trace's plus the workspace measured on this machine (``memory``), if any.
    """
    mode: bool | str = SELECTIVE if step.selective else step.checkpointing
    workspace = memory.workspace_bytes(step.precision, mode, micro_batch) if memory else 0.0
    by_category = step.memory_by_category(micro_batch, gpu=False, accumulation=accumulation)
    if memory is not None:
        by_category["kernel_workspace"] = round(workspace)
    params = PlanParams(
        micro_batch, accumulation, step.precision, step.checkpointing, "single",
        precision_policy=precision_policy(step), checkpointing_mode=checkpointing_mode(step),
    )
    step_s = accumulation * seconds.at(micro_batch)
    rate = micro_batch * accumulation / step_s if step_s > 0 else None
    return PlanConfig(
        gpu="this-cpu",
        gpus=1,
        nodes=1,
        params=params,
        peak_memory_bytes=step.memory_bytes(micro_batch, gpu=False, accumulation=accumulation)
        + round(workspace),
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


def _rank(c: PlanConfig) -> tuple[bool, float, float]:
    """Fitting first, then cheapest per sample (unpriced after priced), then fastest."""
    cost = c.usd_per_million_samples if c.usd_per_million_samples is not None else math.inf
    speed = -(c.samples_per_s or 0.0)
    return (not c.fits, cost, speed)


__all__ = [
    "NOTHING_FIT_WITHOUT_CHECKPOINTING",
    "PRECISIONS",
    "SELECTIVE",
    "fits_anywhere",
    "micro_batches",
    "plan",
    "plan_models",
    "predict_all",
    "suggest",
    "with_cpu",
    "with_run",
]
