"""What FSDP gathers of a model: its largest repeated block and the root's own parameters.

``autotune.prepare`` calls ``fully_shard`` on each repeated block, then on the root (torchtitan's
Llama sharded so in its 2024 benchmarks). A block's parameters are gathered for its forward and
again for its backward, one block in use and the next prefetched; the root's own parameters (the
embedding and head: everything outside the blocks, the whole model when it has none) are gathered
at the forward's start and held until the backward ends: FSDP2 keeps a root unsharded after its
forward by default (its backward needs it at once), and ``prepare`` leaves it so.
:meth:`autotune.plan.layouts.Layout.memory` holds them so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

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


def units_of(model: nn.Module) -> FsdpUnits:
    """The model's :class:`FsdpUnits` (a shared parameter counted once, in the first unit holding it)."""
    blocks = _blocks(model) or []
    in_blocks = {id(p) for block in blocks for p in block.parameters()}
    largest = max((sum(p.numel() * p.element_size() for p in b.parameters()) for b in blocks), default=0)
    root = sum(p.numel() * p.element_size() for p in model.parameters() if id(p) not in in_blocks)
    return FsdpUnits(block_bytes=largest, root_bytes=root)


#: A model FSDP gathers nothing of (a layout that does not shard).
NO_UNITS = FsdpUnits()
