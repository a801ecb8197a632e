"""The Bayesian searcher with a prediction of every configuration as its prior mean."""

from __future__ import annotations

import math
import statistics

import pytest

from autotune.search import Choice, Int, Space, make_searcher
from autotune.search.prior import MAX_WEIGHT, PriorLoss, best_predicted, prior_weight
from autotune.search.space import Value

SPACE = Space(micro_batch=Int(1, 64, power_of_two=True), precision=Choice("fp32", "bf16", "fp16"))
SPEED = {"fp32": 1.0, "bf16": 1.8, "fp16": 1.5}


def throughput(p: dict[str, Value]) -> float | None:
    """Saturating in the batch, best in bf16, out of memory above 32 in fp32 (the optimum: bf16, 64)."""
    batch, precision = int(p["micro_batch"]), str(p["precision"])
    if precision == "fp32" and batch > 32:
        return None
    return SPEED[precision] * batch / (batch + 8)


OPTIMUM = max(v for p in SPACE.points() if (v := throughput(p)) is not None)


def evaluations_to(target: float, prior, seed: int, budget: int = 21) -> float:
    searcher = make_searcher("bayes", SPACE, seed, "maximize", prior=prior)
    best = -math.inf
    for n in range(1, budget + 1):
        params = searcher.ask()
        value = throughput(params)
        searcher.tell(params, value, feasible=value is not None)
        best = max(best, value if value is not None else -math.inf)
        if best >= target:
            return n
    return math.inf


def test_a_prediction_right_up_to_a_factor_finds_the_optimum_first():
    # an uncalibrated device: every prediction a third of the truth (and none where it is out of memory)
    def prior(p):
        value = throughput(p)
        return None if value is None else value / 3

    assert [evaluations_to(OPTIMUM, prior, seed) for seed in range(3)] == [1, 1, 1]


@pytest.mark.slow
def test_a_prediction_the_wrong_way_round_costs_no_more_than_searching_without_one():
    # predicted best where it is worst: after three trials the prior's weight goes to 0 and the GP
    # searches alone. Medians over 8 seeds measured: 5.5 evaluations, against 7 without a prior and
    # 10 when the prior keeps its full weight (what this test catches)
    def inverted(p):
        value = throughput(p)
        return 1 / value if value else 100.0

    with_prior = statistics.median(evaluations_to(OPTIMUM, inverted, seed) for seed in range(8))
    without = statistics.median(evaluations_to(OPTIMUM, None, seed) for seed in range(8))
    assert with_prior <= without + 1, (with_prior, without)


def test_the_prior_changes_nothing_of_ask_being_a_function_of_the_history():
    def prior(p):
        return float(int(p["micro_batch"]))

    a = make_searcher("bayes", SPACE, 4, "maximize", prior=prior)
    a.tell({"micro_batch": 8, "precision": "fp32"}, 0.5)
    first = a.ask()
    assert a.ask() == first
    b = make_searcher("bayes", SPACE, 4, "maximize", prior=prior)
    b.replay(a.history)
    assert b.ask() == first


def test_prior_weight_is_the_slope_of_measured_on_predicted_losses():
    assert prior_weight([1.0, 2.0], [5.0, 9.0]) == 1.0  # too few trials: the prediction as it is
    assert prior_weight([1.0, 2.0, 3.0], [2.0, 2.5, 3.0]) == pytest.approx(0.5)
    assert prior_weight([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == 0.0  # the wrong way round: no weight
    assert prior_weight([1.0, 2.0, 3.0], [0.0, 10.0, 20.0]) == MAX_WEIGHT
    assert prior_weight([2.0, 2.0, 2.0], [1.0, 5.0, 3.0]) == 1.0  # a flat prediction says nothing


def test_losses_are_logarithms_of_positive_values_and_a_missing_prediction_is_neutral():
    predictions = {1: 10.0, 2: 40.0, 4: None}
    configs = [{"micro_batch": m, "precision": "fp32"} for m in predictions]
    losses = PriorLoss(lambda p: predictions[int(p["micro_batch"])], True, [5.0], configs)
    assert losses.log
    one, two, missing = losses.prior_losses()
    assert (one, two) == pytest.approx((-math.log(10.0), -math.log(40.0)))
    assert missing == pytest.approx((one + two) / 2)  # the median of the known ones
    assert not PriorLoss(lambda p: -1.0, True, [5.0], configs).log  # a negative value: linear losses
    assert best_predicted(lambda p: predictions[int(p["micro_batch"])], configs, maximize=True) == configs[1]
    assert best_predicted(lambda p: predictions[int(p["micro_batch"])], configs, maximize=False) == configs[0]
