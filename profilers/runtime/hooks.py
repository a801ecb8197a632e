"""The torch hooks that feed the step tracker, installed for a profiled region and removed after.

- forward: global module forward hooks while the step's models are discovered (warm-up), then a
  wrapper of the root modules' classes' ``__call__`` that acts for those instances only (cheaper).
  Nothing is attached to a module instance, so a model stays picklable and copyable
  (``torch.save(model)``, ``copy.deepcopy``) while it is profiled. A forward under
  ``no_grad``/``inference_mode`` or of a model in eval mode is evaluation: its own phase, and its
  inputs are no training samples. A forward inside ``optimizer.step(closure)`` is a forward;
  re-evaluating the same input inside one optimizer step (LBFGS) adds no samples;
- backward: ``torch.Tensor.backward`` and ``torch.autograd.backward`` wrapped; a scalar floating
  tensor being backpropagated is the step's loss, kept as a detached reference (never read here);
  ``GradScaler.scale`` is wrapped too, so the unscaled loss is kept when its scaled output is
  what gets backpropagated (fp16);
- optimizer: torch's global optimizer step pre/post hooks, and ``GradScaler.step`` wrapped so a
  step the scaler skips (inf/NaN gradients) still ends a step;
- data: ``DataLoader`` iterators' ``__next__`` wrapped (a fetch with gradients off is evaluation).

Every hook body is guarded: an exception of ours calls ``on_fault`` once and the hooks stand down
(the loss capture stands down alone), the user's call goes on untouched. Calls from other threads
are ignored.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from profilers.contract.profile_summary import SamplesSource
from profilers.runtime.timeline import (
    BWD_B,
    BWD_E,
    DATA_B,
    DATA_E,
    EVAL_B,
    EVAL_E,
    FWD_B,
    FWD_E,
    OPT_B,
    OPT_E,
)
from profilers.runtime.tracker import StepTracker


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
            done = torch.cuda.Event(blocking=True)  # this thread sleeps on it instead of spinning a core
            done.record()
            done.synchronize()
        for i, copy in zip(indexes, copies, strict=True):
            values[i] = float(copy)
    return values


#: Keyword arguments that name a model's main input, preferred over the other tensors (Hugging Face
#: models are called with ``input_ids=..., attention_mask=..., labels=...`` in any order).
INPUT_KWARGS = ("input_ids", "inputs_embeds", "pixel_values", "input_features", "input_values", "x", "input")


def _tensor_in(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    items = value if isinstance(value, list | tuple) else value.values() if isinstance(value, dict) else ()
    return next((item for item in items if isinstance(item, torch.Tensor)), None)


def input_tensor(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> tuple[torch.Tensor | None, str]:
    """A model call's main input and where it was found (``"args[0]"``, ``"input_ids"``...).

    The first tensor among the positional arguments (one level into lists and dicts), else the
    first of :data:`INPUT_KWARGS` given as a tensor, else the first tensor among the keyword arguments.
    """
    for i, value in enumerate(args):
        tensor = _tensor_in(value)
        if tensor is not None:
            return tensor, f"args[{i}]"
    kwargs = kwargs or {}
    for name in INPUT_KWARGS:
        if isinstance(kwargs.get(name), torch.Tensor):
            return kwargs[name], name
    for name, value in kwargs.items():
        tensor = _tensor_in(value)
        if tensor is not None:
            return tensor, name
    return None, ""


def nested_batch_size(module: Any, args: tuple[Any, ...]) -> int | None:
    """The batch size a recurrent or attention layer sees, from its own ``batch_first`` flag.

    ``nn.RNN``/``LSTM``/``GRU`` and ``nn.MultiheadAttention`` take ``[seq, batch, feature]`` unless
    ``batch_first``: they tell which dimension of the model's input is the batch.
    """
    if not isinstance(module, torch.nn.RNNBase | torch.nn.MultiheadAttention):
        return None
    x = args[0] if args else None
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        return None  # unbatched, or a PackedSequence
    return int(x.shape[0] if module.batch_first else x.shape[1])


def _trainable(module: Any) -> bool:
    """Whether ``module`` holds a parameter that requires a gradient (what a trained model has)."""
    return any(p.requires_grad for p in module.parameters())


class TorchHooks:
    """Installs and removes the hooks; translates calls into tracker events."""

    def __init__(
        self,
        tracker: StepTracker,
        on_fault: Callable[[str, BaseException], None],
        on_first_cuda_input: Callable[[Any], None] | None = None,
    ) -> None:
        self.tracker = tracker
        self.on_fault = on_fault
        self.on_first_cuda_input = on_first_cuda_input
        self.active = False
        self.roots: dict[int, type] = {}  # id -> class of each module seen at depth 0 (no reference kept)
        self.step_root: int | None = None  # id of the module whose inputs count the step's samples
        #: How the samples of a step are found, once known: the model, the input, its batch dimension.
        self.samples_source: SamplesSource | None = None
        self._batch_dims: dict[int, int] = {}  # root id -> batch dimension of its input
        self._nested_batch: int | None = None  # batch size a recurrent/attention layer saw (discovery)
        self._opt_inputs: set[tuple[int, tuple[int, ...]]] = set()  # inputs counted in this optimizer step
        self._fwd_end_code = FWD_E
        self._narrow_when_done = False  # narrow_to_roots was asked for during a forward
        self._probe_at: Any = None  # the step model, while its precision is to be probed inside its forward
        self.precision_probe: Callable[[Any], None] | None = None
        #: Called once with the step's model, at its first training forward.
        self.on_step_model: Callable[[Any], None] | None = None
        self.capture_loss = True  # False once the loss capture faulted
        #: The last ``GradScaler.scale`` call: (weak reference to its output, the detached loss).
        self._scaled: tuple[weakref.ref[torch.Tensor], torch.Tensor] | None = None
        self._thread = threading.get_ident()
        self._fwd_depth = 0
        self._bwd_depth = 0
        self._opt_depth = 0
        self._data_depth = 0
        self._data_end: int | None = None  # how the open DataLoader fetch ends (DATA_E, EVAL_E or none)
        self._fwd_marked = False
        self._handles: list[Any] = []
        self._global_fwd: list[Any] = []
        self._patches: list[tuple[Any, str, Any, bool]] = []  # owner, name, original, owner had it
        self._cuda_seen = False

    # -- install / remove -----------------------------------------------------------------------
    def install(self) -> None:
        """Install every hook. Raises only if torch itself is unusable."""
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim_module

        self._thread = threading.get_ident()
        self._global_fwd = [
            nn_module.register_module_forward_pre_hook(self._global_pre),
            nn_module.register_module_forward_hook(self._global_post, with_kwargs=True, always_call=True),
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
        own = attr in owner.__dict__
        original = owner.__dict__[attr] if own else getattr(owner, attr)
        setattr(owner, attr, replacement)
        self._patches.append((owner, attr, original, own))

    def remove(self) -> None:
        """Remove every hook and restore every patched function. Safe to call twice."""
        self.active = False
        for handle in self._handles + self._global_fwd:
            with contextlib.suppress(Exception):  # removing a hook must not fail the user's run
                handle.remove()
        self._handles, self._global_fwd = [], []
        for owner, attr, original, own in reversed(self._patches):
            with contextlib.suppress(Exception):
                if own:
                    setattr(owner, attr, original)
                else:  # inherited: remove ours, the class is as it was
                    delattr(owner, attr)
        self._patches = []
        self._scaled = None

    def narrow_to_roots(self) -> None:
        """Swap the global forward hooks for a wrapper of the root modules' classes' ``__call__``.

        The wrapper acts for the root instances only (an id lookup for every other instance of the
        class) and sees keyword arguments. Nothing is registered on the modules themselves.
        """
        if not self.active or not self._global_fwd or not self.roots:
            return
        if self._fwd_depth:  # called from inside a forward: its global post hook must still fire
            self._narrow_when_done = True
            return
        self._narrow_when_done = False
        for handle in self._global_fwd:
            handle.remove()
        self._global_fwd = []
        for cls in dict.fromkeys(self.roots.values()):
            self._patch(cls, "__call__", self._wrap_call(cls.__call__))

    def _wrap_call(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        hooks = self

        def begin(module: Any, args: tuple[Any, ...]) -> bool:
            if not hooks.active or id(module) not in hooks.roots or threading.get_ident() != hooks._thread:
                return False
            hooks._fwd_begin(module, args)
            return True

        def end(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            hooks._fwd_end(module, args, kwargs)

        if "torch._dynamo" in sys.modules:
            # The script compiles (dynamo is loaded: importing it here would cost every other user
            # ~tens of MiB and seconds): a compiled wrapper (HF Trainer's --torch_compile) traces the
            # root's __call__, and our bookkeeping must run outside its graph, as one silent break
            # rather than dynamo's warning that it cannot trace threading.get_ident.
            begin, end = torch.compiler.disable(begin), torch.compiler.disable(end)

        @functools.wraps(fn)
        def __call__(module: Any, *args: Any, **kwargs: Any) -> Any:
            if not begin(module, args):
                return fn(module, *args, **kwargs)
            try:
                return fn(module, *args, **kwargs)
            finally:
                end(module, args, kwargs)

        return __call__

    # -- guards ---------------------------------------------------------------------------------
    def _fault(self, exc: BaseException) -> None:
        self.remove()
        self.on_fault("step hooks", exc)

    # -- forward --------------------------------------------------------------------------------
    def _own_thread(self) -> bool:
        """Whether this call comes from the training thread.

        Inside a region torch.compile traces it does (dynamo traces the thread that runs it), and
        the check must not reach ``threading.get_ident``, which dynamo cannot trace (a graph break
        at every module, and a warning in the user's log).
        """
        return torch.compiler.is_compiling() or threading.get_ident() == self._thread

    def _global_pre(self, module: Any, args: tuple[Any, ...]) -> None:
        if self.active and self._own_thread():
            self._fwd_begin(module, args)

    def _global_post(self, module: Any, args: Any, *rest: Any) -> None:
        # (kwargs, output) normally; (output,) alone when the forward raised: torch 2.13 calls an
        # always-call global hook without its kwargs on that path, whatever it registered with.
        if self.active and self._own_thread():
            kwargs = rest[0] if len(rest) == 2 and isinstance(rest[0], dict) else None
            self._fwd_end(module, args, kwargs)

    def _fwd_begin(self, module: Any, args: tuple[Any, ...]) -> None:
        try:
            depth = self._fwd_depth
            self._fwd_depth = depth + 1
            if depth or self._bwd_depth:
                # A nested module, or a recompute inside backward (activation checkpointing). While
                # the model's batch dimension is unknown, recurrent/attention layers tell it.
                # Under torch.compile these calls are traced: nothing but the depth then (dynamo
                # must not reach the probes, which hold the compiled model itself).
                if depth and not self._bwd_depth and self._fwd_marked and not torch.compiler.is_compiling():
                    if self._nested_batch is None:
                        self._nested_batch = nested_batch_size(module, args)
                    if self._probe_at is not None:
                        self._probe(module)
                return
            if self._data_depth:
                # a module a DataLoader calls in this process (a torchvision transform, with
                # num_workers=0): part of fetching the batch, not a forward of the model
                return
            key = id(module)
            evaluating = not torch.is_grad_enabled() or not module.training
            if not evaluating and self.step_root is None and not _trainable(module):
                return  # a loss module or a transform called first: the model has parameters to train
            if key not in self.roots:
                self.roots[key] = type(module)
            self._fwd_end_code = EVAL_E if evaluating else FWD_E
            if not evaluating:
                if self.step_root is None:
                    self.step_root = key
                    if self.on_step_model is not None:
                        self.on_step_model(module)
                if key == self.step_root and self.precision_probe is not None:
                    # Probed at the first module the forward calls: autocast may be entered inside
                    # the model's forward (accelerate, and so the Hugging Face Trainer, wrap it so).
                    self._probe_at = module
            self._fwd_marked = True
            self.tracker.begin(EVAL_B if evaluating else FWD_B)
        except Exception as exc:
            self._fault(exc)

    def _fwd_end(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> None:
        try:
            if self._fwd_depth == 0:
                return
            self._fwd_depth -= 1
            if self._fwd_depth == 0 and self._fwd_marked:
                self._fwd_marked = False
                samples = tokens = None
                if self._fwd_end_code == FWD_E and id(module) == self.step_root:
                    samples, tokens = self._count(module, args, kwargs)
                self._nested_batch = None
                if self._probe_at is not None:  # the model called no submodule
                    self._probe(self._probe_at)
                self.tracker.end(self._fwd_end_code, samples, tokens)
            if self._fwd_depth == 0 and self._narrow_when_done:
                self.narrow_to_roots()
        except Exception as exc:
            self._fault(exc)

    def _probe(self, module: Any) -> None:
        probe, self.precision_probe, self._probe_at = self.precision_probe, None, None
        if probe is not None:
            probe(module)

    def _count(
        self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None
    ) -> tuple[int | None, int | None]:
        """Samples and tokens of one training forward of the step's model."""
        tensor, where = input_tensor(args, kwargs)
        if tensor is None or tensor.dim() == 0:
            return None, None
        if not self._cuda_seen and tensor.is_cuda:
            self._cuda_seen = True
            if self.on_first_cuda_input is not None:
                self.on_first_cuda_input(tensor.device)  # the model's GPU, not the current one
        key = id(module)
        dim = self._batch_dims.get(key)
        if dim is None:
            nested = self._nested_batch
            seq_first = (
                nested is not None and tensor.dim() >= 2 and tensor.shape[0] != nested == tensor.shape[1]
            )
            dim = self._batch_dims[key] = 1 if seq_first else 0
        tokens = int(tensor.numel()) if holds_token_ids(tensor) else None
        if self.samples_source is None:
            self.samples_source = SamplesSource(
                module=type(module).__name__,
                input=where,
                batch_dim=dim,
                shape=tuple(int(n) for n in tensor.shape),
                tokens=tokens is not None,
            )
        if self._opt_depth:  # inside optimizer.step(closure): the same input again adds nothing
            ident = (id(tensor), tuple(tensor.shape))
            if ident in self._opt_inputs:
                return 0, 0 if tokens is not None else None
            self._opt_inputs.add(ident)
        return int(tensor.shape[dim]), tokens

    # -- optimizer ------------------------------------------------------------------------------
    def _opt_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self.active or threading.get_ident() != self._thread:
            return
        try:
            self._opt_depth += 1
            if self._opt_depth == 1:
                self._opt_inputs.clear()
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
            if depth == 0 and code == DATA_B:
                # A DataLoader fetch: not a phase inside a forward or backward; evaluation when
                # gradients are off (the evaluation loops of Lightning and most scripts).
                if self._fwd_depth or self._bwd_depth:
                    self._data_end = None
                    return True
                if not torch.is_grad_enabled():
                    code, self._data_end = EVAL_B, EVAL_E
                else:
                    self._data_end = DATA_E
            if depth == 0:
                self.tracker.begin(code, loss=loss)
            return True
        except Exception as exc:
            self._fault(exc)
            return False

    def _exit(self, code: int | None, depth_attr: str) -> None:
        try:
            depth = getattr(self, depth_attr) - 1
            setattr(self, depth_attr, depth)
            if depth == 0 and code == DATA_E:
                code, self._data_end = self._data_end, None
            if depth == 0 and code is not None:
                self.tracker.end(code)
        except Exception as exc:
            self._fault(exc)
