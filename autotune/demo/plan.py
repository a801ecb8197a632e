"""The plan of a built-in demo model (``autotune plan --demo gpt``): its step, batches and loss."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from autotune.demo.models import default_config, make_model
from autotune.plan.calibrate import calibrate
from autotune.plan.plan import plan
from autotune.plan.step import trace_step
from autotune.plan.workspace import calibrate_memory
from profilers.contract.plan_doc import PlanDocument


def demo_workload(name: str, cfg: Any = None) -> tuple[Any, Any, Any, Any, int | None]:
    """(model factory, batch_fn, loss_fn, optimizer_fn, tokens per sample) of a demo model.

    ``cfg``: another shape of it (a ``GPTConfig`` or ``CNNConfig``), the demo's own by default.
    """
    cfg = cfg if cfg is not None else default_config(name)

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


#: Configurations timed to calibrate this machine, and the ones held out to check it:
#: (micro_batch, precision, checkpointing). Checkpointing recomputes the forward, which changes the
#: mix of FLOPs, bytes and ops, so the fit sees it and the held-out set tests other micro-batches.
CALIBRATE_ON = [(2, "fp32", False), (32, "fp32", False), (2, "bf16", False), (32, "bf16", False),
                (8, "fp32", True), (8, "bf16", True)]  # fmt: skip
HELD_OUT = [(4, "fp32", False), (16, "fp32", False), (4, "bf16", False), (16, "bf16", False),
            (16, "fp32", True), (32, "bf16", True)]  # fmt: skip


#: Memory is measured at these too (two steps each), so each setting's workspace line rests on three
#: or four micro-batches spanning the planned ones (1-64): an LSTM's line bends at small ones, and a
#: gap the trace has at some sizes only (bf16 with checkpointing) must not be carried beyond them.
MEMORY_ALSO_ON = [
    (2, "fp32", True), (2, "bf16", True), (64, "fp32", True), (64, "bf16", True),
    (8, "fp32", False), (8, "bf16", False), (64, "fp32", False), (64, "bf16", False),
]  # fmt: skip


def demo_calibration(name: str, steps: int = 12) -> Any:
    """The calibration of this machine on demo model ``name`` (about 15 s for the GPT here).

    Step time (:func:`calibrate`) and the memory beyond the trace (:func:`calibrate_memory`).
    """
    factory, batch_fn, loss_fn, optimizer_fn, _ = demo_workload(name)
    blocks = name == "gpt"
    fit_on = [c for c in CALIBRATE_ON if blocks or not c[2]]
    held = [c for c in HELD_OUT if blocks or not c[2]]
    traced = functools.cache(lambda c: trace_step(factory, batch_fn, loss_fn, optimizer_fn, *c))
    cpu = calibrate(factory, batch_fn, loss_fn, optimizer_fn, fit_on, held, steps=steps, traced=traced)
    memory_on = fit_on + [c for c in MEMORY_ALSO_ON if blocks or not c[2]]
    memory = calibrate_memory(factory, batch_fn, loss_fn, optimizer_fn, memory_on, held, traced=traced)
    return dataclasses.replace(cpu, memory=memory)


def demo_plan(name: str, calibrate: bool = False, **options: Any) -> PlanDocument:
    """The plan of demo model ``name`` ("gpt" or "cnn"), with this machine's CPU if ``calibrate``."""
    factory, batch_fn, loss_fn, optimizer_fn, tokens = demo_workload(name)
    cpu = demo_calibration(name) if calibrate else None
    result = plan(factory, batch_fn, loss_fn, optimizer_fn, tokens_per_sample=tokens, cpu=cpu, **options)
    model = dataclasses.replace(result.model, demo=f"the demo {name.upper()}")
    return dataclasses.replace(result, model=model)


__all__ = ["CALIBRATE_ON", "HELD_OUT", "MEMORY_ALSO_ON", "demo_calibration", "demo_plan", "demo_workload"]
