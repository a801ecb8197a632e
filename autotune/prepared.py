"""``autotune.prepare()``: apply the built-in knobs in user code, the Accelerate way.

::

    prep = autotune.prepare(model, optimizer)      # knobs come from the trial's environment
    plan = autotune.batch_plan(global_batch=256)   # micro_batch × grad_accum × world_size
    for step_batches in batches_of(plan):          # plan.grad_accum micro-batches of plan.micro_batch
        for i, (x, y) in enumerate(step_batches):
            with prep.no_sync(i < plan.grad_accum - 1):   # ddp: all-reduce on the last one only
                with prep.autocast():
                    loss = loss_fn(prep.model(x), y) / plan.grad_accum
                prep.backward(loss)
        prep.step()

``autotune.autocast()`` and ``autotune.backward(loss)`` do the same through the most recent
:class:`Prepared` of the process. Each knob's value comes from the trial (:func:`autotune.param`),
else from the argument given in code, else from :data:`autotune.knobs.KNOBS`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    CheckpointWrapper,
    checkpoint_wrapper,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.nn.parallel import DistributedDataParallel
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

from autotune.knobs import knob_value, resolve_world_size
from autotune.repeated_blocks import repeated_blocks
from profilers.runtime.launch_env import LaunchEnv

_WARNED: set[str] = set()
_CURRENT: Prepared | None = None


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=4)  # the caller of prepare()


@dataclass
class Prepared:
    """A model and optimizer with the knobs applied; drives autocast, backward and the step.

    Train through ``model`` (it may be wrapped: DDP, FSDP, compiled), under :meth:`autocast`, with
    :meth:`backward` and :meth:`step`, which use the gradient scaler when precision is fp16.
    """

    model: nn.Module
    optimizer: torch.optim.Optimizer | None
    scaler: torch.amp.GradScaler | None
    device: torch.device
    precision: str
    layout: str
    activation_checkpointing: bool = False
    compile: bool = False
    reshard_after_forward: bool = True
    #: The autocast dtype (None for fp32 and tf32, and for bf16 under fsdp: see ``param_dtype``).
    autocast_dtype: torch.dtype | None = None
    #: Under fsdp with bf16: FSDP's MixedPrecisionPolicy computes in this dtype (bf16 parameters
    #: gathered, fp32 gradient reduction and master shards, the output in fp32), without autocast.
    param_dtype: torch.dtype | None = None
    #: Whether TF32 matmuls are really on (tf32 asked for on an Ampere or newer CUDA device).
    tf32: bool = False
    #: Blocks (of the largest ``nn.ModuleList``) checkpointed or sharded one by one; 0 when neither.
    blocks: int = 0
    rank: int = 0
    world_size: int = 1
    _sync_root: nn.Module | None = field(default=None, repr=False)
    _owns_process_group: bool = field(default=False, repr=False)

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """A context for the forward pass and loss: autocast to bf16/fp16, else nothing."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def backward(self, loss: torch.Tensor) -> None:
        """``loss.backward()``, through the gradient scaler when there is one."""
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()

    def _optimizer(self) -> torch.optim.Optimizer:
        if self.optimizer is None:
            raise RuntimeError("no optimizer was prepared: pass it to autotune.prepare(model, optimizer)")
        return self.optimizer

    def clip_grad_norm_(self, max_norm: float) -> torch.Tensor:
        """Clip the gradients' total norm to ``max_norm`` (unscaled first under fp16); the norm."""
        if self.scaler is not None:
            self.scaler.unscale_(self._optimizer())
        return torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)

    def step(self) -> None:
        """Optimizer step (through the scaler under fp16), then zero the gradients."""
        opt = self._optimizer()
        if self.scaler is None:
            opt.step()
        else:
            self.scaler.step(opt)
            self.scaler.update()
        opt.zero_grad(set_to_none=True)

    @contextlib.contextmanager
    def no_sync(self, skip: bool = True) -> Iterator[None]:
        """With ``skip`` under ddp, no gradient all-reduce inside: the gradients accumulate locally.

        Wrap forward and backward of every micro-batch but the last of an optimizer step. Under
        fsdp the gradients are still reduce-scattered after every micro-batch and their shards
        accumulate: FSDP2 without gradient sync would hold every gradient unsharded, upcast to
        fp32 under the bf16 policy (4 bytes a parameter on every rank, more than the whole sharded
        state), which is what fsdp is chosen to avoid. The plan's fsdp rows hold and time it so.
        """
        root = self._sync_root
        if skip and self.layout == "ddp" and root is not None:
            with root.no_sync():  # type: ignore[operator]
                yield
        else:
            yield

    def close(self) -> None:
        """Destroy the process group if :func:`prepare` created it."""
        if self._owns_process_group:
            if dist.is_initialized():
                dist.destroy_process_group()
            self._owns_process_group = False


