"""MemoryModel: which parameter is the batch, the out-of-memory rule and the linear fit."""

from __future__ import annotations

from typing import Any

import pytest

from autotune.search import Choice, Float, Int, Space, Trial
from autotune.search.space import Value, batch_param
from autotune.tuner.memory_model import MemoryModel

GIB = 2**30
SPACE = Space(micro_batch=Int(1, 256, power_of_two=True), precision=Choice("fp32", "bf16"))


def at(micro_batch: int, precision: str = "fp32") -> dict[str, Value]:
    return {"micro_batch": micro_batch, "precision": precision}


def ok(trial_id: int, micro_batch: int, peak_bytes: float, precision: str = "fp32") -> Trial:
    params: dict[str, Any] = {"micro_batch": micro_batch, "precision": precision}
    return Trial(trial_id, params, "ok", 100.0, {"peak_memory_bytes": peak_bytes}, 1.0)


def failed(trial_id: int, micro_batch: int, status: str = "oom", precision: str = "fp32") -> Trial:
    params: dict[str, Any] = {"micro_batch": micro_batch, "precision": precision}
    return Trial(trial_id, params, status, None, {}, 1.0, "CUDA out of memory")


# --------------------------------------------------------------------------- batch_param


@pytest.mark.parametrize(
    ("space", "expected"),
    [
        (Space(batch_size=Int(1, 64), micro_batch=Int(1, 8)), "micro_batch"),
        (Space(precision=Choice("fp32", "bf16"), global_batch=Int(8, 64)), "global_batch"),
        (Space(lr=Float(0.001, 0.1), BatchSize=Int(2, 32, power_of_two=True)), "BatchSize"),
        (Space(micro_batch=Choice(8, 16), batch_size=Int(8, 64)), "micro_batch"),  # a choice of integers is
        (Space(micro_batch=Choice("8", "16"), batch_size=Int(8, 64)), "batch_size"),  # ... of strings is not
        (Space(batch=Float(1.0, 64.0), depth=Int(1, 4)), None),
        (Space(batch=Choice(8, 16), lr=Float(0.001, 0.1)), "batch"),
        (Space(batch_mode=Choice(True, False), lr=Float(0.001, 0.1)), None),  # booleans are no batch
        (Space(lr=Float(0.001, 0.1), precision=Choice("fp32", "bf16")), None),
    ],
)
def test_batch_param(space: Space, expected: str | None) -> None:
    assert batch_param(space) == expected


def test_no_batch_parameter_no_prediction() -> None:
    space = Space(depth=Int(1, 8))
    trials = [Trial(0, {"depth": 2}, "oom", None, {}, 1.0)]
    assert MemoryModel(space, budget_bytes=GIB).predict_oom({"depth": 4}, trials) is None


# --------------------------------------------------------------------------- out-of-memory rule


def test_an_oom_predicts_oom_at_larger_batches_with_the_same_other_params() -> None:
    trials = [ok(0, 16, GIB), failed(1, 64)]
    model = MemoryModel(SPACE)  # no budget: only this rule
    reason = model.predict_oom(at(128), trials)
    assert reason == (
        "micro_batch=128 is at least 64, which ran out of memory with the same other parameters (trial 1)"
    )
    assert model.predict_oom(at(64), trials) is not None  # the same batch
    assert model.predict_oom(at(32), trials) is None
    assert model.predict_oom(at(128, "bf16"), trials) is None  # another precision


def test_the_smallest_oom_batch_is_named() -> None:
    trials = [failed(0, 128), failed(1, 32), failed(2, 8, precision="bf16"), failed(3, 64)]
    reason = MemoryModel(SPACE).predict_oom(at(256), trials)
    assert reason is not None and "is at least 32," in reason and "(trial 1)" in reason


def test_only_oom_trials_count_for_the_rule() -> None:
    trials = [failed(0, 16, status="crashed"), failed(1, 16, status="timeout"), failed(2, 16, "skipped")]
    assert MemoryModel(SPACE).predict_oom(at(32), trials) is None


