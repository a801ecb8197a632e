"""Selective checkpointing as torchtitan's ``op`` mode: blocks keep attention's and every other
matrix product's outputs, recompute the rest; planned beside none and full, checked on real steps."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch

from autotune.demo.plan import demo_workload
from autotune.plan.measure import batch_bytes, measured_step_peak_bytes, predicted_step_peak_bytes
from autotune.plan.plan import SELECTIVE, plan
from autotune.plan.step import trace_step
from autotune.prepared import _checkpoint_blocks
from tests.autotune.plan.workloads import WORKLOADS, adamw

GPT = demo_workload("gpt")[:4]
LM = (*WORKLOADS["transformer_lm"][:3], adamw)


@pytest.mark.slow
@pytest.mark.parametrize("workload", [GPT, LM], ids=["demo_gpt", "transformer_lm"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_selective_checkpointing_is_traced_as_the_allocator_sees_it(workload, precision):
    """The trace of a selectively checkpointed step against the CPU allocator's peak during the same
    step for real (torch.profiler profile_memory), at micro-batch 16: within 2% (0.1% seen on the
    demo GPT in fp32). It keeps more than full checkpointing and less than none, and its backward
    recomputes less than full checkpointing's."""
    model_fn, batch_fn, loss_fn, optimizer_fn = workload
    traced = {
        mode: trace_step(*workload, 16, precision, mode != "none", selective=mode == SELECTIVE)
        for mode in ("none", "full", SELECTIVE)
    }
    selective = traced[SELECTIVE]
    predicted = predicted_step_peak_bytes(selective, batch_bytes(batch_fn, 16))
    measured = measured_step_peak_bytes(
        model_fn, batch_fn, loss_fn, optimizer_fn, 16, precision, True, selective=True
    )
    assert abs(predicted / measured - 1) < 0.02, (predicted, measured)
    kept = {mode: f.memory_by_category["activations"] for mode, f in traced.items()}
    assert kept["full"] < kept[SELECTIVE] < 0.8 * kept["none"]  # 63% on the demo GPT at 16
    assert traced["none"].flops < selective.flops < traced["full"].flops
    assert selective.selective and not traced["full"].selective


def test_a_plan_offers_none_full_and_selective_checkpointing_each_with_its_mode():
    result = plan(*GPT, global_batch=16, gpus=("H100-SXM",), precisions=("bf16",),
                  checkpointing=(False, True, SELECTIVE))  # fmt: skip
    modes = {c.params.checkpointing_mode for c in result.configs}
    assert modes == {"none", "full", SELECTIVE}
    for c in result.configs:
        assert c.params.activation_checkpointing == (c.params.checkpointing_mode != "none")
    assert any("selective checkpointing rows" in n for n in result.notes)

    def row(mode: str):  # type: ignore[no-untyped-def]
        return next(c for c in result.configs if c.params.checkpointing_mode == mode
                    and c.params.layout == "single" and c.params.micro_batch == 16)  # fmt: skip

    assert row("full").peak_memory_bytes < row(SELECTIVE).peak_memory_bytes < row("none").peak_memory_bytes
    assert row("none").step_time_s < row(SELECTIVE).step_time_s < row("full").step_time_s


def test_a_selectively_checkpointed_model_still_copies_and_pickles():
    model = GPT[0]()
    _checkpoint_blocks(model, selective=True)
    again = pickle.loads(pickle.dumps(model))
    twin = copy.deepcopy(model)
    inputs, target = GPT[1](2)
    for net in (again, twin):
        GPT[2](net(*inputs), target).backward()
        assert all(p.grad is not None for p in net.parameters() if p.requires_grad)
    with torch.no_grad():
        assert torch.equal(again(*inputs), model(*inputs))