def _current() -> Prepared:
    if _CURRENT is None:
        raise RuntimeError("call autotune.prepare(model, optimizer) before autotune.autocast()/backward()")
    return _CURRENT


def autocast() -> contextlib.AbstractContextManager[Any]:
    """:meth:`Prepared.autocast` of the most recent :func:`prepare` in this process."""
    return _current().autocast()


def backward(loss: torch.Tensor) -> None:
    """:meth:`Prepared.backward` of the most recent :func:`prepare` in this process."""
    _current().backward(loss)


def _blocks(model: nn.Module) -> list[nn.Module] | None:
    """The model's repeated blocks, however they are held (:mod:`autotune.repeated_blocks`), or None."""
    return [slot.block for slot in repeated_blocks(model)] or None


def _selective_policy(counts: dict[str, int], ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
    """Per-op selective checkpointing as torchtitan's: keep matrix products' and attention's outputs.

    Every second matrix product of a block is recomputed rather than kept (torchtitan's ``op``
    mode), counted in ``counts`` (one per checkpointed call; torch asks the policy in the forward
    and replays its answers in the recomputation, and a recomputation that asked would count apart).
    Linear layers with a bias run ``addmm``, without one ``mm``: both are matrix products here.
    """
    if func in _matmuls():
        key = "recompute" if ctx.is_recompute else "forward"
        counts[key] = counts.get(key, 0) + 1
        keep = counts[key] % 2 == 1
    else:
        keep = func in _kept_outputs()
    return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE


def _matmuls() -> frozenset[Any]:

    aten = torch.ops.aten
    return frozenset((aten.mm.default, aten.addmm.default))


def _kept_outputs() -> frozenset[Any]:
    """Attention kernels and reductions torchtitan's selective checkpointing keeps (matmuls apart)."""
    aten = torch.ops.aten
    names = (
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
    )
    ops = [getattr(aten, n).default for n in names if hasattr(aten, n)]
    return frozenset((*ops, aten.max.default))


def selective_context() -> Any:
    """The checkpoint context of :func:`_selective_policy` (one per checkpointed call)."""
    return create_selective_checkpoint_contexts(functools.partial(_selective_policy, {}))


def _checkpoint_blocks(model: nn.Module, selective: bool = False) -> int:
    """Wrap each block for non-reentrant activation checkpointing, in place; how many.

    ``selective``: per-op, as torchtitan's ``op`` mode (:func:`_selective_policy`): the blocks keep
    their matrix products' outputs (every other one) and attention's, and recompute the rest.

    A Hugging Face model's K/V cache goes off, as its own ``gradient_checkpointing_enable`` turns it
    off in training: every recomputed forward would append to the cache, and the step end holding
    keys and values for twice the sequence.
    """
    slots = repeated_blocks(model)
    if not slots:
        raise ValueError(
            f"activation_checkpointing needs repeated blocks in {type(model).__name__} (two or more "
            "modules of one kind side by side, in an nn.ModuleList, an nn.Sequential or any module); "
            "it has none"
        )
    config = getattr(model, "config", None)
    if config is not None and getattr(config, "use_cache", False) is True:
        config.use_cache = False
    for slot in slots:
        if not isinstance(slot.block, CheckpointWrapper):
            extra = {"context_fn": selective_context} if selective else {}
            impl = CheckpointImpl.NO_REENTRANT
            wrapped = checkpoint_wrapper(slot.block, checkpoint_impl=impl, **extra)
            setattr(slot.parent, slot.name, wrapped)
    return len(slots)


def _device(explicit: str | torch.device | None, distributed: bool) -> torch.device:

    device = torch.device(explicit) if explicit is not None else None
    if device is None:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda" and device.index is None:
        local = LaunchEnv.read().local_rank if distributed else torch.cuda.current_device()
        device = torch.device("cuda", local)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


def _set_precision(precision: str, device: torch.device) -> tuple[torch.dtype | None, bool]:
    """Set the fp32 matmul mode for ``precision``; the autocast dtype and whether TF32 is on."""
    tf32 = precision == "tf32"
    if tf32 and not (device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 0)):
        _warn_once(f"precision 'tf32' needs an Ampere or newer CUDA GPU; on {device} it runs as fp32")
        tf32 = False
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    # Convolutions and RNNs follow cuDNN's own flag, TF32 by default whatever the matmul mode:
    # without this an "fp32" conv net still runs its convolutions in TF32. The legacy flag, as
    # the matmul call above is legacy API (torch refuses to read flags set through a mix of both).
    torch.backends.cudnn.allow_tf32 = tf32
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported(False):
        _warn_once(f"precision 'bf16' is emulated on {torch.cuda.get_device_name(device)}: expect it slow")
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision), tf32


