"""Trace one training step op by op: its FLOPs, bytes and live tensor memory, with fake or real tensors.

:class:`StepTracer` is a ``TorchDispatchMode``: every aten op the step runs passes through it, with
its FLOPs (``torch.utils.flop_counter``'s formulas; the CPU's flash attention counted as the CUDA
kernel is), the bytes it reads and writes, and the storages it creates. Views (and fake tensors'
metadata queries) make no kernel and move no bytes: they are not recorded. A storage is live from
the op that created it until Python frees it (a ``weakref`` callback), so the tracer knows the live
tensor bytes after every op and their peak,
split by what the bytes are: parameters, gradients, optimizer state, parameter casts (autocast's
lower-precision copies of the weights, cached for the forward and saved for the backward: a whole
bf16 copy of the model on one GPU), activations (kept from the forward for the backward) and
temporaries (everything else).

Under ``FakeTensorMode`` no tensor memory is allocated: a model plans at any size. With real
tensors the same tracer measures the real step, which is what the predictions are checked against.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.flop_counter import flop_registry

from autotune.plan.envelope import CATEGORIES

#: Op classes for the time model.
GEMM, ATTENTION, OTHER = "gemm", "attention", "other"
_ATTENTION_WORDS = ("attention", "sdpa", "flash")


@dataclass(frozen=True, slots=True)
class OpRecord:
    """One aten op of the step."""

    name: str
    op_class: str  # GEMM, ATTENTION or OTHER
    phase: str  # "forward", "backward", "optimizer"
    flops: int
    bytes_moved: int  # inputs read plus outputs written
    dtype: str  # of the first floating output ("float32", "bfloat16"...), or ""


@dataclass
class MemoryTimeline:
    """Live tensor bytes per category, and their peak over the step."""

    live: dict[int, tuple[int, str]] = field(default_factory=dict)  # storage key -> (bytes, category)
    by_category: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    peak_bytes: int = 0
    peak_live: dict[int, tuple[int, str]] = field(default_factory=dict)  # what was live at the peak
    peak_phase: str = ""
    #: Every storage's bytes, first category, and the marks it was live from and freed at (None:
    #: still live), and each mark's phase: :func:`~autotune.plan.envelope.memory_envelope` turns
    #: them into the live bytes by final category after every op.
    lifetimes: dict[int, list[Any]] = field(default_factory=dict)
    phases: list[str] = field(default_factory=list)
    #: Storages whose category became known later (a gradient made in the backward is one from
    #: the op that wrote it): the peak's breakdown uses the final category.
    final: dict[int, str] = field(default_factory=dict)
    #: Storages with a key from this one on were made during the step (see ``peak_new_bytes``).
    new_from: int = 0
    new_live_bytes: int = 0
    #: The peak of the bytes made during the step and still live: what an allocator that counts from
    #: the step's start sees (torch.profiler's ``profile_memory`` total), frees of older tensors aside.
    peak_new_bytes: int = 0

    def add(self, key: int, nbytes: int, category: str) -> None:
        """A storage is live from now on."""
        if key in self.live:
            return
        self.live[key] = (nbytes, category)
        self.lifetimes[key] = [nbytes, category, len(self.phases), None]
        self.by_category[category] += nbytes
        if key >= self.new_from:
            self.new_live_bytes += nbytes

    def free(self, key: int) -> None:
        """A storage was freed."""
        nbytes, category = self.live.pop(key, (0, ""))
        if category:
            self.lifetimes[key][3] = len(self.phases)
            self.by_category[category] -= nbytes
            if key >= self.new_from:
                self.new_live_bytes -= nbytes

    def recategorize(self, key: int, category: str) -> None:
        """A live storage is ``category`` from now on (and at the peak, if it was live then)."""
        self.final[key] = category
        if key in self.live:
            nbytes, old = self.live[key]
            self.by_category[old] -= nbytes
            self.by_category[category] += nbytes
            self.live[key] = (nbytes, category)

    def mark(self, phase: str) -> None:
        """After an op: a new peak keeps what is live."""
        self.peak_new_bytes = max(self.peak_new_bytes, self.new_live_bytes)
        self.phases.append(phase)
        total = sum(self.by_category.values())
        if total > self.peak_bytes:
            self.peak_bytes = total
            self.peak_live = dict(self.live)
            self.peak_phase = phase

    def peak_by_category(self) -> dict[str, int]:
        """The live bytes at the step's peak, by each storage's final category."""
        out = dict.fromkeys(CATEGORIES, 0)
        for key, (nbytes, category) in self.peak_live.items():
            out[self.final.get(key, category)] += nbytes
        return out


class StepTracer(TorchDispatchMode):
    """Records every op of a step and the live tensor memory after it (see the module's doc)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[OpRecord] = []
        self.memory = MemoryTimeline()
        self.phase = "forward"
        self._refs: dict[int, weakref.ref[Any]] = {}  # serial -> weak reference to the storage
        self._serial: dict[int, int] = {}  # id() of a live storage -> its serial (ids are reused)
        self._next = 0
        #: Storages an op wrote in place (``p.sub_(...)``, ``p.copy_(...)``): a hand-written update.
        self.written: set[int] = set()

    # -- what exists before the step ------------------------------------------------------------
    def track(self, tensors: Iterable[torch.Tensor], category: str) -> None:
        """Count tensors that already exist (parameters, optimizer state) as ``category``."""
        for t in tensors:
            self._track(t, category)
        self.memory.mark(self.phase)

    def _key(self, t: torch.Tensor) -> int | None:
        """The serial of a tensor's storage while it is live, else None."""
        return self._serial.get(id(t.untyped_storage()))

    def _track(self, t: torch.Tensor, category: str) -> None:
        storage = t.untyped_storage()
        key = self._serial.get(id(storage))
        if key is not None:
            self.memory.recategorize(key, category)
            return
        key = self._next
        self._next += 1
        self._serial[id(storage)] = key
        self.memory.add(key, storage.nbytes(), category)
        storage_id = id(storage)
        with contextlib.suppress(TypeError):  # a storage without weak references: counted to the end
            self._refs[key] = weakref.ref(storage, functools.partial(self._freed_ref, key, storage_id))

    def _freed_ref(self, key: int, storage_id: int, _ref: object) -> None:
        self._freed(key, storage_id)

    def _freed(self, key: int, storage_id: int) -> None:
        self._refs.pop(key, None)
        if self._serial.get(storage_id) == key:
            del self._serial[storage_id]
        self.memory.free(key)

    def start_step(self) -> None:
        """What is tracked from now on was made during the step (``MemoryTimeline.peak_new_bytes``)."""
        self.memory.new_from = self._next
        self.memory.new_live_bytes = self.memory.peak_new_bytes = 0

    def set_phase(self, phase: str) -> None:
        """The step's next phase: ``backward``, ``optimizer``."""
        self.phase = phase

    def recategorize(self, tensors: Iterable[torch.Tensor], category: str) -> None:
        """Count live tensors as ``category`` from now on (gradients once backward made them)."""
        for t in tensors:
            key = self._key(t)
            if key is not None:
                self.memory.recategorize(key, category)
            else:
                self._track(t, category)

    def _category(self, tensors: list[torch.Tensor]) -> str:
        """The category of the first tensor's storage while it is live, else ''."""
        key = self._key(tensors[0]) if tensors else None
        return self.memory.live.get(key, (0, ""))[1] if key is not None else ""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func._overloadpacket
        if func.namespace == "prim" or func.is_view or packet in _NO_KERNEL:
            return out  # metadata (a fake tensor's device) or a view: no kernel, no bytes moved
        formula = flop_registry.get(_FLOP_ALIASES.get(packet, packet))
        flops = 0
        if formula is not None:

            def shape(x: Any) -> Any:
                return x.shape if isinstance(x, torch.Tensor) else x

            try:
                flops = int(formula(*tree_map(shape, args), **tree_map(shape, kwargs),
                                    out_val=tree_map(shape, out)))  # fmt: skip
            except Exception:  # a formula that does not take these arguments: no FLOPs counted
                flops = 0
        inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        self._note_writes(func, args, kwargs)
        outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        moved = sum(t.numel() * t.element_size() for t in inputs + outputs)
        name = str(packet).removeprefix("aten.")
        op_class = (
            ATTENTION
            if any(w in name for w in _ATTENTION_WORDS)
            else GEMM
            if flops and name in _GEMM_OPS
            else OTHER
        )
        dtype = next((str(t.dtype).removeprefix("torch.") for t in outputs if t.is_floating_point()), "")
        self.ops.append(OpRecord(name, op_class, self.phase, flops, moved, dtype))
        new = "activations" if self.phase == "forward" else "temporaries"
        casting = packet is _aten._to_copy and self.phase == "forward"
        if casting and self._category(inputs[:1]) == "parameters":
            new = "parameter_casts"
        # a view of an input (a row of a dataset made before the step) allocates nothing
        viewed = {id(t.untyped_storage()) for t in inputs}
        for t in outputs:
            if self._key(t) is None and id(t.untyped_storage()) not in viewed:
                self._track(t, new)
        self.memory.mark(self.phase)
        return out

    def _note_writes(self, func: Any, args: Any, kwargs: dict[str, Any]) -> None:
        """Add the live storages ``func`` writes in place (its ``Tensor(a!)`` arguments) to ``written``."""
        schema = func._schema
        if not schema.is_mutable:
            return
        for i, arg in enumerate(schema.arguments):
            if arg.alias_info is None or not arg.alias_info.is_write:
                continue
            value = kwargs.get(arg.name, args[i] if i < len(args) and not arg.kwarg_only else None)
            for t in tree_flatten(value)[0]:
                key = self._key(t) if isinstance(t, torch.Tensor) else None
                if key is not None:
                    self.written.add(key)

    def wrote_any(self, tensors: Iterable[torch.Tensor]) -> bool:
        """Whether an op of the step wrote in place to one of ``tensors`` (parameters updated by hand)."""
        return any(self._key(t) in self.written for t in tensors)


_aten = torch.ops.aten
#: Views the op's ``is_view`` flag does not mark: they make no kernel either.
_NO_KERNEL = frozenset((_aten._unsafe_view,))
#: Ops whose FLOPs are another op's formula: the CPU's flash attention has the CUDA kernel's shapes.
_FLOP_ALIASES = {
    _aten._scaled_dot_product_flash_attention_for_cpu: _aten._scaled_dot_product_flash_attention,
    _aten._scaled_dot_product_flash_attention_for_cpu_backward: (
        _aten._scaled_dot_product_flash_attention_backward
    ),
}

_GEMM_OPS = frozenset(
    ("mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "convolution", "convolution_backward",
     "_convolution", "cudnn_convolution", "mkldnn_convolution", "_scaled_mm")
)  # fmt: skip


def run_step(
    tracer: StepTracer,
    forward_loss: Callable[[], torch.Tensor],
    params: Sequence[torch.Tensor],
    optimizer: torch.optim.Optimizer | None,
) -> None:
    """One training step under ``tracer``: forward and loss, backward, optimizer step, zero_grad.

    Tensors the forward keeps alive until the backward are activations; when the backward has run,
    what is still live from the forward is freed with the graph. Gradients and optimizer state are
    counted as such once they exist.
    """
    tracer.track(params, "parameters")
    if optimizer is not None:
        tracer.track(state_tensors(optimizer), "optimizer_state")
    tracer.set_phase("forward")
    with tracer:
        loss = forward_loss()
        tracer.set_phase("backward")
        loss.backward()
    del loss
    tracer.recategorize([p.grad for p in params if p.grad is not None], "gradients")
    tracer.set_phase("optimizer")
    if optimizer is not None:
        with tracer:
            optimizer.step()
        tracer.recategorize(state_tensors(optimizer), "optimizer_state")
        optimizer.zero_grad(set_to_none=True)


def state_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """The tensors of an optimizer's state (moments, step counts...)."""
    return [v for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]


__all__ = ["CATEGORIES", "MemoryTimeline", "OpRecord", "StepTracer", "run_step", "state_tensors"]
