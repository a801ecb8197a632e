"""Scoring: directions, metrics from a profiler summary, throughput floors, energy, Pareto fronts."""

from __future__ import annotations

import math
from typing import Any

import pytest

from autotune.tuner.objectives import Scoring
from profilers.contract.json_checks import SummaryError
from profilers.contract.profile_summary import GpuFigures
from profilers.contract.study.trials import energy_per_sample, pareto_front

GIB = 2**30


def gpus(entries: list[dict[str, Any]] | None) -> tuple[GpuFigures, ...]:
    """A summary's ``gpu`` entries (each given its index), parsed as the scoring reads them."""
    return tuple(GpuFigures.parse({"index": i, **e}, "gpu") for i, e in enumerate(entries or []))


def summary(**overrides: Any) -> dict[str, Any]:
    """A profiler ``summary.json`` of a 2-rank run, trimmed to what scoring reads (and a bit more)."""
    out: dict[str, Any] = {
        "steps": 30,
        "measured_steps": 26,
        "throughput": {"samples_per_s": 1000.0, "tokens_per_s": 512_000.0, "samples_per_step": 64},
        "step_time_s": {"median": 0.064, "p10": 0.06, "p90": 0.07, "mean": 0.065},
        "peak_memory_bytes": 3 * GIB,
        "gpu": [
            {"index": 0, "duration_s": 20.0, "energy_j": 6000.0, "power_w_mean": 290.0},
            {"index": 1, "duration_s": 20.0, "energy_j": 5000.0, "power_w_mean": 240.0},
        ],
    }
    out.update(overrides)
    return out


# --------------------------------------------------------------------------- objectives


@pytest.mark.parametrize(
    ("objective", "price", "direction", "metric"),
    [
        ("throughput", None, "maximize", "samples_per_s"),
        ("cost", 2.0, "minimize", "usd_per_million_samples"),
        ("energy", None, "minimize", "joules_per_sample"),
    ],
)
def test_direction_and_metric_per_objective(
    objective: Any, price: float | None, direction: str, metric: str
) -> None:
    scoring = Scoring(objective, price)
    assert scoring.direction == direction
    assert scoring.metric == metric
    assert scoring.metrics(summary(), devices=2)["objective"] == scoring.metrics(summary(), 2)[metric]


def test_cost_needs_a_positive_price_and_objectives_are_checked() -> None:
    with pytest.raises(ValueError, match="--price-per-gpu-hour"):
        Scoring("cost")
    with pytest.raises(ValueError, match="must be > 0, got 0"):
        Scoring("cost", 0.0)
    with pytest.raises(ValueError, match="must be > 0, got -1"):
        Scoring("throughput", -1.0)
    with pytest.raises(ValueError, match="unknown objective 'speed'"):
        Scoring("speed")  # type: ignore[arg-type]
    assert Scoring().objective == "throughput" and Scoring().price_per_gpu_hour is None


def test_metrics_from_a_profiler_summary_with_a_price() -> None:
    m = Scoring("cost", price_per_gpu_hour=2.0).metrics(summary(), devices=2)
    usd = 2.0 * 2 / 3600 / 1000 * 1e6  # $2/h on each of 2 devices, 1000 samples/s: 1.111 $/M samples
    joules = (6000.0 / 20.0 + 5000.0 / 20.0) / 1000.0  # 300 W + 250 W over 1000 samples/s
    assert m == {
        "samples_per_s": 1000.0,
        "tokens_per_s": 512_000.0,
        "peak_memory_bytes": float(3 * GIB),
        "step_time_s": 0.064,
        "devices": 2.0,
        "usd_per_million_samples": pytest.approx(usd),
        "joules_per_sample": pytest.approx(joules),
        "objective": pytest.approx(usd),
    }
    assert m["usd_per_million_samples"] == pytest.approx(1.1111111, rel=1e-6)
    assert m["joules_per_sample"] == pytest.approx(0.55)


def test_metrics_without_a_price_or_a_rate() -> None:
    m = Scoring("throughput").metrics(summary(), devices=1)
    assert m["objective"] == m["samples_per_s"] == 1000.0
    assert m["usd_per_million_samples"] is None  # no price
    assert Scoring("throughput", 3.0).metrics(summary(), 1)["usd_per_million_samples"] == pytest.approx(
        3.0 / 3600 / 1000 * 1e6
    )
    empty = Scoring("cost", 2.0).metrics({}, devices=4)
    assert empty == {
        "samples_per_s": None,
        "tokens_per_s": None,
        "peak_memory_bytes": None,
        "step_time_s": None,
        "devices": 4.0,
        "usd_per_million_samples": None,
        "joules_per_sample": None,
        "objective": None,
    }
    zero = Scoring().metrics(summary(throughput={"samples_per_s": 0}), 1)
    assert zero["samples_per_s"] == 0.0 and zero["joules_per_sample"] is None
    with pytest.raises(SummaryError, match="'peak_memory_bytes' must be a number or null, not True"):
        Scoring().metrics(summary(peak_memory_bytes=True), 1)  # a bool is no number: refused where read