def _ensure_process_group(layout: str, device: torch.device) -> bool:
    """Initialize the default process group from torchrun's variables if needed; True if it did."""
    if dist.is_initialized():
        return False
    missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if v not in os.environ]
    if missing:
        raise RuntimeError(
            f"layout {layout!r} runs one process per rank: launch with torchrun "
            f"(python -m torch.distributed.run) or call torch.distributed.init_process_group() "
            f"first (not set: {', '.join(missing)})"
        )
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return True


def buffers_beside_parameters(model: nn.Module) -> bool:
    """Whether a module holds floating-point buffers and parameters of its own (BatchNorm).

    Such a model cannot run under FSDP's ``MixedPrecisionPolicy(param_dtype=...)``, which casts
    parameters and never buffers: ``prepare`` keeps autocast for it, and the plan its rows.
    """
    for module in model.modules():
        own_buffers = any(b.is_floating_point() for b in module.buffers(recurse=False))
        if own_buffers and any(True for _ in module.parameters(recurse=False)):
            return True
    return False


def _fully_shard(
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None,
    reshard: bool,
    param_dtype: torch.dtype | None = None,
) -> int:
    """FSDP2: shard each block, then the root; point ``optimizer`` at the new (DTensor) parameters.

    ``reshard``: the blocks free their gathered parameters after their forward (the root keeps
    its own until its backward, as FSDP2 keeps a root by default).

    ``param_dtype`` (bf16): FSDP's mixed precision, as torchtitan trains: parameters gathered and
    computed in it, gradients reduced in fp32 into fp32 shards (the master weights), the root's
    output cast to fp32 for the loss. Returns how many blocks were sharded one by one.
    """
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # 0.9 s: only when sharding

    if optimizer is not None and optimizer.state:
        raise ValueError("layout 'fsdp' replaces the parameters: prepare the optimizer before its first step")
    names = {id(p): n for n, p in model.named_parameters()}
    device_type = next(model.parameters()).device.type
    mesh = init_device_mesh(device_type, (dist.get_world_size(),))
    blocks = _blocks(model) or ()
    policy = MixedPrecisionPolicy(
        param_dtype=param_dtype, reduce_dtype=torch.float32 if param_dtype else None
    )
    for block in blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    root = MixedPrecisionPolicy(param_dtype, policy.reduce_dtype, torch.float32 if param_dtype else None)
    # the root keeps its parameters gathered from its forward to its backward, FSDP2's own default
    # for a root (its backward needs them at once), whatever the blocks do; the plan holds them so
    if reshard:
        fully_shard(model, mesh=mesh, mp_policy=root)
    else:
        fully_shard(model, mesh=mesh, mp_policy=root, reshard_after_forward=False)
    if optimizer is not None:
        new = dict(model.named_parameters())
        for group in optimizer.param_groups:
            try:
                group["params"] = [new[names[id(p)]] for p in group["params"]]
            except KeyError:
                raise ValueError("the optimizer holds parameters that are not the model's") from None
    return len(blocks)


