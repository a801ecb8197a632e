"""How a step spreads over GPUs: data, tensor and pipeline parallelism, sharding and CPU offload.

A :class:`Layout` is a mesh of ``pp`` pipeline stages × ``dp`` data-parallel ranks × ``tp`` tensor-
parallel ranks (tp innermost, inside one node; pp outermost, across nodes), as torchtitan and
Megatron-LM place them. The data-parallel ranks replicate the model (``ddp``) or shard it (``fsdp``).

Memory per GPU, for each phase of the step (forward, backward, optimizer; the peak is the largest):

- **TP**, Megatron-LM's column/row split with sequence parallelism (Korthikanti et al. 2022,
  "Reducing Activation Recomputation in Large Transformer Models", §4.2.2): the blocks' weights,
  gradients and optimizer state, and their activations and temporaries, are split ``tp`` ways.
- **PP**, the 1F1B schedule (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training
  on GPU Clusters Using Megatron-LM", §2.2): a stage holds its share of the parameters, gradients
  and optimizer state, 1/``pp`` of the temporaries; the first stage keeps min(M, pp) micro-batches
  in flight, each with its blocks' activations; GPipe's (Huang et al. 2019) keeps all M, the same
  bubble. The busiest stage holds ``ceil(blocks / pp)`` blocks and the larger side of the root:
  the embedding (first stage) or the final norm and head (last stage), a tied weight on both
  (:meth:`FsdpUnits.stage_parameter_share`); it also runs that side's work, so every slot of the
  schedule takes its time (:meth:`StepModel.stage_share`).
- **FSDP** (``torch.distributed.fsdp``, FSDP2's ``fully_shard`` per block, then the root):
  parameters, gradients and optimizer state sharded over the ``dp`` ranks. Gathered whole, in low
  precision by its mixed-precision policy rather than autocast's cached copy of every weight
  (:mod:`autotune.plan.fsdp_units`): in the forward and backward the root's own parameters and two
  blocks (one in use, one prefetched). Two moments of the backward are added to the traced peaks:
  a block's gradients copied in fp32 for their reduce-scatter (its own parameters already freed;
  the root's and the next block's gathered, the root's gradients held, the head's first), and the
  backward's end, when the root's gradients are copied beside the blocks' sharded ones. Nothing
  is gathered during the update.
- **DDP**: its buckets hold a copy of the gradients.
- **CPU offload** (FSDP's ``CPUOffloadPolicy``/``CPUOffload(offload_params=True)``): the shards of
  parameters, gradients and optimizer state live in host memory; the GPU holds what FSDP gathers
  and reduces (as above); the optimizer steps on the CPU.

Time per optimizer step: the single-GPU micro-batch time (:class:`~autotune.plan.model.StepModel`)
divided ``tp × pp`` ways, over M + pp − 1 pipeline slots (the 1F1B bubble (pp − 1)/(M + pp − 1));
plus tensor parallelism's collectives (per block per micro-batch two in the forward and two in the
backward, two more with checkpointing's recompute, each a ring all-reduce of the tensor between
blocks, on NVLink, not hidden), the pipeline's sends (the tensor between blocks, forward and back);
plus data parallelism's collectives (DDP's all-reduce of the gradients per optimizer step; FSDP's
two all-gathers and a reduce-scatter per micro-batch; offload's copies over the host link), of which
what the compute can hide is hidden (:func:`exposed_comm_s`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autotune.plan.blocks import busiest_stage_blocks
from autotune.plan.envelope import phase_of
from autotune.plan.fsdp_units import NO_UNITS, FsdpUnits
from autotune.plan.model import EFFICIENCY, Efficiency, largest_under
from autotune.plan.step import POLICY_PARAM_DTYPE

if TYPE_CHECKING:
    from autotune.plan.gpus import GpuSpec
    from autotune.plan.model import StepModel

#: Share of the compute that data-parallel communication can run behind: (pessimistic, expected,
#: optimistic). The expected value is fitted on the 5 published runs across nodes in
#: ``benchmarks/gpu_anchors.py`` (torchtitan's Llama 3.1 8B on 128 H100s, llm-foundry's MPT 760M-13B
#: on 32-64; median error 6.7% on runs left out of the fit), where FSDP's prefetched all-gathers run
#: behind the previous unit's compute. Whatever the compute, the first unit's gather (one unit's
#: share of the communication) is never hidden.
OVERLAP = (0.0, 0.2, 1.0)
#: Share of the all-reduce time a real DDP job hid behind compute: the NCCL kernels' overlap with
#: compute kernels on rank 0 of an A100 DDP trace (HTA's nccl_data test trace, ResNet, world size
#: 2: tests/data/gpu_traces/a100_ddp2), as :mod:`profilers.traces.gpu_time` measures it, 14.8%: its
#: backward was short beside its all-reduce, which is what :func:`exposed_comm_s` makes of it.
MEASURED_HIDDEN_SHARE = 0.148
#: GPU-to-GPU bandwidth between nodes, one direction, GB/s per GPU: one 400 Gb/s InfiniBand NDR
#: adapter per GPU, as in NVIDIA's DGX H100 datasheet (8 × ConnectX-7 400 Gb/s), and AWS p5
#: (3,200 Gb/s EFA for 8 GPUs). Clouds differ (AWS p4d: 400 Gb/s for 8 A100s, 6.25 GB/s per GPU):
#: ``--inter-node-gb-s`` sets it.
INTER_NODE_GB_S = 50.0
#: Bytes of the update's memory traffic (as traced: what the optimizer's ops read and write) the host
#: moves per second for one GPU's shard under CPU offload: an assumption (a server socket streams
#: 100-300 GB/s, shared by its GPUs; torch's CPU AdamW reaches a fraction of it), not a
#: measurement; the notes of a plan with offload rows say so.
HOST_OPTIMIZER_BYTES_PER_S = 10e9
#: DDP's default gradient bucket (``bucket_cap_mb=25``): the last bucket's all-reduce is not hidden.
DDP_BUCKET_BYTES = 25 * 2**20
#: Two moments of FSDP's backward beside the traced phases' peaks (:meth:`Layout.memory`): a block's
#: gradients copied for their reduce-scatter, and the backward's end, when the root's are.
BLOCK_REDUCE = "backward.reduce"
BACKWARD_END = "backward.end"
FSDP_MOMENTS = (BLOCK_REDUCE, BACKWARD_END)
TP_DEGREES = (1, 2, 4, 8)
PP_DEGREES = (1, 2, 4, 8, 16, 32)
#: Pipeline schedules (``torch.distributed.pipelining``'s ``Schedule1F1B`` and ``ScheduleGPipe``):
#: 1F1B runs a micro-batch's backward as soon as it can, so its first stage holds at most ``pp``
#: micro-batches' activations; GPipe runs every forward first and holds all of them.
PP_SCHEDULES = ("1f1b", "gpipe")


@dataclass(frozen=True, slots=True)
class Layout:
    """How a step spreads over ``gpus`` GPUs on ``nodes`` nodes (see the module's doc)."""

    name: str  # "single", "ddp", "fsdp": how the data-parallel ranks hold the model
    gpus: int  # all of them, every node's
    units: FsdpUnits = NO_UNITS  # FSDP: what it gathers whole (the largest block, the root's own)
    nodes: int = 1
    inter_node_gb_s: float = INTER_NODE_GB_S
    tp: int = 1
    pp: int = 1
    offload: bool = False
    schedule: str = "1f1b"  # the pipeline's (PP_SCHEDULES), when pp > 1

    @property
    def dp(self) -> int:
        """Data-parallel ranks: the GPUs over tensor × pipeline degrees."""
        return max(1, self.gpus // (self.tp * self.pp))

    @property
    def label(self) -> str:
        """``fsdp``, ``ddp``, ``fsdp2+tp4``, ``pp2+tp4``, ``fsdp+offload``: the layout with its degrees."""
        if self.tp == 1 and self.pp == 1:
            base = "single" if self.gpus == 1 and self.name == "single" else self.name
            if self.offload:
                return "offload" if self.gpus == 1 else f"{base}+offload"
            return base
        parts = [f"{self.name}{self.dp}"] if self.dp > 1 else []
        gpipe = "-gpipe" if self.schedule == "gpipe" else ""
        parts += [f"pp{self.pp}{gpipe}"] * (self.pp > 1) + [f"tp{self.tp}"] * (self.tp > 1)
        return "+".join(parts) + "+offload" * self.offload

    @property
    def weight_share(self) -> float:
        """The share of the model's weights a GPU of the busiest pipeline stage holds.

        Its stage's share, split ``tp`` ways, before data parallelism shards it (the gradients and
        optimizer state follow the weights).
        """
        return self.units.stage_parameter_share(self.pp) / self.tp

    # -- memory -----------------------------------------------------------------------------------
    def memory(
        self, step: StepModel, micro_batch: int, accumulation: int | None = None
    ) -> tuple[int, dict[str, int]]:
        """Peak bytes per GPU and their categories, the largest phase's.

        ``accumulation``: the micro-batches of an optimizer step (a pipeline's in flight; after the
        first, each holds the earlier ones' gradients); None: any number.
        """
        best: tuple[int, dict[str, int]] = (-1, {})
        for phase in self._phases(step, accumulation):
            by = self._phase(step, micro_batch, phase, accumulation)
            total = sum(by.values())
            if total > best[0]:
                best = (total, by)
        return best

    def _phases(self, step: StepModel, accumulation: int | None) -> list[str]:
        """The step's phases, and under FSDP two moments of its backward (:data:`FSDP_MOMENTS`)."""
        return [*step.phases_at(accumulation), *(FSDP_MOMENTS if self.name == "fsdp" else ())]

    def _phase(self, step: StepModel, m: int, phase: str, accumulation: int | None) -> dict[str, int]:
        # FSDP's moments: the backward's (a block's) or the update's (the backward's end) bytes, less
        # the temporaries of the op that peaked there
        moment = {BLOCK_REDUCE: "backward", BACKWARD_END: "optimizer"}.get(phase)
        if moment == "backward" and accumulation != 1 and "backward.held" in step.phases_at(accumulation):
            moment = "backward.held"  # a later micro-batch's: the earlier ones' gradients held
        raw = step.memory_by_category(m, gpu=True, phase=moment or phase)
        by: dict[str, float] = dict(raw)
        if moment:
            by["temporaries"] = 0
        optimizer = phase_of(phase) == "optimizer"  # a phase's peak, or an op of its envelope
        split = self.tp * self.pp
        stage = self.weight_share
        for key in ("parameters", "gradients", "optimizer_state", "parameter_casts"):
            by[key] = by.get(key, 0) * stage
        for key in ("temporaries", "allocator_rounding"):
            by[key] = by.get(key, 0) / split
        micro_batches = accumulation or self.pp  # any number: at least the pipeline's stages
        # GPipe: every forward before the first backward; 1F1B: the first stage holds at most pp
        gpipe = self.pp > 1 and self.schedule == "gpipe"
        held = micro_batches if gpipe else min(micro_batches, self.pp)
        # each held micro-batch's activations of the stage's ceil(blocks / pp) blocks
        in_flight = held * busiest_stage_blocks(step.blocks, self.pp)
        by["activations"] = raw["activations"] / self.tp * in_flight
        if self.name == "ddp":  # DDP's buckets hold a copy of the gradients (without gradient_as_bucket_view)
            by["ddp_buckets"] = step.parameters.at(m) * stage
        elif self.name == "fsdp":  # parameters, gradients and optimizer state sharded; units gathered
            for key in ("parameters", "gradients", "optimizer_state"):
                by[key] /= self.dp
            if optimizer:  # the update runs on each shard: a foreach step's copies are a shard's
                by["temporaries"] /= self.dp
            by["fsdp_gathered_units"] = self._gathered(step, phase)
            by["parameter_casts"] = 0.0  # its mixed-precision policy gathers units in bf16 instead
            if self.offload:  # the shards live on the host; the update runs there
                for key in ("parameters", "gradients", "optimizer_state"):
                    by[key] = 0.0
                if optimizer:
                    by["temporaries"] = 0.0
        return {k: math.ceil(v) for k, v in by.items()}

    def _gathered(self, step: StepModel, phase: str) -> float:
        """Bytes FSDP holds unsharded in ``phase`` or moment (see the module's doc), per GPU.

        Parameters and their gradients in the policy's low precision (bf16 or fp16 under FSDP's
        ``param_dtype``; fp32 otherwise, autocast's rows included), the copy a reduce-scatter reads
        in fp32 (its ``reduce_dtype``). A unit's own parameters are freed before its gradients are
        copied. A block is split ``tp`` ways, the root's own parameters too; under a pipeline the
        busiest stage holds the larger side of them (the embedding's or the head's).
        """
        low = 0.5 if step.policy == POLICY_PARAM_DTYPE else 1.0
        block = self.units.block_bytes / self.tp
        root = self.units.stage_root_bytes(self.pp) / self.tp
        if phase == BLOCK_REDUCE:  # the root's parameters and gradients; the next block; a block's
            return 2 * root * low + 2 * block * low + block  # gradients and their fp32 copy
        if phase == BACKWARD_END:  # the root's gradients and their fp32 copy
            return root * low + root
        if phase_of(phase) in ("forward", "backward"):  # the root's, one block in use, the next
            return root * low + 2 * block * low
        return 0.0  # the update runs on the shards

    def host_bytes(self, step: StepModel, micro_batch: int) -> int:
        """Host memory per GPU for its offloaded shards (0 without offload)."""
        if not self.offload:
            return 0
        phases = [
            step.memory_by_category(micro_batch, gpu=False, phase=phase) for phase in step.phases_at(None)
        ]
        state = sum(max(by[k] for by in phases) for k in ("parameters", "gradients", "optimizer_state"))
        return math.ceil(state * self.weight_share / self.dp)

    def largest_micro_batch(
        self, step: StepModel, budget_bytes: float, accumulation: int | None = None
    ) -> int:
        """The largest micro-batch whose peak under this layout fits ``budget_bytes`` (0: none does).

        Every phase's bytes under a layout are affine in the micro-batch: each phase's line, through
        its bytes at 0 and at 1, meets the budget somewhere; the smallest of these is the answer.
        """
        lines = []
        for phase in self._phases(step, accumulation):
            at_zero = sum(self._phase(step, 0, phase, accumulation).values())
            lines.append((at_zero, sum(self._phase(step, 1, phase, accumulation).values()) - at_zero))
        return largest_under(lines, budget_bytes)

    # -- time -------------------------------------------------------------------------------------
    def step_s(
        self,
        spec: GpuSpec,
        step: StepModel,
        micro_batch: int,
        accumulation: int,
        eff: Efficiency = EFFICIENCY[1],
        overlap: float = OVERLAP[1],
    ) -> float | None:
        """Seconds of one optimizer step (see the module's doc). None: no such precision."""
        parts = step.micro_and_optimizer_s(spec, micro_batch, eff)
        if parts is None:
            return None
        micro_s, opt_s = parts
        split = self.tp * self.pp
        # the host issues every op of its stage (tensor parallelism splits each op, not their number)
        host_micro_s, host_opt_s = step.host_micro_and_optimizer_s(micro_batch, eff)
        per_slot = max(self._gpu_slot_s(spec, step, micro_batch, micro_s, eff), host_micro_s / self.pp)
        slots = accumulation + self.pp - 1
        compute = slots * per_slot
        stage = self.weight_share
        if self.offload:  # the host runs the update on its shard: its bytes, and its ops issued
            state_bytes = step.optimizer_bytes * stage / self.dp
            opt_s = state_bytes / HOST_OPTIMIZER_BYTES_PER_S
        else:
            opt_s *= stage / (self.dp if self.name == "fsdp" else 1)
        opt_s = max(opt_s, host_opt_s / self.pp)
        comm = self.comm_s(spec, step, micro_batch, accumulation)
        behind = accumulation * micro_s / split if self.name == "fsdp" else (2 / 3) * micro_s / split
        return compute + opt_s + exposed_comm_s(comm, behind, self.comm_pieces(step), overlap)

    def host_bound(
        self, spec: GpuSpec, step: StepModel, micro_batch: int, eff: Efficiency = EFFICIENCY[1]
    ) -> bool | None:
        """Whether a GPU of this layout waits for its host to issue a micro-batch's ops.

        The host's time for its stage's ops above the GPU's work on them; None: no such precision.
        """
        parts = step.micro_and_optimizer_s(spec, micro_batch, eff)
        if parts is None:
            return None
        gpu_s = self._gpu_slot_s(spec, step, micro_batch, parts[0], eff)
        return step.host_micro_and_optimizer_s(micro_batch, eff)[0] / self.pp > gpu_s

    def _gpu_slot_s(
        self, spec: GpuSpec, step: StepModel, micro_batch: int, micro_s: float, eff: Efficiency
    ) -> float:
        """One slot of the schedule: the busiest stage's share of a micro-batch on one GPU.

        ``micro_s``: the whole micro-batch on one GPU; the stage's share is split ``tp`` ways.
        Its tensor- and pipeline-parallel transfers included; the host's issuing of the ops is not.
        """
        stage_s = micro_s * step.stage_share(spec, eff, self.pp) / self.tp
        split_s = stage_s + self.tp_comm_s(spec, step, micro_batch) / self.pp
        return split_s + self.pp_comm_s(spec, step, micro_batch)

    def comm_pieces(self, step: StepModel) -> int:
        """Pieces the data-parallel communication comes in: FSDP's units, DDP's buckets."""
        if self.name == "fsdp":
            return max(1, step.blocks)
        return max(1, math.ceil(step.parameters.at(1) * self.weight_share / DDP_BUCKET_BYTES))

    def comm_s(self, spec: GpuSpec, step: StepModel, micro_batch: int, accumulation: int) -> float:
        """Seconds of data-parallel communication per optimizer step, none hidden (ring collectives).

        FSDP in bf16/fp16 gathers parameters in that precision and reduces gradients in fp32 (its
        mixed-precision policy, as torchtitan sets it): half the gathers' bytes of fp32 training.
        """
        if self.name == "single" or (self.dp == 1 and not self.offload):
            return 0.0
        ring = (self.dp - 1) / self.dp
        params = step.parameters.at(micro_batch) * self.weight_share
        link = self._ring_gb_s(spec, self.dp, self.tp) * 1e9
        if self.name == "ddp":  # one all-reduce of the gradients per optimizer step (no_sync between)
            return 2 * ring * params / link
        # FSDP, each micro-batch: all-gather in forward and backward, reduce-scatter of gradients
        gathered = params * (0.5 if step.precision in ("bf16", "fp16") else 1.0)
        seconds = accumulation * ring * (2 * gathered + params) / link
        if self.offload:  # each micro-batch: the shard to the GPU twice, its gradients back
            seconds += accumulation * 3 * params / self.dp / (spec.sheet.host_link_gb_s * 1e9)
        return seconds

    def tp_comm_s(self, spec: GpuSpec, step: StepModel, micro_batch: int) -> float:
        """Seconds of tensor parallelism's collectives in one micro-batch, every block's (NVLink)."""
        if self.tp == 1:
            return 0.0
        # a block's recomputation runs its collectives again; selective checkpointing keeps their outputs
        per_block = 6 if step.checkpointing and not step.selective else 4
        ring = 2 * (self.tp - 1) / self.tp
        volume = step.block_io.at(micro_batch) * _element_bytes(step.precision)
        return per_block * step.blocks * ring * volume / (spec.sheet.link_gb_s * 1e9)

    def pp_comm_s(self, spec: GpuSpec, step: StepModel, micro_batch: int) -> float:
        """Seconds a stage spends sending one micro-batch's activations on and their gradients back."""
        if self.pp == 1:
            return 0.0
        volume = step.block_io.at(micro_batch) * _element_bytes(step.precision) / self.tp
        # over several nodes some stage boundary crosses them: each GPU sends its share on its adapter
        link = min(spec.sheet.link_gb_s, self.inter_node_gb_s) if self.nodes > 1 else spec.sheet.link_gb_s
        return 2 * volume / (link * 1e9)

    def _ring_gb_s(self, spec: GpuSpec, size: int, stride: int) -> float:
        """The bandwidth of a ring of ``size`` GPUs ``stride`` apart (consecutive ranks fill a node).

        Within a node it runs at NVLink's. Across nodes each ring crosses each node boundary once,
        and NCCL runs one ring per network adapter, so a group with k GPUs in each node moves its
        data at k adapters' bandwidth (as NCCL's bus bandwidth across nodes shows: close to the
        node's adapters together), capped by NVLink's.
        """
        per_node = self.gpus // self.nodes
        if self.nodes == 1 or size * stride <= per_node:
            return spec.sheet.link_gb_s
        in_each_node = max(1, per_node // stride)
        return min(spec.sheet.link_gb_s, self.inter_node_gb_s * in_each_node)


def exposed_comm_s(comm_s: float, compute_s: float, units: int, overlap: float) -> float:
    """The communication time a step pays: what ``overlap`` × the compute beside it cannot hide.

    At least the first of ``units`` pieces is paid: nothing runs before it.
    """
    hidden = min(comm_s * (1 - 1 / max(units, 1)), overlap * compute_s)
    return comm_s - max(0.0, hidden)


def layouts_for(
    gpus_per_node: int,
    nodes: int,
    units: FsdpUnits,
    blocks: int,
    inter_node_gb_s: float = INTER_NODE_GB_S,
    pp_schedule: str = "1f1b",
) -> list[Layout]:
    """Every layout of ``gpus_per_node × nodes`` GPUs the plan considers.

    Tensor parallelism stays inside a node (2, 4, 8 ways, dividing its GPUs), pipeline stages are
    at most the blocks, run on ``pp_schedule``; both need the model's repeated blocks. Offload is
    planned with FSDP alone.
    """
    n = gpus_per_node * nodes
    if n == 1:
        return [Layout("single", 1), Layout("fsdp", 1, units, offload=True)]
    out = []
    tps = [t for t in TP_DEGREES if gpus_per_node % t == 0 and (t == 1 or blocks > 1)]
    pps = [p for p in PP_DEGREES if p == 1 or 1 < p <= blocks]
    for tp in tps:
        for pp in pps:
            if n % (tp * pp):
                continue
            dp = n // (tp * pp)
            common = {"units": units, "nodes": nodes, "inter_node_gb_s": inter_node_gb_s}
            if pp > 1:
                common["schedule"] = pp_schedule
            if dp == 1:
                out.append(Layout("single", n, tp=tp, pp=pp, **common))  # type: ignore[arg-type]
                continue
            out += [Layout(name, n, tp=tp, pp=pp, **common) for name in ("ddp", "fsdp")]  # type: ignore[arg-type]
            if tp == pp == 1:
                out.append(Layout("fsdp", n, offload=True, **common))  # type: ignore[arg-type]
    return out


def _element_bytes(precision: str) -> int:
    """Bytes of one activation element in the precision a block's output travels in."""
    return 2 if precision in ("bf16", "fp16") else 4


__all__ = [
    "BACKWARD_END", "BLOCK_REDUCE", "DDP_BUCKET_BYTES", "FSDP_MOMENTS", "HOST_OPTIMIZER_BYTES_PER_S",
    "INTER_NODE_GB_S", "MEASURED_HIDDEN_SHARE", "OVERLAP", "PP_SCHEDULES", "Layout", "exposed_comm_s",
    "layouts_for",
]  # fmt: skip