def test_a_baseline_oom_says_nothing_about_the_space() -> None:
    space = Space(micro_batch=Int(1, 64, power_of_two=True))  # no other params: {} == {}
    baseline = Trial(0, {}, "oom", None, {}, 1.0, "CUDA out of memory")
    assert MemoryModel(space).predict_oom({"micro_batch": 64}, [baseline]) is None
    searched = Trial(1, {"micro_batch": 8}, "oom", None, {}, 1.0)
    assert MemoryModel(space).predict_oom({"micro_batch": 64}, [baseline, searched]) is not None


# --------------------------------------------------------------------------- linear fit


def test_the_linear_fit_predicts_over_the_budget() -> None:
    trials = [ok(0, 8, 1 * GIB), ok(1, 16, 2 * GIB)]  # 1 GiB per 8 samples
    model = MemoryModel(SPACE, budget_bytes=3 * GIB)  # margin 1.1: 3.3 GiB
    reason = model.predict_oom(at(32), trials)  # 4 GiB
    assert reason is not None
    assert "predicted peak memory 4.00 GiB is over the budget of 3.00 GiB" in reason
    assert "2 trials with the same other parameters, against micro_batch" in reason
    assert model.predict_oom(at(16), trials) is None  # 2 GiB
    assert model.predict_oom(at(32, "bf16"), trials) is None  # no bf16 data


def test_the_margin_tolerates_a_small_overshoot() -> None:
    trials = [ok(0, 8, 0.8 * GIB), ok(1, 16, 1.6 * GIB)]  # 32 -> 3.2 GiB: over 3 GiB, under 3.3 GiB
    params = at(32)
    assert MemoryModel(SPACE, budget_bytes=3 * GIB).predict_oom(params, trials) is None
    reason = MemoryModel(SPACE, budget_bytes=3 * GIB, margin=1.0).predict_oom(params, trials)
    assert reason is not None and "3.20 GiB" in reason


def test_the_fit_is_least_squares_over_every_ok_trial() -> None:
    # peaks of 1, 3 and 5 GiB at 8, 16 and 32: no line goes through all three; least squares by hand
    xs, ys = [8.0, 16.0, 32.0], [1.0, 3.0, 5.0]
    mx, my = sum(xs) / 3, sum(ys) / 3
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    at_64 = my + slope * (64 - mx)
    trials = [ok(i, int(x), y * GIB) for i, (x, y) in enumerate(zip(xs, ys, strict=True))]
    trials.append(failed(3, 256, status="crashed"))  # not ok: no peak in the fit, no oom either
    model = MemoryModel(SPACE, budget_bytes=4 * GIB)
    reason = model.predict_oom(at(64), trials)
    assert reason is not None and f"predicted peak memory {at_64:.2f} GiB" in reason and "3 trials" in reason


def test_fewer_than_two_distinct_batches_predict_nothing() -> None:
    model = MemoryModel(SPACE, budget_bytes=GIB)
    params = at(256)
    assert model.predict_oom(params, []) is None
    assert model.predict_oom(params, [ok(0, 16, 0.9 * GIB)]) is None
    assert model.predict_oom(params, [ok(0, 16, 0.9 * GIB), ok(1, 16, 0.95 * GIB)]) is None


def test_a_flat_or_falling_line_predicts_nothing() -> None:
    model = MemoryModel(SPACE, budget_bytes=GIB)
    params = at(256)
    assert model.predict_oom(params, [ok(0, 8, 2 * GIB), ok(1, 16, 2 * GIB)]) is None
    assert model.predict_oom(params, [ok(0, 8, 3 * GIB), ok(1, 16, 2 * GIB)]) is None


def test_without_a_budget_only_the_oom_rule_applies() -> None:
    trials = [ok(0, 8, 1 * GIB), ok(1, 16, 2 * GIB)]
    params = at(256)  # a line would say 32 GiB
    assert MemoryModel(SPACE).predict_oom(params, trials) is None
    assert MemoryModel(SPACE).predict_oom(params, [*trials, failed(2, 128)]) is not None
