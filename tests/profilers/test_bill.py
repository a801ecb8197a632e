"""The study's bill: what its processes held, what its best saves, and when the one pays back the other."""

from __future__ import annotations

from typing import Any

import pytest

from profilers.contract.study.bill import DAYS_PER_MONTH, device_time
from profilers.contract.study.cost import study_bill
from profilers.contract.study.summary import TuningSummary


def entry(trial_id: int, rate: float, seconds: float | None, world: int = 1, **more: Any) -> dict[str, Any]:
    return {
        "id": trial_id, "status": "ok", "params": {} if trial_id == 0 else {"micro_batch": 8},
        "baseline": trial_id == 0, "throughput": rate, "objective": rate, "duration_s": seconds,
        "world_size": world, **more,
    }  # fmt: skip


def study(
    speedup: float, best_world: int = 1, rounds: int = 5, best_seconds: float = 1800.0
) -> TuningSummary:
    """A baseline of 100 samples/s on one device (1 h), a best (30 min) re-measured at ``speedup``,
    an OOM of 6 min, a skipped trial, one anchor of 1 h and ``rounds`` rounds of 2 × 3 min."""
    base = entry(0, 100.0, 3600.0)
    best = entry(
        1, 100.0 * speedup, best_seconds, best_world, speedup_vs_baseline=speedup,
        speedup_confirmation_rounds=rounds, speedup_geomean=speedup if rounds else None,
        speedup_ci95=[speedup * 0.9, speedup * 1.1] if rounds > 1 else None,
    )  # fmt: skip
    oom = {"id": 2, "status": "oom", "params": {"micro_batch": 64}, "duration_s": 360.0, "world_size": 1}
    skipped = {"id": 3, "status": "skipped", "params": {"micro_batch": 128}, "duration_s": 0.0}
    again = [
        {"round": r, "role": role, "status": "ok", "samples_per_s": 100.0, "duration_s": 180.0}
        for r in range(rounds) for role in ("baseline", "best")
    ]  # fmt: skip
    anchor = [{"round": 1, "role": "anchor", "status": "ok", "samples_per_s": 100.0, "duration_s": 3600.0}]
    raw = {
        "trials": [base, best, oom, skipped], "best": best, "baseline": base, "stopped": None,
        "confirmations": again, "anchors": anchor, "machine_cores": 2.0,
        "threads": {"device_kind": "cuda"},
    }  # fmt: skip
    return TuningSummary.parse(raw, "a study")


def test_every_process_is_billed_on_its_devices_and_the_saving_pays_it_back():
    s = study(speedup=2.5, best_world=2)
    assert s.best is not None
    bill = study_bill(s, price_per_gpu_hour=4.0, price_source="--price-per-gpu-hour", usage_hours_per_day=8)
    # trials: 1 h + 0.5 h × 2 devices + 0.1 h (the OOM); the skipped one never ran
    assert bill.trials_device_hours == pytest.approx(1 + 1 + 0.1)
    # the anchor (1 h), 5 baseline rounds on 1 device and 5 best rounds on 2, 3 min each
    assert bill.remeasure_device_hours == pytest.approx(1 + 5 * 0.05 + 5 * 0.05 * 2)
    assert bill.device_hours == pytest.approx(2.1 + 1.75) and bill.processes == 3 + 1 + 10
    assert bill.usd == pytest.approx(3.85 * 4)
    # 2 devices at 2.5× the samples: each sample costs 2 / 2.5 = 0.8 of the baseline's device-time
    assert bill.saving_share == pytest.approx(0.2)
    assert bill.saving_usd_per_day == pytest.approx(0.2 * 1 * 8 * 4)  # the baseline's 1 device, 8 h a day
    assert bill.payback_training_hours == pytest.approx(3.85 / 0.2)  # 19.25 h of training
    assert bill.payback_days == pytest.approx(3.85 / 0.2 / 8)
    assert bill.pays_back_in_month is True
    words = bill.sentence()
    assert "3.85 device-hours ($15.40 at $4.00/device-hour) over 14 processes" in words
    assert "saves 20% of the baseline's device-time per sample, $6.40 a day at 8 h a day" in words
    assert "pays back after 19.3 h of training (2.41 days at 8 h a day)" in words


