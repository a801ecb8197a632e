"""Ops traced as a GPU runs them, where the CPU would run another kernel with other memory.

Attention with dropout: on a CPU, ``scaled_dot_product_attention`` with ``dropout_p > 0`` falls back
to its math decomposition, which materialises the score matrix and the dropout mask (GPT-2 XL at
sequence 1024: 3.1 GB of activations against 1.2 GB); on a GPU the flash and memory-efficient
kernels take dropout inside the kernel (PyTorch's SDPA documentation), keeping only a random seed
and offset. :class:`AsOnAGpu` traces such a call with ``dropout_p=0``, which selects the CPU's fused
kernel with the GPU kernels' memory and FLOPs, and counts the calls so the plan can say so.
"""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

_DROPOUT_ARG = 4  # scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, ...)


class AsOnAGpu(TorchFunctionMode):
    """Runs attention with dropout as the fused kernel a GPU would (see the module's doc)."""

    def __init__(self) -> None:
        super().__init__()
        self.attention_dropout_calls = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention:
            if kwargs.get("dropout_p"):
                kwargs = {**kwargs, "dropout_p": 0.0}
                self.attention_dropout_calls += 1
            elif len(args) > _DROPOUT_ARG and args[_DROPOUT_ARG]:
                args = (*args[:_DROPOUT_ARG], 0.0, *args[_DROPOUT_ARG + 1 :])
                self.attention_dropout_calls += 1
        return func(*args, **kwargs)

    def note(self) -> str | None:
        """What the plan's notes say when attention with dropout was traced as the GPU's kernel."""
        if not self.attention_dropout_calls:
            return None
        return (
            "attention with dropout traced as a GPU runs it (the flash or memory-efficient SDPA kernel, "
            "dropout inside it, no score matrix or mask kept), not the CPU's math fallback"
        )


__all__ = ["AsOnAGpu"]
