"""The between-process spread of a study's anchors, and the search's ratios that carry it."""

import math
import random
import statistics

import pytest

from profilers.contract.intervals import t975
from profilers.contract.study.spread import AnchorRun, process_spread, ratio_span, search_ratio


def _anchor(index, rate, ci=None, at=None):
    return AnchorRun(index, rate, ci, at, None if at is None else at + 10.0)


def test_the_issues_two_processes_of_one_configuration():
    """130,821 and 81,813 samples/s from two processes of the same configuration, each ±6% by its own
    interval: they disagree beyond their own intervals, and the spread says so."""
    anchors = [
        _anchor(0, 130_821.0, (123_000.0, 138_700.0)),
        _anchor(1, 81_813.0, (76_900.0, 86_700.0)),
    ]
    spread = process_spread(anchors)
    assert spread.processes == 2 and spread.dof == 1
    assert spread.low_samples_per_s == 81_813.0 and spread.high_samples_per_s == 130_821.0
    # sd of two logs: |log(130821 / 81813)| / sqrt(2)
    assert spread.log_sd == pytest.approx(abs(math.log(130_821 / 81_813)) / math.sqrt(2))
    assert spread.beyond_own_intervals
    assert "disagree beyond their own intervals" in spread.sentence()
    # the search ratio of a third process of the same configuration at the first one's speed: 1.6x the
    # nearest anchor, and its interval holds 1 (t with 1 degree of freedom: 12.7)
    ratio = search_ratio(130_000.0, (122_000.0, 138_000.0), None, anchors)
    assert ratio.ratio == pytest.approx(130_000 / 130_821) and ratio.anchor == 0
    assert ratio.holds_one()


def test_a_ratio_is_taken_against_the_anchor_nearest_in_time():
    anchors = [_anchor(0, 100.0, at=0.0), _anchor(1, 110.0, at=1000.0), _anchor(2, 90.0, at=2000.0)]
    assert search_ratio(99.0, None, 1100.0, anchors).anchor == 1
    assert search_ratio(99.0, None, 1900.0, anchors).anchor == 2
    assert search_ratio(99.0, None, 1900.0, anchors).ratio == pytest.approx(99 / 90)
    failed = [*anchors[:2], AnchorRun(2, None, None, 2000.0, 2010.0)]  # a failed anchor is no reference
    assert search_ratio(99.0, None, 1900.0, failed).anchor == 1


def test_the_interval_is_the_spread_on_both_sides_of_the_ratio():
    """sd(log ratio)² = s² + max(s², w²), t with the anchors' degrees of freedom, computed by hand."""
    rates = [1000.0, 1100.0, 950.0]
    anchors = [_anchor(i, r, at=100.0 * i) for i, r in enumerate(rates)]
    s = statistics.stdev(math.log(r) for r in rates)
    quiet = search_ratio(1500.0, (1490.0, 1510.0), 0.0, anchors)  # its own interval narrower than s
    half = t975(2) * math.sqrt(2) * s
    assert quiet.ratio == pytest.approx(1.5)
    assert quiet.ci95 == pytest.approx((1.5 * math.exp(-half), 1.5 * math.exp(half)))
    noisy = search_ratio(1500.0, (1000.0, 2250.0), 0.0, anchors)  # its own sd above s
    w = math.log(2250 / 1000) / 2 / 1.96
    half = t975(2) * math.sqrt(s**2 + w**2)
    assert noisy.ci95 == pytest.approx((1.5 * math.exp(-half), 1.5 * math.exp(half)))
    one = search_ratio(1500.0, (1490.0, 1510.0), 0.0, anchors[:1])
    assert one.ratio == pytest.approx(1.5) and one.ci95 is None  # one process: the spread is unknown


def test_identical_configurations_read_1x_within_their_interval_95_percent_of_the_time():
    """Simulated studies of one configuration run as separate processes (log-normal between processes,
    as this machine's runs scatter): the search ratio's interval holds 1 in about 95% of them, while a
    trial's own interval (its steps only) would not. 4,000 draws: the coverage's sd is 0.35 points, so
    0.93 is more than 5 sd below 0.95."""
    rng = random.Random(20261206)
    held, own_held, n = 0, 0, 4000
    for i in range(n):
        processes = 2 + i % 4  # 2 to 5 anchors, as studies of 2 to 16 trials have
        sd = 0.2
        rates = [1000.0 * math.exp(rng.gauss(0, sd)) for _ in range(processes)]
        anchors = [_anchor(k, r, (0.97 * r, 1.03 * r), at=100.0 * k) for k, r in enumerate(rates)]
        trial = 1000.0 * math.exp(rng.gauss(0, sd))
        ratio = search_ratio(trial, (0.97 * trial, 1.03 * trial), rng.uniform(0, 100.0 * processes), anchors)
        held += bool(ratio.holds_one())
        own_low, own_high = 0.97 / 1.03, 1.03 / 0.97  # the two own intervals, combined at their ends
        own_held += own_low <= (ratio.ratio or 0) <= own_high
    assert 0.93 <= held / n <= 0.99
    assert own_held / n < 0.3  # the within-process intervals alone call most identical pairs different


def test_a_ratios_interval_for_people_never_shows_a_giant_number():
    assert ratio_span((0.4, 2.48)) == "0.40–2.48×"
    assert ratio_span((0.000001, 1_657_385_605.28)) == "under 0.01–over 100×"


def test_how_the_trials_ran_is_one_line_for_every_view():
    from profilers.contract.study.summary import TrialEntry
    from profilers.contract.study.trials import placement_line

    def entry(i, devices, node="n1"):
        data = {"id": i, "status": "ok", "executor": "local", "node": node, "devices": devices}
        return TrialEntry.parse(data, "summary.json")

    at_once = [entry(0, None), entry(1, "cpu:0"), entry(2, "cpu:1")]
    assert placement_line(at_once, 2, "local", 1) == (
        "trials ran up to 2 at once on this machine (n1), each on devices of its own (cpu:0, cpu:1), "
        "1 thread per process"
    )
    one = [entry(0, None), entry(1, None, node="n2")]
    expected = "trials ran one at a time on Ray (n1, n2), 2 threads per process"
    assert placement_line(one, 1, "ray", 2) == expected
    assert placement_line(one, None, None, None) is None  # a study from before it was recorded
