"""The torch hooks that feed the step tracker, installed for a profiled region and removed after.

- forward: global module forward hooks while the step's models are discovered (warm-up), then
  hooks on those root modules only (cheaper, and they see keyword arguments);
- backward: ``torch.Tensor.backward`` and ``torch.autograd.backward`` wrapped;
- optimizer: torch's global optimizer step pre/post hooks, and ``GradScaler.step`` wrapped so a
  step the scaler skips (inf/NaN gradients) still ends a step;
- data: ``DataLoader`` iterators' ``__next__`` wrapped.

Every hook body is guarded: an exception of ours calls ``on_fault`` once and the hooks stand down,
the user's call goes on untouched. Calls from other threads are ignored.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from typing import Any

import torch

from profilers.timeline import BWD_B, BWD_E, DATA_B, DATA_E, FWD_B, FWD_E, OPT_B, OPT_E
from profilers.tracker import StepTracker


def holds_token_ids(tensor: torch.Tensor) -> bool:
    """int64/int32 inputs are taken for token ids (uint8 and bool inputs are images and masks)."""
    return tensor.dtype in (torch.int64, torch.int32)


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
        self._patch(torch.Tensor, "backward", self._wrap(torch.Tensor.backward, BWD_B, BWD_E, "_bwd_depth"))
        self._patch(
            torch.autograd, "backward", self._wrap(torch.autograd.backward, BWD_B, BWD_E, "_bwd_depth")
        )
        from torch.utils.data import dataloader

        base_iter = dataloader._BaseDataLoaderIter
        self._patch(base_iter, "__next__", self._wrap(base_iter.__next__, DATA_B, DATA_E, "_data_depth"))
        scaler_cls = getattr(getattr(torch, "amp", None), "GradScaler", None)
        if scaler_cls is not None and hasattr(scaler_cls, "step"):
            self._patch(scaler_cls, "step", self._wrap(scaler_cls.step, OPT_B, OPT_E, "_opt_depth"))
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

    def _enter(self, code: int, depth_attr: str) -> bool:
        try:
            depth = getattr(self, depth_attr)
            setattr(self, depth_attr, depth + 1)
            if depth == 0 and not (code == DATA_B and (self._fwd_depth or self._bwd_depth)):
                self.tracker.begin(code)
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