# --------------------------------------------------------------------------- throughput floor


def test_throughput_floor_for_throughput_is_the_ratio_of_the_best() -> None:
    scoring = Scoring("throughput")
    assert scoring.throughput_floor(1000.0, devices=2, ratio=0.5) == 500.0
    assert scoring.throughput_floor(800.0, devices=1, ratio=0.25) == 200.0
    for ratio in (0.0, 1.0, 1.5):
        assert scoring.throughput_floor(1000.0, 1, ratio) is None
    assert scoring.throughput_floor(0.0, 1, 0.5) is None


@pytest.mark.parametrize("devices", [1, 2, 8])
def test_a_trial_at_the_cost_floor_costs_exactly_best_over_ratio(devices: int) -> None:
    scoring = Scoring("cost", price_per_gpu_hour=2.0)
    best_cost, ratio = 1.0, 0.5  # $/M samples of the best trial, on any number of devices
    floor = scoring.throughput_floor(best_cost, devices=devices, ratio=ratio)
    assert floor is not None
    assert floor == pytest.approx(2.0 * devices / 3600 / (best_cost / ratio) * 1e6)  # 555.6/s per device
    assert scoring.cost_per_million(floor, devices) == pytest.approx(best_cost / ratio)
    faster = scoring.cost_per_million(floor * 1.01, devices)
    assert faster is not None and faster < best_cost / ratio  # faster: cheaper


def test_energy_has_no_throughput_floor() -> None:
    assert Scoring("energy").throughput_floor(0.5, devices=1, ratio=0.5) is None


# --------------------------------------------------------------------------- energy


def test_energy_per_sample_from_the_counter_then_the_mean_power() -> None:
    counter = [{"energy_j": 500.0, "duration_s": 2.0, "power_w_mean": 999.0}]  # 250 W, the counter wins
    assert energy_per_sample(gpus(counter), 100.0) == pytest.approx(2.5)
    power = [{"energy_j": None, "duration_s": 2.0, "power_w_mean": 200.0}]
    assert energy_per_sample(gpus(power), 100.0) == pytest.approx(2.0)
    no_duration = [{"energy_j": 500.0, "duration_s": 0.0, "power_w_mean": 150.0}]
    assert energy_per_sample(gpus(no_duration), 100.0) == pytest.approx(1.5)
    mixed = counter + power  # 250 W + 200 W
    assert energy_per_sample(gpus(mixed), 90.0) == pytest.approx(5.0)


def test_energy_per_sample_is_none_without_figures() -> None:
    missing = [{"energy_j": None, "duration_s": 2.0, "power_w_mean": None}]
    assert energy_per_sample(gpus(missing), 100.0) is None
    one_missing = [{"energy_j": 500.0, "duration_s": 2.0}, {"duration_s": 2.0}]
    assert energy_per_sample(gpus(one_missing), 100.0) is None  # not half the power
    assert energy_per_sample(gpus([]), 100.0) is None
    assert energy_per_sample(gpus(None), 100.0) is None
    assert energy_per_sample(gpus([{"power_w_mean": 200.0}]), None) is None
    assert energy_per_sample(gpus([{"power_w_mean": 200.0}]), 0.0) is None


# --------------------------------------------------------------------------- Pareto front


def test_pareto_front_of_a_small_set() -> None:
    points = {
        1: (1.0, 5.0),
        2: (2.0, 2.0),
        3: (5.0, 1.0),
        4: (3.0, 3.0),  # dominated by 2
        5: (2.0, 2.0),  # a tie with 2: neither dominates the other
        6: (1.0, 6.0),  # dominated by 1 (equal first, worse second)
        7: (6.0, 1.0),  # dominated by 3
    }
    assert pareto_front(points) == [1, 2, 3, 5]


def test_pareto_front_edge_cases() -> None:
    assert pareto_front({}) == []
    assert pareto_front({9: (1.0, 1.0, 1.0)}) == [9]
    three = {4: (0.0, 1.0, 2.0), 2: (0.0, 1.0, 3.0), 3: (1.0, 0.0, 5.0), 1: (-1.0, 2.0, math.inf)}
    assert pareto_front(three) == [1, 3, 4]
