"""One training step of a model at one configuration, traced with fake tensors (or measured with real ones).

:func:`trace_step` builds the model (from a factory, or a copy of a given model), makes the
optimizer's state with one update from zero gradients, then runs the step measured under
:class:`~autotune.plan.trace.StepTracer`, inside ``FakeTensorMode`` unless ``fake=False``, and
returns a :class:`StepFigures`: the peak of live tensor bytes by category and the op totals the
time model needs. Precision is autocast around the forward and the loss (bf16/fp16), activation
checkpointing wraps the model's repeated blocks as ``autotune.prepare`` does.
"""

from __future__ import annotations

import contextlib
import copy
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily

from autotune.plan.blocks import BlockWatch, ForwardSides
from autotune.plan.envelope import MarkedStep, marked_step, memory_envelope
from autotune.plan.fsdp_units import FsdpUnits, units_of
from autotune.plan.gpu_kernels import AsOnAGpu
from autotune.plan.trace import ATTENTION, CATEGORIES, GEMM, StepTracer, run_step
from autotune.plan.untrusted import untrusted_notes
from autotune.prepared import _checkpoint_blocks, buffers_beside_parameters

#: A batch at a micro-batch size: (the model's inputs as a tuple, the loss function's target).
BatchFn = Callable[[int], tuple[tuple[Any, ...], Any]]
LossFn = Callable[[Any, Any], torch.Tensor]
OptimizerFn = Callable[[list[nn.Parameter]], torch.optim.Optimizer]
_AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}
#: The low precision applied to the weights themselves, as FSDP's mixed-precision policy does.
POLICY_PARAM_DTYPE = "param_dtype"
#: The checkpointing setting that recomputes per op, as torchtitan's ``op`` mode (beside False and
#: True, whole blocks).
SELECTIVE = "selective"


def lowered(precision: str, policy: str) -> bool:
    """Whether ``precision`` under ``policy`` runs with the weights themselves in it."""
    return policy == POLICY_PARAM_DTYPE and precision in _AUTOCAST


@dataclass(frozen=True, slots=True)
class StepFigures:
    """What one traced (or measured) step holds and does."""

    micro_batch: int
    precision: str
    checkpointing: bool
    peak_bytes: int  # live tensor bytes at the step's peak
    memory_by_category: dict[str, int]  # CATEGORIES -> bytes at the peak
    peak_phase: str  # "forward", "backward" or "optimizer"
    ops: int
    flops: int  # the whole step's
    flops_by_class: dict[str, int]  # "gemm", "attention", "other"
    bytes_by_class: dict[str, int]
    ops_by_class: dict[str, int]
    dtype_flops: dict[str, int]  # GEMM/attention FLOPs by the dtype they run in
    parameter_bytes: int
    parameters: int
    optimizer_flops: int  # of the optimizer's step alone (it runs once per global batch)
    optimizer_bytes: int
    optimizer_ops: int
    #: Bytes the CUDA caching allocator adds at the peak: every live block rounded up to 512 bytes.
    rounding_bytes: int
    #: Bytes by category at each phase's own peak ("forward", "backward", "optimizer") and at the
    #: ops that would be the peak at another micro-batch ("backward.1"; :mod:`autotune.plan.envelope`).
    phase_memory: dict[str, dict[str, int]] = field(default_factory=dict)
    #: The same for the forward and backward of a micro-batch after an optimizer step's first, the
    #: earlier ones' gradients held (gradient accumulation; :func:`~autotune.plan.envelope.marked_step`).
    held_phase_memory: dict[str, dict[str, int]] = field(default_factory=dict)
    #: The live bytes after every op, as traced (None when scaled from another micro-batch).
    marks: MarkedStep | None = None
    #: How a low precision was applied: ``autocast`` over fp32 weights, or ``param_dtype``: the
    #: weights themselves in that precision, as FSDP's mixed-precision policy gathers them.
    policy: str = "autocast"
    #: Checkpointing per op (torchtitan's selective mode) rather than of whole blocks.
    selective: bool = False
    #: The traced micro-batch these figures were scaled from (0: traced as they are).
    scaled_from: int = 0

    def memory_phases(self) -> dict[str, dict[str, int]]:
        """:attr:`phase_memory`, or the peak's breakdown as its phase's when there is none."""
        return self.phase_memory or {self.peak_phase: dict(self.memory_by_category)}

    @property
    def math_flops(self) -> int:
        """The FLOPs of the matrix products (GEMM and attention): the part precision speeds up."""
        return sum(self.flops_by_class.get(c, 0) for c in (GEMM, ATTENTION))

    def flops_in(self, *dtypes: str) -> int:
        """The matrix products' FLOPs that run in ``dtypes`` ("bfloat16", "float16"…)."""
        return sum(v for k, v in self.dtype_flops.items() if k in dtypes)

    #: The model's repeated blocks, and the elements of the tensor passed between two of them in
    #: one micro-batch (what tensor and pipeline parallelism communicate; :mod:`autotune.plan.blocks`).
    blocks: int = 0
    block_io_elements: int = 0
    #: The forward's work before the first block and after the last (a pipeline's first and last
    #: stages run it beside their blocks; used as shares of the forward's, whatever the micro-batch).
    sides: ForwardSides = field(default_factory=ForwardSides)


