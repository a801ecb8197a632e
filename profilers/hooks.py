"""The torch hooks that feed the step tracker, installed for a profiled region and removed after.

- forward: global module forward hooks while the step's models are discovered (warm-up), then
  hooks on those root modules only (cheaper, and they see keyword arguments);
- backward: ``torch.Tensor.backward`` and ``torch.autograd.backward`` wrapped; a scalar floating
  tensor being backpropagated is the step's loss, kept as a detached reference (never read here);
  ``GradScaler.scale`` is wrapped too, so the unscaled loss is kept when its scaled output is
  what gets backpropagated (fp16);
- optimizer: torch's global optimizer step pre/post hooks, and ``GradScaler.step`` wrapped so a
  step the scaler skips (inf/NaN gradients) still ends a step;
- data: ``DataLoader`` iterators' ``__next__`` wrapped.

Every hook body is guarded: an exception of ours calls ``on_fault`` once and the hooks stand down
(the loss capture stands down alone), the user's call goes on untouched. Calls from other threads
are ignored.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from profilers.timeline import BWD_B, BWD_E, DATA_B, DATA_E, FWD_B, FWD_E, OPT_B, OPT_E
from profilers.tracker import StepTracker


def holds_token_ids(tensor: torch.Tensor) -> bool:
    """int64/int32 inputs are taken for token ids (uint8 and bool inputs are images and masks)."""
    return tensor.dtype in (torch.int64, torch.int32)


#: Devices whose loss values the recorder thread can read safely (no collective, no graph execution).
LOSS_DEVICES = frozenset({"cpu", "cuda"})


def scalar_loss(value: Any) -> torch.Tensor | None:
    """``value`` (or the one tensor of a one-element list) when it can be a loss, else None.

    A loss is a plain tensor of one floating element on the CPU or a CUDA device. Tensor subclasses
    (DTensor and friends) are left alone: reading them later could run a collective or a graph on
    the recorder thread; so is a tensor of a CUDA graph being captured (its static memory changes
    with every replay).
    """
    if isinstance(value, list | tuple) and len(value) == 1:
        value = value[0]
    if type(value) is not torch.Tensor or value.numel() != 1 or not value.is_floating_point():
        return None
    if value.device.type not in LOSS_DEVICES:
        return None
    if value.is_cuda and torch.cuda.is_current_stream_capturing():
        return None
    return value


def read_losses(losses: Sequence[torch.Tensor]) -> list[float]:
    """The values of captured losses, in order (on the recorder thread, never the training's).

    CPU values are read directly. CUDA values are copied into pinned host memory without blocking,
    behind the work already queued on the device's default stream, and read once an event recorded
    after the copies has completed: only this thread waits, and no synchronizing call is made
    (``torch.cuda.set_sync_debug_mode`` stays quiet). The session hands a CUDA step over only once
    its end event completed, so its losses are computed by then, whatever stream made them.
    """
    values: list[float] = [0.0] * len(losses)
    on_cuda: dict[torch.device, list[int]] = {}
    for i, tensor in enumerate(losses):
        if tensor.is_cuda:
            on_cuda.setdefault(tensor.device, []).append(i)
        else:
            values[i] = float(tensor)
    for device, indexes in on_cuda.items():
        with torch.cuda.device(device):
            copies = [
                torch.empty_like(losses[i], device="cpu", pin_memory=True).copy_(losses[i], non_blocking=True)
                for i in indexes
            ]
            done = torch.cuda.Event()
            done.record()
            done.synchronize()
        for i, copy in zip(indexes, copies, strict=True):
            values[i] = float(copy)
    return values


def first_tensor(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> Any:
    """The first tensor among positional then keyword arguments (one level into lists/dicts)."""
    for value in list(args) + list((kwargs or {}).values()):
        if isinstance(value, torch.Tensor):
            return value
        if isinstance(value, list | tuple):
            for item in value:
                if isinstance(item, torch.Tensor):
                    return item
        if isinstance(value, dict):
            for item in value.values():
                if isinstance(item, torch.Tensor):
                    return item
    return None


class TorchHooks:
    """Installs and removes the hooks; translates calls into tracker events."""

    def __init__(
        self,
        tracker: StepTracker,
        on_fault: Callable[[str, BaseException], None],
        on_first_cuda_input: Callable[[], None] | None = None,
        samples_per_step: int | None = None,
    ) -> None:
        self.tracker = tracker
        self.on_fault = on_fault
        self.on_first_cuda_input = on_first_cuda_input
        self.samples_per_step = samples_per_step
        self.active = False
        self.roots: dict[int, Any] = {}  # id -> module seen at depth 0
        self.step_root: int | None = None  # id of the module whose inputs count the step's samples
        self.precision_probe: Callable[[Any], None] | None = None
        self.capture_loss = True  # False once the loss capture faulted
        #: The last ``GradScaler.scale`` call: (weak reference to its output, the detached loss).
        self._scaled: tuple[weakref.ref[torch.Tensor], torch.Tensor] | None = None
        self._thread = threading.get_ident()
        self._fwd_depth = 0
        self._bwd_depth = 0
        self._opt_depth = 0
        self._data_depth = 0
        self._fwd_marked = False
        self._handles: list[Any] = []
        self._global_fwd: list[Any] = []
        self._patches: list[tuple[Any, str, Any]] = []
        self._cuda_seen = False

    # -- install / remove -----------------------------------------------------------------------
    def install(self) -> None:
        """Install every hook. Raises only if torch itself is unusable."""
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim_module

        self._thread = threading.get_ident()
        self._global_fwd = [
            nn_module.register_module_forward_pre_hook(self._global_pre),
            nn_module.register_module_forward_hook(self._global_post, always_call=True),
        ]
        self._handles = [
            optim_module.register_optimizer_step_pre_hook(self._opt_pre),
            optim_module.register_optimizer_step_post_hook(self._opt_post),
        ]
        self._patch(torch.Tensor, "backward", self._wrap_backward(torch.Tensor.backward))
        self._patch(torch.autograd, "backward", self._wrap_backward(torch.autograd.backward))
        from torch.utils.data import dataloader

        base_iter = dataloader._BaseDataLoaderIter
        self._patch(base_iter, "__next__", self._wrap(base_iter.__next__, DATA_B, DATA_E, "_data_depth"))
        scaler_cls = getattr(getattr(torch, "amp", None), "GradScaler", None)
        if scaler_cls is not None and hasattr(scaler_cls, "step"):
            self._patch(scaler_cls, "step", self._wrap(scaler_cls.step, OPT_B, OPT_E, "_opt_depth"))
        if scaler_cls is not None and hasattr(scaler_cls, "scale"):
            self._patch(scaler_cls, "scale", self._wrap_scale(scaler_cls.scale))
        self.active = True

    def _patch(self, owner: Any, attr: str, replacement: Any) -> None:
        original = owner.__dict__[attr] if attr in owner.__dict__ else getattr(owner, attr)
        setattr(owner, attr, replacement)
        self._patches.append((owner, attr, original))

    def remove(self) -> None:
        """Remove every hook and restore every patched function. Safe to call twice."""
        self.active = False
        for handle in self._handles + self._global_fwd:
            with contextlib.suppress(Exception):  # removing a hook must not fail the user's run
                handle.remove()
        self._handles, self._global_fwd = [], []
        for owner, attr, original in reversed(self._patches):
            with contextlib.suppress(Exception):
                setattr(owner, attr, original)
        self._patches = []
        self._scaled = None

    def narrow_to_roots(self) -> None:
        """Swap the global forward hooks for hooks on the root modules seen so far."""
        if not self.active or not self._global_fwd or not self.roots:
            return
        for handle in self._global_fwd:
            handle.remove()
        self._global_fwd = []
        for module in self.roots.values():
            self._handles.append(module.register_forward_pre_hook(self._root_pre, with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._root_post, always_call=True))

    # -- guards ---------------------------------------------------------------------------------
    def _fault(self, exc: BaseException) -> None:
        self.remove()
        self.on_fault("step hooks", exc)

    # -- forward --------------------------------------------------------------------------------
    def _global_pre(self, module: Any, args: tuple[Any, ...]) -> None:
        if self.active and threading.get_ident() == self._thread:
            self._fwd_begin(module, args, None)

    def _global_post(self, module: Any, args: Any, output: Any) -> None:
        if self.active and threading.get_ident() == self._thread:
            self._fwd_end()

    def _root_pre(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self.active and threading.get_ident() == self._thread:
            self._fwd_begin(module, args, kwargs)

    def _root_post(self, module: Any, args: Any, output: Any) -> None:
        if self.active and threading.get_ident() == self._thread:
            self._fwd_end()

    def _fwd_begin(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> None:
        try:
            depth = self._fwd_depth
            self._fwd_depth = depth + 1
            if depth or self._bwd_depth or self._opt_depth:
                return  # nested module, or a recompute inside backward (activation checkpointing)
            key = id(module)
            if key not in self.roots:
                self.roots[key] = module
            samples = tokens = None
            if self.step_root is None:
                self.step_root = key
            if key == self.step_root:
                tensor = first_tensor(args, kwargs)
                if tensor is not None and tensor.dim() > 0:
                    samples = int(tensor.shape[0])
                    if holds_token_ids(tensor):
                        tokens = int(tensor.numel())
                    if not self._cuda_seen and tensor.is_cuda:
                        self._cuda_seen = True
                        if self.on_first_cuda_input is not None:
                            self.on_first_cuda_input()
                if self.samples_per_step is not None:
                    samples, tokens = None, None
                if self.precision_probe is not None:
                    self.precision_probe(module)
            self._fwd_marked = True
            self.tracker.begin(FWD_B, samples, tokens)
        except Exception as exc:
            self._fault(exc)

    def _fwd_end(self) -> None:
        try:
            if self._fwd_depth == 0:
                return
            self._fwd_depth -= 1
            if self._fwd_depth == 0 and self._fwd_marked:
                self._fwd_marked = False
                self.tracker.end(FWD_E)
        except Exception as exc:
            self._fault(exc)

    # -- optimizer ------------------------------------------------------------------------------
    def _opt_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self.active or threading.get_ident() != self._thread:
            return
        try:
            self._opt_depth += 1
            if self._opt_depth == 1:
                self.tracker.begin(OPT_B)
        except Exception as exc:
            self._fault(exc)

    def _opt_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self.active or threading.get_ident() != self._thread:
            return
        try:
            if self._opt_depth == 0:
                return
            self._opt_depth -= 1
            if self._opt_depth == 0:
                self.tracker.end(OPT_E)
        except Exception as exc:
            self._fault(exc)

    # -- wrapped functions (backward, scaler step, DataLoader next) -----------------------------
    def _wrap(self, fn: Callable[..., Any], begin: int, end: int, depth_attr: str) -> Callable[..., Any]:
        hooks = self

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not hooks.active or threading.get_ident() != hooks._thread:
                return fn(*args, **kwargs)
            outer = hooks._enter(begin, depth_attr)
            try:
                return fn(*args, **kwargs)
            finally:
                if outer:
                    hooks._exit(end, depth_attr)

        return wrapper

    def _wrap_backward(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``Tensor.backward`` / ``autograd.backward``: a backward phase, carrying the loss."""
        hooks = self

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not hooks.active or threading.get_ident() != hooks._thread:
                return fn(*args, **kwargs)
            loss = None
            if hooks._bwd_depth == 0 and hooks.capture_loss:
                loss = hooks._loss_of(args[0] if args else kwargs.get("tensors"))
            outer = hooks._enter(BWD_B, "_bwd_depth", loss)
            try:
                return fn(*args, **kwargs)
            finally:
                if outer:
                    hooks._exit(BWD_E, "_bwd_depth")

        return wrapper

    def _wrap_scale(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``GradScaler.scale``: remember which output stands for which (unscaled) loss."""
        hooks = self

        @functools.wraps(fn)
        def wrapper(scaler: Any, outputs: Any, *args: Any, **kwargs: Any) -> Any:
            result = fn(scaler, outputs, *args, **kwargs)
            if hooks.active and hooks.capture_loss and threading.get_ident() == hooks._thread:
                hooks._note_scaled(outputs, result)
            return result

        return wrapper

    # -- loss capture (no host sync: detached references only) ---------------------------------
    def _loss_fault(self, exc: BaseException) -> None:
        self.capture_loss = False
        self._scaled = None
        self.on_fault("loss capture", exc)

    def _note_scaled(self, outputs: Any, result: Any) -> None:
        try:
            loss = scalar_loss(outputs)
            if loss is not None and isinstance(result, torch.Tensor) and result is not outputs:
                self._scaled = (weakref.ref(result), loss.detach())
        except Exception as exc:
            self._loss_fault(exc)

    def _loss_of(self, target: Any) -> torch.Tensor | None:
        """The detached loss being backpropagated (the unscaled one under a GradScaler), or None."""
        try:
            tensor = scalar_loss(target)
            if tensor is None:
                return None
            scaled = self._scaled
            if scaled is not None and scaled[0]() is tensor:
                self._scaled = None
                return scaled[1]
            return tensor.detach()
        except Exception as exc:
            self._loss_fault(exc)
            return None

    def _enter(self, code: int, depth_attr: str, loss: Any = None) -> bool:
        try:
            depth = getattr(self, depth_attr)
            setattr(self, depth_attr, depth + 1)
            if depth == 0 and not (code == DATA_B and (self._fwd_depth or self._bwd_depth)):
                self.tracker.begin(code, loss=loss)
            return True
        except Exception as exc:
            self._fault(exc)
            return False

    def _exit(self, code: int, depth_attr: str) -> None:
        try:
            depth = getattr(self, depth_attr) - 1
            setattr(self, depth_attr, depth)
            if depth == 0 and not (code == DATA_E and (self._fwd_depth or self._bwd_depth)):
                self.tracker.end(code)
        except Exception as exc:
            self._fault(exc)
