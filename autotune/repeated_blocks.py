"""A model's repeated blocks, however they are held.

They are what FSDP wraps, checkpointing recomputes and the plan splits over tensor- and pipeline-
parallel ranks. Transformers keep their blocks in an ``nn.ModuleList`` (GPT-2's ``h``, Llama's
``layers``); timm's ViTs and hand-written stacks in an ``nn.Sequential``; a ResNet in four
``nn.Sequential`` stages of bottlenecks of three sizes. FSDP's ``ModuleWrapPolicy`` wraps every
instance of a block class wherever it sits; torchtitan calls ``fully_shard`` on each block of
``model.layers``. Found here the same way: a block kind is a module class (an ``nn.Sequential`` by
the classes of its children) with two or more instances side by side under one parent, two of them
of the same parameter shapes somewhere; of the kinds, those inside no other's instances, the one
holding the most parameters.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from torch import nn


class BlockSlot(NamedTuple):
    """One block and where it sits: ``setattr(parent, name, new)`` replaces it (a checkpoint wrapper)."""

    parent: nn.Module
    name: str
    block: nn.Module


def _kind(module: nn.Module) -> object:
    """What two blocks share to be of one kind: their class (an ``nn.Sequential``: its children's)."""
    if isinstance(module, nn.Sequential):
        return (nn.Sequential, tuple(type(child) for child in module.children()))
    return type(module)


def _shapes(module: nn.Module) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(p.shape) for p in module.parameters())


def repeated_blocks(model: nn.Module) -> list[BlockSlot]:
    """``model``'s repeated blocks in model order (none: it has no repeated structure)."""
    holders = (nn.ModuleList, nn.ModuleDict)  # hold blocks, have no forward of their own
    slots: dict[object, list[BlockSlot]] = defaultdict(list)
    alike: set[object] = set()
    for parent in model.modules():
        siblings: dict[object, list[tuple[str, nn.Module]]] = defaultdict(list)
        for name, child in parent.named_children():
            if not isinstance(child, holders) and any(True for _ in child.parameters()):
                siblings[_kind(child)].append((name, child))
        for kind, group in siblings.items():
            if len(group) < 2:
                continue
            slots[kind] += [BlockSlot(parent, name, child) for name, child in group]
            shapes = [_shapes(child) for _, child in group]
            if any(shapes.count(s) > 1 for s in shapes):
                alike.add(kind)
    kinds = {kind: found for kind, found in slots.items() if kind in alike}
    inner = {id(m) for found in kinds.values() for s in found for m in s.block.modules() if m is not s.block}
    outer = {kind: [s for s in found if id(s.block) not in inner] for kind, found in kinds.items()}
    outer = {kind: found for kind, found in outer.items() if found}
    if not outer:
        return []

    def weight(kind: object) -> tuple[int, int]:
        params = {id(p): p.numel() for s in outer[kind] for p in s.block.parameters()}
        return sum(params.values()), len(outer[kind])

    order = {id(m): i for i, m in enumerate(model.modules())}
    return sorted(outer[max(outer, key=weight)], key=lambda s: order[id(s.block)])


__all__ = ["BlockSlot", "repeated_blocks"]