def trace_step(
    model: nn.Module | Callable[[], nn.Module],
    batch_fn: BatchFn,
    loss_fn: LossFn,
    optimizer_fn: OptimizerFn,
    micro_batch: int,
    precision: str = "fp32",
    checkpointing: bool = False,
    fake: bool = True,
    policy: str = "autocast",
    selective: bool = False,
) -> StepFigures:
    """Trace one steady-state training step (see the module's doc).

    ``policy`` and ``selective`` as :func:`prepare_step` takes them.
    """
    mode: Any = FakeTensorMode(allow_non_fake_inputs=False) if fake else contextlib.nullcontext()
    with mode, AsOnAGpu() if fake else contextlib.nullcontext():
        net = _build(model, mode if fake else None)
        watch = BlockWatch(net)
        step = prepare_step(
            net, batch_fn, loss_fn, optimizer_fn, micro_batch, precision, checkpointing, policy=policy,
            selective=selective,
        )  # fmt: skip
        create_state(step.params, step.optimizer)
        tracer = StepTracer()
        tracer.track(step.batch, "activations")  # the batch is live through the step
        watch.watch(tracer.ops)
        run_step(tracer, step.forward_loss, step.params, step.optimizer)
        watch.remove()
    return figures_of(
        tracer, micro_batch, precision, checkpointing, step.params, watch, policy=policy, selective=selective
    )


def create_state(params: list[nn.Parameter], optimizer: torch.optim.Optimizer) -> None:
    """The optimizer's state, made by one update from zero gradients.

    What a first step leaves, without the forward and backward it would also run (half of a
    trace's time).
    """
    for p in params:
        p.grad = torch.zeros_like(p)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


@dataclass(frozen=True)
class PreparedStep:
    """A model ready to step: its trainable parameters, optimizer, batch, and forward-and-loss."""

    params: list[nn.Parameter]
    optimizer: torch.optim.Optimizer
    batch: list[torch.Tensor]
    forward_loss: Callable[[], torch.Tensor]

    def run(self, accumulation: int = 1) -> None:
        """One real training step, its gradients freed after the update.

        Forward, loss and backward ``accumulation`` times, then the optimizer's step.
        """
        for _ in range(accumulation):
            self.forward_loss().backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def prepare_step(
    net: nn.Module,
    batch_fn: BatchFn,
    loss_fn: LossFn,
    optimizer_fn: OptimizerFn,
    micro_batch: int,
    precision: str,
    checkpointing: bool,
    device: str = "cpu",
    policy: str = "autocast",
    selective: bool = False,
) -> PreparedStep:
    """Checkpointing applied, the optimizer made, a batch drawn, the forward in ``precision``.

    On ``device`` (``"cuda"`` to measure a real GPU step): the model and the batch are moved there.
    A low precision is autocast over the fp32 weights, or with ``policy`` :data:`POLICY_PARAM_DTYPE`
    applied as FSDP's ``MixedPrecisionPolicy(param_dtype=...)`` computes: the floating parameters
    themselves in that precision and the floating inputs cast to it, with no autocast (buffers
    stay as they are, as FSDP leaves them). ``selective``: checkpointing per op, as torchtitan's
    ``op`` mode (``autotune.prepared._selective_policy``), rather than of whole blocks.
    """
    if checkpointing:
        _checkpoint_blocks(net, selective=selective)
    if device != "cpu":
        net.to(device)
    low = lowered(precision, policy)
    if low:
        refuse_policy(net)
        for p in net.parameters():
            if p.is_floating_point():
                p.data = p.data.to(_AUTOCAST[precision])
    params = [p for p in net.parameters() if p.requires_grad]
    inputs, target = batch_fn(micro_batch)
    if device != "cpu":
        inputs = tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in inputs)
        target = target.to(device) if isinstance(target, torch.Tensor) else target
    if low:
        inputs = tuple(
            t.to(_AUTOCAST[precision]) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
            for t in inputs
        )
    autocast: Any = (
        torch.autocast(torch.device(device).type, dtype=_AUTOCAST[precision])
        if precision in _AUTOCAST and not low
        else contextlib.nullcontext()
    )

    def forward_loss() -> torch.Tensor:
        with autocast:
            return loss_fn(net(*inputs), target)

    batch = [t for t in (*inputs, target) if isinstance(t, torch.Tensor)]
    return PreparedStep(params, optimizer_fn(params), batch, forward_loss)


