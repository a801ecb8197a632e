"""Values for a training script that reads them from fake tensors (``autotune plan SCRIPT``).

A fake tensor has a shape and no values, and a training loop reads a few: an index into its
dataset, a counter, ``loss.item()`` for its log, a NaN check. :class:`ScalarStandIn`, a dispatch
mode above ``FakeTensorMode``, gives them what keeps the loop doing what it would.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakIdKeyDictionary

#: Tensors up to this many elements are also computed for real (:class:`ScalarStandIn`).
SHADOW_ELEMENTS = 4096
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
        out = func(*args, **kwargs)
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


__all__ = ["SHADOW_ELEMENTS", "ScalarStandIn"]
