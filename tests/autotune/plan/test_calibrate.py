"""Calibrating the time model on this machine: the fit, the held-out check, the CPU rows of a plan.

How close the calibrated times come is a timing, so it is measured by benchmarks/plan_accuracy.py
(printed side by side, in the README), not asserted here; these tests check what does not depend on
the machine's load.
"""

from __future__ import annotations

import random

import pytest

from autotune.demo.plan import demo_workload
from autotune.plan.calibrate import CpuCalibration, calibrate, features, fit
from autotune.plan.plan import plan
from autotune.plan.step import trace_step

GPT = demo_workload("gpt")[:4]


def test_the_fit_recovers_known_costs_exactly():
    """Seconds made from known costs (one of them zero) come back as those costs."""
    rng = random.Random(1)
    costs = [2e-11, 0.0, 3e-11, 4e-6]
    points = []
    for _ in range(8):
        x = [rng.uniform(1e8, 1e10), rng.uniform(0, 1e9), rng.uniform(1e7, 1e9), rng.uniform(100, 2000)]
        points.append((x, sum(a * c for a, c in zip(x, costs, strict=True))))
    assert fit(points) == pytest.approx(costs, rel=1e-9, abs=1e-20)


def test_costs_never_go_negative():
    """Two collinear features: least squares would take one negative; the fit keeps both ≥ 0."""
    points = [([1.0, 2.0], 3.0), ([2.0, 4.0], 6.5), ([3.0, 6.0], 9.0)]
    assert min(fit(points)) >= 0


def test_features_split_the_flops_by_the_dtype_they_run_in():
    fp32 = features(trace_step(*GPT, 8, "fp32", False))
    bf16 = features(trace_step(*GPT, 8, "bf16", False))
    assert fp32[1] == 0 and fp32[0] > 0
    assert bf16[1] > 0.9 * fp32[0]  # under autocast nearly every GEMM FLOP is bf16
    assert fp32[3] > 0 and fp32[2] > 0


def test_calibration_reports_each_held_out_configuration():
    result = calibrate(*GPT, fit_on=[(2, "fp32", False), (8, "fp32", False), (16, "fp32", False)],
                       held_out=[(4, "fp32", False)], steps=2)  # fmt: skip
    assert [row[0] for row in result.held_out] == ["micro_batch=4 fp32"]
    _, predicted, measured = result.held_out[0]
    assert predicted > 0 and measured > 0
    assert result.held_out_median_error == pytest.approx(abs(predicted / measured - 1))
    assert len(result.fitted_on) == 3


def test_a_calibrated_plan_adds_this_cpu_with_its_predicted_times():
    cpu = CpuCalibration(1e-11, 2e-11, 3e-11, 5e-6, fitted_on=("x",), held_out=())
    result = plan(*GPT, global_batch=16, gpus=("L4",), precisions=("fp32",), cpu=cpu)
    rows = [c for c in result.configs if c.gpu == "this-cpu"]
    assert len(rows) == 5  # micro-batches 1, 2, 4, 8, 16
    one = next(c for c in rows if c.params.micro_batch == 4)
    traced = trace_step(*GPT, 4, "fp32", False)
    assert one.step_time_s == pytest.approx(4 * cpu.predict_s(traced), rel=0.02)
    assert one.memory_by_category.keys() == {"parameters", "gradients", "optimizer_state", "parameter_casts",
                                             "activations", "temporaries"}  # fmt: skip
    assert result.calibration.cpu is not None and result.calibration.cpu.s_per_op == 5e-6


