"""The model's repeated blocks as the parallel layouts see them: how many, and what flows between them.

Tensor parallelism all-reduces a block's output (Megatron-LM: two all-reduces per block in the
forward, two in the backward), and pipeline parallelism sends it from one stage to the next: both
move the tensor that passes between blocks (the residual stream, micro-batch × sequence × width).
:class:`BlockWatch` reads its element count from the first block's input while the step is traced.

A pipeline's first stage also runs what comes before the blocks (the embedding), its last what
comes after them (the final norm, the head, the loss): with a large vocabulary the last stage is
the slowest, and every stage waits for it. The watch marks where the first block's forward began
and the last one's ended among the traced ops, so :class:`ForwardSides` holds the work on each side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from autotune.prepared import _blocks


@dataclass(frozen=True, slots=True)
class ForwardSides:
    """A micro-batch's forward work outside the repeated blocks, and the whole forward's.

    ``pre_*``: before the first block (the embedding); ``post_*``: after the last (the head, the
    loss); FLOPs and bytes moved. All 0 when the model has no blocks or none was watched.
    """

    pre_flops: int = 0
    pre_bytes: int = 0
    post_flops: int = 0
    post_bytes: int = 0
    flops: int = 0
    bytes: int = 0

    def shares(self, flops_per_s: float, bytes_per_s: float) -> tuple[float, float]:
        """The shares of the forward's time before the blocks and after them.

        Each side's FLOPs at ``flops_per_s`` and its bytes at ``bytes_per_s`` (an embedding moves
        bytes, a head multiplies).
        """

        def seconds(flops: int, moved: int) -> float:
            return flops / flops_per_s + moved / bytes_per_s

        whole = seconds(self.flops, self.bytes)
        if whole <= 0:
            return 0.0, 0.0
        return seconds(self.pre_flops, self.pre_bytes) / whole, seconds(
            self.post_flops, self.post_bytes
        ) / whole


class BlockWatch:
    """Counts ``model``'s repeated blocks and the elements of the largest tensor entering the first.

    Once :meth:`watch` is given the tracer's ops, it marks where the blocks' first forward began
    and where it ended.
    """

    def __init__(self, model: nn.Module) -> None:
        blocks = _blocks(model)
        self.count = len(blocks) if blocks is not None else 0
        self.elements = 0
        self._ops: Sequence[Any] | None = None
        self.first_in: int | None = None  # the op the first block's first watched forward began at
        self.last_out: int | None = None  # the op after the last block's first watched forward
        self._handles: list[Any] = []
        if blocks is not None:
            self._handles = [
                blocks[0].register_forward_pre_hook(self._entering, with_kwargs=True),
                blocks[-1].register_forward_hook(self._left),
            ]

    def watch(self, ops: Sequence[Any]) -> None:
        """Mark the blocks' next forward among ``ops`` (the tracer's records, growing)."""
        self._ops = ops

    def _entering(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        for value in (*args, *kwargs.values()):
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                self.elements = max(self.elements, value.numel())
        if self._ops is not None and self.first_in is None and _training(module, (*args, *kwargs.values())):
            self.first_in = len(self._ops)

    def _left(self, module: nn.Module, args: tuple[Any, ...], _output: Any) -> None:
        if self._ops is None or self.first_in is None or self.last_out is not None:
            return
        if _training(module, args):
            self.last_out = len(self._ops)

    def sides(self, ops: Sequence[Any]) -> ForwardSides:
        """The first watched forward's work before the blocks, after them, and in all.

        ``ops``: records with ``phase``, ``flops`` and ``bytes_moved``.
        """
        if self.first_in is None or self.last_out is None:
            return ForwardSides()
        end = self.last_out
        while end < len(ops) and ops[end].phase == "forward":
            end += 1
        forward = [op for op in ops[:end] if op.phase == "forward"]
        pre = [op for op in ops[: self.first_in] if op.phase == "forward"]
        post = ops[self.last_out : end]
        return ForwardSides(
            pre_flops=sum(op.flops for op in pre), pre_bytes=sum(op.bytes_moved for op in pre),
            post_flops=sum(op.flops for op in post), post_bytes=sum(op.bytes_moved for op in post),
            flops=sum(op.flops for op in forward), bytes=sum(op.bytes_moved for op in forward),
        )  # fmt: skip

    def remove(self) -> None:
        """Take the hooks off the model."""
        for handle in self._handles:
            handle.remove()
        self._handles = []


def busiest_stage_blocks(blocks: int, pp: int) -> float:
    """The share of ``blocks`` repeated blocks on the busiest of ``pp`` pipeline stages.

    ``ceil(blocks / pp) / blocks``; 1 without a pipeline, an even ``1 / pp`` without blocks.
    """
    if pp <= 1:
        return 1.0
    return math.ceil(blocks / pp) / blocks if blocks else 1.0 / pp


def _training(module: nn.Module, inputs: tuple[Any, ...]) -> bool:
    """Whether a forward of ``module`` is a training one, not a script's evaluation before its step.

    An evaluation runs in ``eval()`` mode, or under ``no_grad`` on inputs that need no gradient. A
    reentrant checkpoint runs a block's training forward under ``no_grad`` too, on inputs that
    need gradients.
    """
    if not module.training:
        return False
    return torch.is_grad_enabled() or any(isinstance(v, torch.Tensor) and v.requires_grad for v in inputs)


__all__ = ["BlockWatch", "ForwardSides", "busiest_stage_blocks"]