def refuse_policy(net: nn.Module) -> None:
    """RuntimeError for a model FSDP's mixed-precision policy cannot run (as ``autotune.prepare`` says).

    Its fp32 buffers beside parameters: the policy casts parameters, never buffers.
    """
    if buffers_beside_parameters(net):
        raise RuntimeError(
            "the model keeps fp32 buffers beside its parameters (BatchNorm): FSDP's policy casts only "
            "the parameters, so autotune.prepare runs bf16 under fsdp as autocast"
        )


def model_notes(model: nn.Module | Callable[[], nn.Module]) -> list[str]:
    """What the trace cannot see in ``model`` (:mod:`autotune.plan.untrusted`), on a fake copy."""
    if isinstance(model, nn.Module):
        return untrusted_notes(model)
    with FakeTensorMode() as mode:
        return untrusted_notes(_build(model, mode))


def fsdp_units(model: nn.Module | Callable[[], nn.Module]) -> FsdpUnits:
    """What FSDP gathers of ``model`` (its largest block, the root's own), measured on a fake copy."""
    with FakeTensorMode() as mode:
        return units_of(_build(model, mode))


def _build(model: nn.Module | Callable[[], nn.Module], mode: Any) -> nn.Module:
    """The model to trace: built from a factory inside the mode, or a copy with fake tensors.

    A given model is copied and its parameters and buffers replaced by fake tensors (the real ones
    are left alone).
    """
    if not isinstance(model, nn.Module):
        return model()
    if mode is None:
        return copy.deepcopy(model)
    fakes: dict[int, Any] = {}  # by the real tensor: a weight tied in two modules stays one

    def fake(t: torch.Tensor, parameter: bool) -> Any:
        if id(t) not in fakes:
            f = mode.from_tensor(t.detach())
            fakes[id(t)] = nn.Parameter(f, requires_grad=t.requires_grad) if parameter else f
        return fakes[id(t)]

    with unset_fake_temporarily():  # real tensors meet no fake mode here
        net = copy.deepcopy(model)
        for module in net.modules():
            for name, p in list(module._parameters.items()):
                if p is not None:
                    module._parameters[name] = fake(p, parameter=True)
            for name, b in list(module._buffers.items()):
                if b is not None:
                    module._buffers[name] = fake(b, parameter=False)
    return net


def figures_of(
    tracer: StepTracer,
    micro_batch: int,
    precision: str,
    checkpointing: bool,
    params: list[Any],
    blocks: BlockWatch | None = None,
    later_from: int | None = None,
    policy: str = "autocast",
    selective: bool = False,
) -> StepFigures:
    """The figures of a traced step: its peak by category, its ops by class, the optimizer's share.

    ``later_from``: the memory mark where a second micro-batch began, when the step accumulated;
    ``policy`` and ``selective`` as the step ran (:func:`prepare_step`).
    """
    flops: dict[str, int] = defaultdict(int)
    moved: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    dtype_flops: dict[str, int] = defaultdict(int)
    for op in tracer.ops:
        flops[op.op_class] += op.flops
        moved[op.op_class] += op.bytes_moved
        count[op.op_class] += 1
        if op.flops and op.dtype:
            dtype_flops[op.dtype] += op.flops
    memory = tracer.memory
    opt = [op for op in tracer.ops if op.phase == "optimizer"]
    rounding = sum(-n % 512 for n, _ in memory.peak_live.values())
    marked = marked_step(memory.lifetimes, memory.final, memory.phases, later_from)
    return StepFigures(
        micro_batch=micro_batch,
        precision=precision,
        checkpointing=checkpointing,
        peak_bytes=memory.peak_bytes,
        memory_by_category=memory.peak_by_category(),
        peak_phase=memory.peak_phase,
        ops=len(tracer.ops),
        flops=sum(flops.values()),
        flops_by_class=dict(flops),
        bytes_by_class=dict(moved),
        ops_by_class=dict(count),
        dtype_flops=dict(dtype_flops),
        parameter_bytes=sum(p.numel() * p.element_size() for p in params),
        parameters=sum(p.numel() for p in params),
        optimizer_flops=sum(op.flops for op in opt),
        optimizer_bytes=sum(op.bytes_moved for op in opt),
        optimizer_ops=len(opt),
        rounding_bytes=rounding,
        phase_memory=memory_envelope(marked),
        held_phase_memory=memory_envelope(marked, held=True),
        marks=marked,
        policy=POLICY_PARAM_DTYPE if lowered(precision, policy) else "autocast",
        selective=checkpointing and selective,
        blocks=blocks.count if blocks is not None else 0,
        block_io_elements=blocks.elements if blocks is not None else 0,
        sides=blocks.sides(tracer.ops) if blocks is not None else ForwardSides(),
    )


__all__ = ["CATEGORIES", "POLICY_PARAM_DTYPE", "StepFigures", "figures_of", "lowered", "trace_step"]
