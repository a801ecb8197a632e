"""The plan of a built-in demo model (``autotune plan --demo gpt``): its step, batches and loss."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from autotune.plan.plan import Plan, plan


def demo_workload(name: str) -> tuple[Any, Any, Any, Any, int | None]:
    """(model factory, batch_fn, loss_fn, optimizer_fn, tokens per sample) of a demo model."""
    from autotune.demo.models import default_config, make_model

    cfg: Any = default_config(name)

    def optimizer_fn(params: list[nn.Parameter]) -> torch.optim.Optimizer:
        return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)

    if name == "gpt":

        def gpt_batch(b: int) -> tuple[tuple[Any, ...], Any]:
            tokens = torch.randint(0, cfg.vocab_size, (b, cfg.seq_len))
            return (tokens,), tokens

        def gpt_loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), target.reshape(-1))

        return (lambda: make_model(cfg)), gpt_batch, gpt_loss, optimizer_fn, cfg.seq_len

    def cnn_batch(b: int) -> tuple[tuple[Any, ...], Any]:
        return (torch.randn(b, 3, cfg.image_size, cfg.image_size),), torch.randint(0, cfg.num_classes, (b,))

    def cnn_loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(out.float(), target)

    return (lambda: make_model(cfg)), cnn_batch, cnn_loss, optimizer_fn, None


def demo_plan(name: str, **options: Any) -> Plan:
    """The plan of demo model ``name`` ("gpt" or "cnn")."""
    factory, batch_fn, loss_fn, optimizer_fn, tokens = demo_workload(name)
    return plan(factory, batch_fn, loss_fn, optimizer_fn, tokens_per_sample=tokens, **options)


__all__ = ["demo_plan", "demo_workload"]