def test_without_a_price_the_payback_is_still_in_hours_of_training():
    bill = study_bill(study(speedup=2.0))
    assert bill.usd is None and bill.price_source is None and bill.saving_usd_per_day is None
    assert bill.saving_share == pytest.approx(0.5)
    assert bill.payback_training_hours == pytest.approx(bill.device_hours / 0.5)
    assert bill.payback_days is None  # no usage said: hours of training only
    assert "$" not in bill.sentence() and "of training" in bill.sentence()


@pytest.mark.parametrize(
    ("speedup", "rounds", "why"),
    [(1.01, 5, "a gain too small to act on"), (2.0, 0, "not measured again"), (2.0, 1, "measured once")],
)
def test_no_saving_is_claimed_that_the_verdict_does_not_apply(speedup, rounds, why):
    bill = study_bill(study(speedup=speedup, rounds=rounds), 4.0, "x", 24)
    assert bill.saving_share is None and bill.payback_training_hours is None, why
    assert bill.pays_back_in_month is False
    assert bill.usd is not None and bill.usd > 0  # the study still cost what it cost
    assert "claims no saving, so it does not pay back" in bill.sentence()


def test_a_study_that_cannot_pay_back_within_a_month_says_so():
    """A 20% saving on one device, half an hour a day: 3.1 device-hours need 15.5 h of training, 31 days."""
    bill = study_bill(study(speedup=1.25), 4.0, "x", usage_hours_per_day=0.5)
    assert bill.saving_share == pytest.approx(0.2)
    assert bill.payback_days == pytest.approx(3.1 / 0.2 / 0.5) and bill.payback_days > DAYS_PER_MONTH
    assert bill.pays_back_in_month is False
    assert "does not pay back within a month of training 0.5 h a day" in bill.sentence()
    # the same study at 24 h a day pays back in 0.7 days: within the month
    assert study_bill(study(speedup=1.25), 4.0, "x", 24).pays_back_in_month is True


def test_a_process_without_a_recorded_time_is_counted_and_said():
    s = study(speedup=2.0)
    raw = s.to_json()
    raw["trials"][1] = {**raw["trials"][1], "duration_s": None}
    bill = study_bill(TuningSummary.parse(raw, "a study"))
    assert bill.processes_without_time == 1
    assert bill.trials_device_hours == pytest.approx(1.1)
    assert "1 without a recorded time left out" in bill.sentence()


def test_the_bill_round_trips_through_summary_json():
    bill = study_bill(study(speedup=2.0), 3.0, "table", 12)
    raw = {**study(speedup=2.0).to_json(), "bill": bill.to_dict(), "usage_hours_per_day": 12}
    parsed = TuningSummary.parse(raw, "a study")
    assert parsed.bill == bill and parsed.usage_hours_per_day == 12


@pytest.mark.parametrize(
    ("hours", "words"), [(3.2, "3.2 device-hours"), (0.2, "12 device-minutes"), (0.01, "36 device-seconds")]
)
def test_device_time_in_words(hours, words):
    assert device_time(hours) == words


def test_faster_on_more_devices_but_dearer_per_sample_never_pays_back():
    """2 devices at 1.6× the throughput: each sample takes 2 / 1.6 = 1.25 of the baseline's device-time."""
    bill = study_bill(study(speedup=1.6, best_world=2), 4.0, "x", 8)
    assert bill.saving_share == pytest.approx(-0.25)
    assert bill.payback_training_hours is None and bill.saving_usd_per_day is None
    assert bill.pays_back_in_month is False
    assert "the best costs 25% more device-time per sample than the baseline" in bill.sentence()
