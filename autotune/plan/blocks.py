"""The model's repeated blocks as the parallel layouts see them: how many, and what flows between them.

Tensor parallelism all-reduces a block's output (Megatron-LM: two all-reduces per block in the
forward, two in the backward), and pipeline parallelism sends it from one stage to the next: both
move the tensor that passes between blocks (the residual stream, micro-batch × sequence × width).
:class:`BlockWatch` reads its element count from the first block's input while the step is traced.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from autotune.prepared import _blocks


class BlockWatch:
    """Counts ``model``'s repeated blocks and the elements of the largest tensor entering the first."""

    def __init__(self, model: nn.Module) -> None:
        blocks = _blocks(model)
        self.count = len(blocks) if blocks is not None else 0
        self.elements = 0
        self._handle = None
        if blocks is not None:
            self._handle = blocks[0].register_forward_pre_hook(self._entering, with_kwargs=True)

    def _entering(self, _module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        for value in (*args, *kwargs.values()):
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                self.elements = max(self.elements, value.numel())

    def remove(self) -> None:
        """Take the hook off the model."""
        if self._handle is not None:
            self._handle.remove()
            self._handle = None


__all__ = ["BlockWatch"]
