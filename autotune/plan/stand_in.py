"""Values for a training script that reads them from fake tensors (``autotune plan SCRIPT``).

A fake tensor has a shape and no values, and a training loop reads a few: an index into its
dataset, a counter, ``loss.item()`` for its log, a NaN check. :class:`ScalarStandIn`, a dispatch
mode above ``FakeTensorMode``, gives them what keeps the loop doing what it would.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    unset_fake_temporarily,
)
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakIdKeyDictionary

#: Tensors up to this many elements are also computed for real (:class:`ScalarStandIn`).
SHADOW_ELEMENTS = 4096
#: A data-dependent op runs for real when its inputs without a real twin take at most this many bytes.
REAL_RUN_BYTES = 64 * 2**20
_NAN_CHECKS = frozenset(("isnan", "isinf", "isposinf", "isneginf"))
_PASS_THROUGH = frozenset((
    "any", "all", "logical_or", "logical_and", "bitwise_or", "bitwise_and", "squeeze", "view", "reshape",
    "clone",
))  # fmt: skip
_NEGATIONS = frozenset(("logical_not", "bitwise_not"))


class ScalarStandIn(TorchDispatchMode):
    """Gives fake tensors the values a training loop reads from them (see the module's doc).

    Small tensors (at most :data:`SHADOW_ELEMENTS` elements: indexes, counters, a random batch of
    offsets) are also computed for real, op by op, beside their fake twin (a *shadow*), so
    ``data[i:i + block]`` slices what it would. ``item()`` of a tensor with a shadow reads the
    shadow; of one without (a loss computed from the model's fake activations), a stand-in: 1, and for
    a truth value what keeps a training loop going.
    """

    def __init__(self) -> None:
        super().__init__()
        self.truths: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.shadows: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.stand_ins = 0
        #: Ops whose output size depends on values, by name: (run for real, stood in by a bound).
        self.data_dependent: dict[str, list[int]] = {}
        self.numpy_stand_ins = 0  # fake tensors read as NumPy arrays without a real twin

    @contextlib.contextmanager
    def numpy_arrays(self) -> Iterator[None]:
        """``tensor.numpy()`` (and ``np.asarray``) of a fake tensor, as a feature extractor does.

        It gets its real twin's values, else zeros of its shape and dtype (counted for the notes).
        """
        original = torch.Tensor.numpy
        stand_in = self

        def numpy(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if not isinstance(tensor, FakeTensor):
                return original(tensor, *args, **kwargs)
            with unset_fake_temporarily():
                shadow = stand_in.shadows.get(tensor)
                if shadow is not None:
                    return original(shadow.detach(), *args, **kwargs)
                stand_in.numpy_stand_ins += 1
                dtype = original(torch.empty(0, dtype=tensor.dtype)).dtype
                return np.zeros(tuple(tensor.shape), dtype=dtype)  # calloc: no pages touched

        torch.Tensor.numpy = numpy  # type: ignore[method-assign,assignment]
        try:
            yield
        finally:
            torch.Tensor.numpy = original  # type: ignore[method-assign]

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.ops.aten._local_scalar_dense.default:
            tensor = args[0]
            shadow = self.shadows.get(tensor)
            if shadow is not None:
                with unset_fake_temporarily():
                    return shadow.item()
            self.stand_ins += 1
            if tensor.dtype == torch.bool:
                return self.truths.get(tensor, True)
            return 1.0 if tensor.is_floating_point() or tensor.is_complex() else 1
        if func is torch.ops.aten._pin_memory.default or func is torch.ops.aten.is_pinned.default:
            return self._pinned(func, args[0])
        try:
            out = func(*args, **kwargs)
        except (DynamicOutputShapeException, DataDependentOutputException):
            return self._data_dependent(func, args, kwargs)
        self._shadow(func, args, kwargs, out)
        if isinstance(out, torch.Tensor) and out.dtype == torch.bool and out not in self.shadows:
            name = func._overloadpacket.__name__
            if name in _NAN_CHECKS:
                self.truths[out] = False
            elif name == "isfinite":
                self.truths[out] = True
            elif name in _PASS_THROUGH or name in _NEGATIONS:
                known = [self.truths[a] for a in args if isinstance(a, torch.Tensor) and a in self.truths]
                if known:
                    self.truths[out] = (not known[0]) if name in _NEGATIONS else known[0]
        return out

    def _pinned(self, func: Any, tensor: Any) -> Any:
        """``pin_memory()`` (a DataLoader's ``pin_memory=True``) of a fake tensor: a copy of it.

        FakeTensorMode has no rule for it (``NYI: aten._pin_memory``) and pinned host memory is not the
        GPU's, so the plan takes it as a plain host copy; ``is_pinned()`` says yes.
        """
        if func is torch.ops.aten.is_pinned.default:
            return True
        out = torch.ops.aten.clone.default(tensor)
        shadow = self.shadows.get(tensor)
        if shadow is not None:
            self.shadows[out] = shadow
        return out

    def _data_dependent(self, func: Any, args: Any, kwargs: Any) -> Any:
        """An op whose output size depends on its inputs' values, run for real or at its largest.

        ``masked_select``, ``nonzero``, ``ctc_loss`` with tensor lengths: run for real when its
        inputs are small enough (their shadows, zeros for the rest), else its output is taken at
        the documented upper bound.
        """
        name = str(func._overloadpacket).removeprefix("aten.")
        counts = self.data_dependent.setdefault(name, [0, 0])
        fakes = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, FakeTensor)]
        unshadowed = sum(t.numel() * t.element_size() for t in fakes if t not in self.shadows)
        real_out = None
        if unshadowed <= REAL_RUN_BYTES:

            def real(value: Any) -> Any:
                if not isinstance(value, FakeTensor):
                    return value
                shadow = self.shadows.get(value)
                if shadow is not None:
                    return shadow
                return torch.zeros(value.shape, dtype=value.dtype)

            with unset_fake_temporarily(), contextlib.suppress(Exception):  # else: the bound below
                real_args, real_kwargs = tree_map(real, (args, kwargs))
                real_out = func(*real_args, **real_kwargs)
        if real_out is not None:
            counts[0] += 1
            exact = all(t in self.shadows for t in fakes)
            device = fakes[0].device if fakes else torch.device("cpu")

            def fake(value: Any) -> Any:
                if not isinstance(value, torch.Tensor):
                    return value
                out = torch.empty(value.shape, dtype=value.dtype, device=device)
                if exact and value.numel() <= SHADOW_ELEMENTS:
                    self.shadows[out] = value
                return out

            return tree_map(fake, real_out)
        bound = _upper_bound(name, args)
        if bound is None:
            raise DynamicOutputShapeException(func)
        counts[1] += 1
        return bound

    def notes(self) -> list[str]:
        """What the plan's notes say about the data-dependent ops and NumPy reads it met."""
        out = []
        if self.numpy_stand_ins:
            out.append(
                f"{self.numpy_stand_ins} fake tensor(s) read as NumPy arrays (tensor.numpy()) got zeros of "
                "their shape: values computed from them differ from a real run, their sizes do not"
            )
        for name, (real, bounded) in sorted(self.data_dependent.items()):
            what = f"{name} (output size from its values)"
            if real:
                out.append(f"{what} run for real on its inputs {real} time(s)")
            if bounded:
                out.append(f"{what} taken at its largest size {bounded} time(s)")
        return out

    def _shadow(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        """Run ``func`` for real on the inputs' shadows when its outputs are small.

        An in-place op that returns nothing (``_foreach_add_(steps, 1)``: a foreach optimizer
        counting its steps) changes its first argument: that is its output, and its shadows are
        changed in place the same way.
        """
        outputs = [t for t in tree_flatten(out)[0] if isinstance(t, FakeTensor)]
        if not outputs and args and func._overloadpacket.__name__.endswith("_"):
            outputs = [t for t in tree_flatten(args[0])[0] if isinstance(t, FakeTensor)]
        if not outputs or any(t.numel() > SHADOW_ELEMENTS for t in outputs):
            return
        missing = False

        def real(value: Any) -> Any:
            nonlocal missing
            if isinstance(value, FakeTensor):
                shadow = self.shadows.get(value)
                if shadow is None:
                    missing = True
                return shadow
            return value

        real_args, real_kwargs = tree_map(real, (args, kwargs))
        if missing:
            return
        try:
            with unset_fake_temporarily():
                real_out = func(*real_args, **real_kwargs)
        except Exception:  # a device this machine does not have, an op with no CPU kernel...
            return
        for fake, shadow in zip(tree_flatten(out)[0], tree_flatten(real_out)[0], strict=False):
            if isinstance(fake, FakeTensor) and isinstance(shadow, torch.Tensor):
                self.shadows[fake] = shadow


def _upper_bound(name: str, args: Any) -> Any:
    """The largest output a data-dependent op can have, as empty (fake) tensors; None: unknown.

    ``masked_select``: every element selected (the broadcast size); ``nonzero``: every element
    non-zero (numel × dims indexes); ``unique``: every value distinct.
    """
    if name == "masked_select":
        shape = torch.broadcast_shapes(args[0].shape, args[1].shape)
        return torch.empty(math.prod(shape), dtype=args[0].dtype, device=args[0].device)
    if name == "nonzero":
        return torch.empty((args[0].numel(), args[0].dim()), dtype=torch.long, device=args[0].device)
    if name == "_unique2":  # (values, inverse if asked, counts if asked): every value distinct
        x, n = args[0], args[0].numel()
        inverse, counts = (bool(args[i]) if len(args) > i else False for i in (2, 3))
        return (
            torch.empty(n, dtype=x.dtype, device=x.device),
            torch.empty(x.shape if inverse else 0, dtype=torch.long, device=x.device),
            torch.empty(n if counts else 0, dtype=torch.long, device=x.device),
        )
    return None


__all__ = ["REAL_RUN_BYTES", "SHADOW_ELEMENTS", "ScalarStandIn"]
