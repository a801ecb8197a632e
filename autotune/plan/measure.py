"""Measure a real training step's memory on this machine, independently of the tracer, to check plans.

The reference is the allocator's own count: torch.profiler with ``profile_memory=True`` records
every allocation and free of the step with the allocator's running total ("Total Allocated", the
bytes allocated since the profiler started, less those freed). Its maximum over the second step
(the first creates the optimizer's state) is the step's own peak: what the plan predicts less what
existed before the step (parameters, optimizer state, the batch).
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from autotune.plan.step import BatchFn, LossFn, OptimizerFn, StepFigures, prepare_step
from profilers.runtime.kineto_chatter import kineto_chatter_filtered


def measured_step_peak_bytes(
    model_fn: Any,
    batch_fn: BatchFn,
    loss_fn: LossFn,
    optimizer_fn: OptimizerFn,
    micro_batch: int,
    precision: str = "fp32",
    checkpointing: bool = False,
    accumulation: int = 1,
    selective: bool = False,
) -> int:
    """The peak of the allocator's total during a real second step, above its start (bytes).

    The step runs ``accumulation`` micro-batches (the same batch each time) before its update.
    """
    torch.manual_seed(0)
    prepared = prepare_step(
        model_fn(), batch_fn, loss_fn, optimizer_fn, micro_batch, precision, checkpointing,
        selective=selective,
    )  # fmt: skip
    prepared.run()  # the first step creates the optimizer's state
    with kineto_chatter_filtered(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        prepared.run(accumulation)  # Kineto's start and stop lines kept off the terminal
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            events = json.load(f)["traceEvents"]
    finally:
        os.unlink(path)
    totals = [e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]"]
    return max([0, *totals])


def predicted_step_peak_bytes(figures: StepFigures, batch_bytes: int) -> int:
    """The traced peak less what existed before the step: comparable to :func:`measured_step_peak_bytes`."""
    existing = figures.memory_by_category["parameters"] + figures.memory_by_category["optimizer_state"]
    return figures.peak_bytes - existing - batch_bytes


def batch_bytes(batch_fn: BatchFn, micro_batch: int) -> int:
    """Bytes of a batch's tensors."""
    inputs, target = batch_fn(micro_batch)
    return sum(t.numel() * t.element_size() for t in (*inputs, target) if isinstance(t, torch.Tensor))


__all__ = ["batch_bytes", "measured_step_peak_bytes", "predicted_step_peak_bytes"]