def prepare(
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    precision: str | None = None,
    layout: str | None = None,
    activation_checkpointing: bool | None = None,
    compile: bool | None = None,
    reshard_after_forward: bool | None = None,
    device: str | torch.device | None = None,
) -> Prepared:
    """Apply the built-in knobs to ``model`` (in place where torch does) and ``optimizer``.

    Each knob argument is the user's default; a trial's value (:func:`param`) wins over it, and an
    unset knob takes its default from :data:`KNOBS`. Order: device placement (CUDA when available
    unless ``device`` says otherwise), precision, activation checkpointing of the blocks of the
    largest ``nn.ModuleList``, layout (``ddp``: DistributedDataParallel; ``fsdp``: ``fully_shard``
    on each block, then the root), then ``torch.compile``. ``ddp`` and ``fsdp`` use the initialized
    process group or create one from torchrun's variables (gloo on CPU, NCCL on CUDA). Under fsdp
    the optimizer is pointed at the sharded parameters in place, so create it before its first
    step. fp16 autocast runs on CPU too (slow without native fp16 matmuls), with a GradScaler. bf16
    under fsdp is FSDP's mixed-precision policy (bf16 parameters and compute, fp32 reduction and
    master weights, as torchtitan trains), not autocast.
    """
    global _CURRENT
    knobs = {
        "precision": knob_value("precision", precision),
        "layout": knob_value("layout", layout),
        "activation_checkpointing": knob_value("activation_checkpointing", activation_checkpointing),
        "compile": knob_value("compile", compile),
        "reshard_after_forward": knob_value("reshard_after_forward", reshard_after_forward),
    }
    layout_, distributed = knobs["layout"], knobs["layout"] != "single"
    dev = _device(device, distributed)
    owns_group = _ensure_process_group(layout_, dev) if distributed else False
    rank, world = 0, 1
    if distributed:
        rank, world = dist.get_rank(), dist.get_world_size()
        resolve_world_size(None)  # a tuned world_size must match the job's
    dtype, tf32 = _set_precision(knobs["precision"], dev)
    scaler = torch.amp.GradScaler(dev.type) if knobs["precision"] == "fp16" else None
    model.to(dev)
    blocks = _checkpoint_blocks(model) if knobs["activation_checkpointing"] else 0
    wrapped: nn.Module = model
    param_dtype = None
    if layout_ == "ddp":
        wrapped = DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None)
    elif layout_ == "fsdp":
        # bf16 under FSDP is its mixed-precision policy, not autocast (fp16 keeps autocast and a scaler);
        # a module whose fp32 buffers meet its bf16 parameters (BatchNorm's running statistics: FSDP
        # casts parameters, never buffers) cannot run so, and keeps autocast
        param_dtype = dtype if dtype == torch.bfloat16 and not buffers_beside_parameters(model) else None
        if dtype == torch.bfloat16 and param_dtype is None:
            _warn_once("bf16 under fsdp runs as autocast: the model keeps fp32 buffers beside parameters")
        dtype = None if param_dtype is not None else dtype
        blocks = _fully_shard(model, optimizer, knobs["reshard_after_forward"], param_dtype) or blocks
    sync_root = wrapped
    if knobs["compile"]:
        wrapped = torch.compile(wrapped)  # type: ignore[assignment]
    _CURRENT = Prepared(
        model=wrapped,
        optimizer=optimizer,
        scaler=scaler,
        device=dev,
        **knobs,
        autocast_dtype=dtype,
        param_dtype=param_dtype,
        tf32=tf32,
        blocks=blocks,
        rank=rank,
        world_size=world,
        _sync_root=sync_root,
        _owns_process_group=owns_group,
    )
    return _CURRENT
