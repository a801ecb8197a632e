"""The cost formulas, each checked against arithmetic written out by hand."""

from __future__ import annotations

import pytest

from autotune.cost.model import (
    HOURS_PER_MONTH,
    saving_from_speedup,
    saving_vs_baseline,
    usd_per_epoch,
    usd_per_hour,
    usd_per_million_samples,
    usd_per_million_tokens,
    usd_per_month,
)
from autotune.tuner.objectives import Scoring


def test_a_month_is_730_hours():
    assert HOURS_PER_MONTH == 365 * 24 / 12 == 730


def test_usd_per_million_samples():
    # 8 GPUs at $2.00 each: $16 an hour. 4,000 samples/s × 3,600 s = 14.4 million samples an hour.
    # $16 / 14.4 M = $1.1111 per million samples.
    assert usd_per_hour(2.0, 8) == 16.0
    assert usd_per_million_samples(4000.0, 8, 2.0) == pytest.approx(16 / 14.4)
    # the tuner's cost objective uses the same formula
    assert Scoring("cost", 2.0).cost_per_million(4000.0, 8) == pytest.approx(16 / 14.4)


def test_usd_per_million_tokens():
    # 2,000,000 tokens/s × 3,600 s = 7,200 million tokens an hour for $16: $0.0022222 per million.
    assert usd_per_million_tokens(2_000_000.0, 8, 2.0) == pytest.approx(16 / 7200)


@pytest.mark.parametrize("rate", [None, 0.0, -1.0])
def test_no_rate_gives_no_cost(rate):
    assert usd_per_million_samples(rate, 8, 2.0) is None
    assert usd_per_million_tokens(rate, 8, 2.0) is None
    assert usd_per_epoch(rate, 8, 2.0, 1000) is None


def test_usd_per_epoch():
    # ImageNet-1k, 1,281,167 samples at 4,000 samples/s: 320.29 s = 0.088970 h, × $16/h = $1.4235.
    hours = 1_281_167 / 4000 / 3600
    assert usd_per_epoch(4000.0, 8, 2.0, 1_281_167) == pytest.approx(hours * 16)
    assert usd_per_epoch(4000.0, 8, 2.0, None) is None
    assert usd_per_epoch(4000.0, 8, 2.0, 0) is None


def test_usd_per_month():
    # 8 GPUs × $2.00 × 730 h × 25% of the month = $2,920.
    assert usd_per_month(8, 2.0, 0.25) == pytest.approx(2920.0)
    assert usd_per_month(1, 3.0, 1.0) == pytest.approx(2190.0)
    assert usd_per_month(8, 2.0, 0.0) == 0.0
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="duty cycle"):
            usd_per_month(8, 2.0, bad)


def test_saving_against_a_baseline():
    # $1.00 -> $0.80 per million samples: $0.20 less, 20% less; the baseline's $2,920 month of work
    # now costs 0.8 × 2,920 = $2,336, which saves $584.
    saving = saving_vs_baseline(0.80, 1.00, 2920.0)
    assert saving.usd_per_million_samples == pytest.approx(0.20)
    assert saving.pct == pytest.approx(20.0)
    assert saving.usd_per_month == pytest.approx(584.0)
    dearer = saving_vs_baseline(1.25, 1.00, 1000.0)  # 25% dearer: a negative saving
    assert dearer.pct == pytest.approx(-25.0)
    assert dearer.usd_per_month == pytest.approx(-250.0)
    with pytest.raises(ValueError):
        saving_vs_baseline(1.0, 0.0, 1000.0)


@pytest.mark.parametrize(
    ("speedup", "pct", "usd"),
    [
        (1.25, 20.0, 200.0),  # the same work in 1/1.25 = 80% of the time: 20% of $1,000 saved
        (2.0, 50.0, 500.0),
        (1.0, 0.0, 0.0),
        (0.8, -25.0, -250.0),  # a slowdown: 1/0.8 = 125% of the time
    ],
)
def test_saving_from_speedup(speedup, pct, usd):
    got_pct, got_usd = saving_from_speedup(speedup, 1000.0)
    assert got_pct == pytest.approx(pct)
    assert got_usd == pytest.approx(usd)


@pytest.mark.parametrize("speedup", [0.0, -1.0, float("inf"), float("nan")])
def test_saving_from_a_bad_speedup_raises(speedup):
    with pytest.raises(ValueError, match="speedup"):
        saving_from_speedup(speedup, 1000.0)


