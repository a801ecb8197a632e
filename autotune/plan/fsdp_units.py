"""What FSDP gathers of a model: its largest repeated block and the root's own parameters.

``autotune.prepare`` calls ``fully_shard`` on each repeated block, then on the root (torchtitan's
Llama sharded so in its 2024 benchmarks). A block's parameters are gathered for its forward and
again for its backward, one block in use and the next prefetched; the root's own parameters (the
embedding and head: everything outside the blocks, the whole model when it has none) are gathered
at the forward's start and held until the backward ends: FSDP2 keeps a root unsharded after its
forward by default (its backward needs it at once), and ``prepare`` leaves it so.
:meth:`autotune.plan.layouts.Layout.memory` holds them so.

A pipeline splits the same units otherwise: its first stage holds the root's parameters registered
before the blocks (the embedding), its last stage those registered after them (the final norm, the
head), and a weight tied across the two (a GPT's embedding and head) is held by both, as
Megatron-LM's first and last stages each hold the word embeddings and all-reduce their gradients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from autotune.plan.blocks import busiest_stage_blocks
from autotune.prepared import _blocks

if TYPE_CHECKING:
    from torch import nn


@dataclass(frozen=True, slots=True)
class FsdpUnits:
    """Parameter bytes, as the model holds them (fp32 master weights), of FSDP's units."""

    #: The largest repeated block (0: the model has none).
    block_bytes: int = 0
    #: The parameters outside the blocks (the root unit's own; the whole model without blocks).
    root_bytes: int = 0
    #: Every block's parameters together (0: no blocks, or not known).
    blocks_bytes: int = 0
    #: The root's parameters registered before the blocks, and after them (a tied one in both).
    pre_blocks_bytes: int = 0
    post_blocks_bytes: int = 0
    #: How many repeated blocks there are.
    block_count: int = 0

    def stage_parameter_share(self, pp: int) -> float:
        """The share of the model's parameters on its most loaded of ``pp`` pipeline stages.

        ``ceil(blocks / pp)`` blocks and the larger of the embedding's and the head's side; an even
        ``1 / pp`` when the blocks are not known.
        """
        total = self.blocks_bytes + self.root_bytes
        if pp <= 1 or not self.block_count or not total:
            return 1.0 / max(pp, 1)
        blocks = self.blocks_bytes * busiest_stage_blocks(self.block_count, pp)
        return min(1.0, (blocks + self.stage_root_bytes(pp)) / total)

    def stage_root_bytes(self, pp: int) -> float:
        """The root's parameter bytes on the busiest of ``pp`` pipeline stages.

        All of them without a pipeline, the larger side with one (an even share when the sides are
        not known).
        """
        if pp <= 1:
            return float(self.root_bytes)
        if not self.block_count:
            return self.root_bytes / pp
        return float(max(self.pre_blocks_bytes, self.post_blocks_bytes))


def units_of(model: nn.Module) -> FsdpUnits:
    """The model's :class:`FsdpUnits`.

    A shared parameter is counted once, in the first unit holding it; a root parameter on both
    sides of the blocks (tied) is counted on both sides.
    """
    blocks = _blocks(model) or []
    in_blocks = {id(p) for block in blocks for p in block.parameters()}
    sizes = [sum(p.numel() * p.element_size() for p in b.parameters()) for b in blocks]
    root = sum(p.numel() * p.element_size() for p in model.parameters() if id(p) not in in_blocks)
    pre: dict[int, int] = {}
    post: dict[int, int] = {}
    seen_block = False
    for _, p in model.named_parameters(remove_duplicate=False) if blocks else ():
        if id(p) in in_blocks:
            seen_block = True
            continue
        (post if seen_block else pre)[id(p)] = p.numel() * p.element_size()
    return FsdpUnits(
        block_bytes=max(sizes, default=0), root_bytes=root, blocks_bytes=sum(sizes),
        pre_blocks_bytes=sum(pre.values()), post_blocks_bytes=sum(post.values()), block_count=len(blocks),
    )  # fmt: skip


#: A model FSDP gathers nothing of (a layout that does not shard).
NO_UNITS = FsdpUnits()
