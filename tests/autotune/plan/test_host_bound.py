"""The host's issuing of a step's ops as a bound on its time: small steps wait for the host.

Replayed on real steps: ``benchmarks/data/plan_gpu_h200.json`` holds 20 steps of five small
models measured on an H200 (``benchmarks/plan_gpu_check.py`` in ``scripts/gpu_check.sh``): 2.3 to
9.7 ms each, where the GPU's own work is well under a millisecond.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

import pytest
import torch
from torch import nn

from autotune.demo.plan import demo_workload
from autotune.plan.gpus import gpu_spec
from autotune.plan.layouts import Layout
from autotune.plan.model import EFFICIENCY, StepModel
from autotune.plan.plan import plan
from autotune.plan.step import trace_step
from autotune.report.plan_cells import HEADERS, config_cells
from profilers.contract.json_checks import record_json
from profilers.contract.plan_doc import PlanDocument
from tests.autotune.plan.workloads import WORKLOADS, adamw

H200_RUN = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "plan_gpu_h200.json"
#: The expected efficiencies with a host that issues ops in no time: the GPU's side alone.
GPU_SIDE = dataclasses.replace(EFFICIENCY[1], host_us_per_op=0.0)


def _workloads() -> dict[str, tuple]:
    cases = {f"demo_{n}": demo_workload(n)[:4] for n in ("gpt", "cnn")}
    cases.update({name: (*w[:3], adamw) for name, w in WORKLOADS.items()})
    return cases


def test_the_h200s_small_steps_are_planned_host_bound_and_inside_their_interval():
    measured = json.loads(H200_RUN.read_text())
    assert len(measured) == 20
    cases = _workloads()
    errors = []
    for real in measured:  # one micro-batch a step, as it was run
        model, precision, m = real["model"], real["precision"], real["micro_batch"]
        result = plan(*cases[model], global_batch=m, gpus=("H200",), precisions=(precision,))
        row = next(
            c for c in result.configs if c.params.micro_batch == m and c.params.layout == "single"
        )
        assert row.step_bound == "host", (model, precision, m)
        low, high = row.step_time_s_interval
        assert low <= real["step_s"] <= high, (model, precision, m, row.step_time_s)
        errors.append(abs(row.step_time_s / real["step_s"] - 1))
    # one cost per op for every kind of op: the LSTM's steps (22-24 µs an op) are the worst, 41% low
    assert statistics.median(errors) < 0.25 and max(errors) < 0.5


def test_a_step_is_the_longer_of_the_gpus_work_and_the_hosts_and_says_which():
    def model() -> nn.Module:
        return nn.Sequential(*(nn.Linear(1024, 1024) for _ in range(8)))

    def batch(m: int) -> tuple[tuple[torch.Tensor], torch.Tensor]:
        return (torch.randn(m, 1024),), torch.randn(m, 1024)

    def loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return (out.float() - target).square().mean()

    a, b = (trace_step(model, batch, loss, adamw, m, "bf16", False) for m in (1, 65536))
    step = StepModel.fit(a, b)
    h100, single = gpu_spec("H100-SXM"), Layout("single", 1)
    host_micro_s, host_opt_s = step.host_micro_and_optimizer_s(1, EFFICIENCY[1])
    assert host_micro_s + host_opt_s == pytest.approx(a.ops * EFFICIENCY[1].host_us_per_op * 1e-6)
    # one row: microseconds of GPU work for ~100 ops; 65,536 rows through 8 layers of 1024² in bf16:
    # 3.3 TFLOP, milliseconds of it
    for m, bound in ((1, True), (65536, False)):
        gpu_s = single.step_s(h100, step, m, 1, GPU_SIDE)
        both_s = single.step_s(h100, step, m, 1)
        host_s = sum(step.host_micro_and_optimizer_s(m, EFFICIENCY[1]))
        assert single.host_bound(h100, step, m) is bound
        # one micro-batch: the longer of the two for the forward-backward, then for the update
        micro_s, opt_s = step.micro_and_optimizer_s(h100, m, EFFICIENCY[1])
        assert both_s == pytest.approx(max(micro_s, host_micro_s) + max(opt_s, host_opt_s))
        assert both_s >= max(gpu_s, host_s) * (1 - 1e-9)
    # a pipeline's stage issues its share of the ops, tensor parallelism all of them
    pp2, tp2 = Layout("single", 2, pp=2), Layout("single", 2, tp=2)
    assert pp2.step_s(h100, step, 1, 1) < tp2.step_s(h100, step, 1, 1)


def test_the_plan_marks_host_bound_rows_and_says_why():
    result = plan(*demo_workload("gpt")[:4], global_batch=16, gpus=("H100-SXM",), precisions=("bf16",))
    rows = [c for c in result.configs if c.params.layout == "single"]
    assert rows and all(c.step_bound == "host" for c in rows)
    note = next(n for n in result.notes if n.startswith("rows whose step is marked (host)"))
    assert "14 µs per op, 10 to 25" in note and "CUDA graphs" in note
    doc = PlanDocument.parse(json.loads(json.dumps(record_json(result))))  # as `autotune plan` writes it
    step_col = HEADERS.index("step")
    assert all(config_cells(c)[step_col].endswith(" (host)") for c in doc.configs if c.step_bound == "host")
    assert doc.configs[0].step_bound in ("host", "device")