def test_fp16_flops_are_priced_at_their_own_cost_bf16_ones_at_the_low_precision_cost():
    # a CPU without fp16 matrix units: fp16 100x the bf16 cost per FLOP; the model traced in each
    base = CpuCalibration(1e-11, 2e-11, 3e-11, 5e-6, fitted_on=("probe",), held_out=())
    slow_fp16 = CpuCalibration(1e-11, 2e-11, 3e-11, 5e-6, ("probe",), (), s_per_fp16_flop=2e-9)
    bf16, fp16 = trace_step(*GPT, 8, "bf16", False), trace_step(*GPT, 8, "fp16", False)
    low = features(fp16)[1]
    assert low > 0 and fp16.dtype_flops["float16"] == pytest.approx(low)  # every low FLOP is fp16
    # bf16 does not change; fp16 adds exactly its FLOPs times the difference of the two costs
    assert slow_fp16.predict_s(bf16) == base.predict_s(bf16)
    assert slow_fp16.predict_s(fp16) - base.predict_s(fp16) == pytest.approx(low * (2e-9 - 2e-11))
    # the step model the tuner's prior uses prices it the same
    from autotune.plan.model import StepModel

    model = StepModel.fit(trace_step(*GPT, 2, "fp16", False), fp16)
    extra = model.cpu_step_time_s(slow_fp16, 8, 1) - model.cpu_step_time_s(base, 8, 1)
    assert extra == pytest.approx(low * (2e-9 - 2e-11), rel=0.01)


def test_floors_keep_every_cost_at_or_above_them_and_recover_costs_above():
    """The fit with floors (half the probe's costs in ``calibrate``): seconds made from costs of
    which one is 0 give that one its floor, never 0; costs above their floors come back exactly."""
    rng = random.Random(2)
    costs = [2e-11, 0.0, 3e-11, 4e-6]
    floors = [1e-11, 5e-12, 1e-11, 1e-6]
    points = []
    for _ in range(8):
        x = [rng.uniform(1e8, 1e10), rng.uniform(0, 1e9), rng.uniform(1e7, 1e9), rng.uniform(100, 2000)]
        points.append((x, sum(a * c for a, c in zip(x, costs, strict=True))))
    fitted = fit(points, floors)
    assert all(c >= f for c, f in zip(fitted, floors, strict=True))
    assert fitted[1] == pytest.approx(floors[1])  # the zero cost stops at its floor
    above = [3e-11, 7e-12, 2e-11, 5e-6]
    exact = [(x, sum(a * c for a, c in zip(x, above, strict=True))) for x, _ in points]
    assert fit(exact, floors) == pytest.approx(above, rel=1e-9)


def test_the_probe_gives_the_same_answer_twice_and_says_its_spread():
    """Two probes of this CPU (3 rounds each, each kernel's fastest of many short samples over its
    rounds) predict the demo GPT's step within 10% of each other, in fp32 and bf16, with no cost at
    0. A probe measures the machine as it is: beside another process that holds both cores for a
    whole probe it reads about 2× slower, so the two probes here take their rounds in turns; on a
    machine busier still (more processes than cores, a neighbour streaming memory) their rounds
    range wider, and the probes agree within that spread, which they report and the plan shows."""
    from autotune.plan.probe import ROUNDS, from_rounds, probe_round

    steps = {p: trace_step(*GPT, 16, p, False) for p in ("fp32", "bf16")}
    # two probes, their rounds taken in turns: the same machine for both, whatever else runs on it
    rounds: tuple[list[dict[str, float]], list[dict[str, float]]] = ([], [])
    for _ in range(ROUNDS):
        for own in rounds:
            own.append(probe_round())
    first, second = from_rounds(rounds[0]), from_rounds(rounds[1])
    for cpu in (first, second):
        assert min(cpu.s_per_fp32_flop, cpu.s_per_low_flop, cpu.s_per_byte, cpu.s_per_op) > 0
        assert cpu.fp16_flop_s() > 0
        assert cpu.spread is not None and cpu.spread >= 0
    # within 10%, or within what the probes themselves said of the machine: their rounds' spread,
    # which the plan shows ("the machine was busy during its probe") when it is large
    said = max(0.10, first.spread or 0.0, second.spread or 0.0)
    for figures in steps.values():
        assert second.predict_s(figures) == pytest.approx(first.predict_s(figures), rel=said)
