"""The cost section of a profile summary and of a tuning study summary."""

from __future__ import annotations

import pytest

from autotune.cost.model import billed_devices, cost_section, study_cost_section
from autotune.cost.prices import load_prices, resolve_price
from autotune.report.sections import CostSection
from profilers.contract.study.summary import TuningSummary

# The keys and figures of a real `autotune profile --run-dir /tmp/x tests/scripts/train_unmodified.py`
# summary.json on a CPU (trimmed to what the cost model reads).
CPU_PROFILE = {
    "schema": 1,
    "name": "train_unmodified",
    "step_time_s": {
        "median": 0.000634283,
        "p10": 0.000620718,
        "p90": 0.000713377,
        "mean": 0.000885387598879102,
    },
    "throughput": {"samples_per_s": 9035.590751584916, "tokens_per_s": None},
    "precision": "fp32",
    "device": {"kind": "cpu", "name": "AMD EPYC", "count": 1, "index": None},
    "gpu": None,
    "ranks": None,
}


def gpu_entry(index: int, energy_j: float | None, duration_s: float, power_w_mean: float) -> dict:
    return {
        "index": index,
        "name": "NVIDIA H100 80GB HBM3",
        "samples": 1000,
        "duration_s": duration_s,
        "power_w_mean": power_w_mean,
        "energy_j": energy_j,
    }


def ddp_profile(samples_per_s: float, tokens_per_s: float | None = None) -> dict:
    """An 8-rank DDP profile on H100s (the keys profilers.contract.summarize writes)."""
    ranks = [{"rank": r, "samples_per_s": samples_per_s / 8, "tokens_per_s": None} for r in range(8)]
    return {
        "schema": 1,
        "throughput": {
            "samples_per_s": samples_per_s,
            "tokens_per_s": tokens_per_s,
            "per_rank_samples_per_s": [samples_per_s / 8] * 8,
        },
        "device": {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3", "count": 8, "index": 0},
        # each GPU: 70,000 J over 100 s = 700 W
        "gpu": [gpu_entry(i, 70_000.0, 100.0, 690.0) for i in range(8)],
        "ranks": ranks,
    }


def test_cost_of_a_real_cpu_profile_at_an_explicit_price():
    quote = resolve_price(None, explicit=1.5)
    section = cost_section(CPU_PROFILE, quote, duty_cycle=0.5, dataset_samples=60_000)
    assert isinstance(section, CostSection)
    # 1 device at $1.50/h; 9,035.59 samples/s × 3,600 s = 32.528 million samples an hour
    per_million = 1.5 / (9035.590751584916 * 3600 / 1e6)
    assert section.usd_per_million_samples == pytest.approx(per_million)
    assert section.usd_per_million_samples == pytest.approx(0.046114, rel=1e-4)
    # one epoch of 60,000 samples: 60,000 / 9,035.59 s = 6.6404 s = 0.0018446 h × $1.50
    assert section.usd_per_epoch == pytest.approx(60_000 / 9035.590751584916 / 3600 * 1.5)
    assert section.usd_per_month == pytest.approx(1 * 1.5 * 730 * 0.5)  # $547.50
    assert section.devices == 1
    assert section.price_per_gpu_hour == 1.5
    assert section.price_source == "--price-per-gpu-hour"
    assert section.usd_per_million_tokens is None
    assert section.joules_per_sample is None  # no NVML on a CPU
    assert section.baseline_usd_per_million_samples is None and section.saving_pct is None


def test_cost_of_a_ddp_gpu_profile_from_a_price_file_against_a_baseline(tmp_path):
    prices = tmp_path / "prices.toml"
    prices.write_text(
        '[[price]]\ngpu = "H100-SXM"\nprovider = "mycloud"\nusd_per_gpu_hour = 2.1\n'
        'date = "2026-11-01"\nsource = "contract"\n'
    )
    run = ddp_profile(12_000.0, tokens_per_s=12_000.0 * 2048)
    quote = resolve_price(run["device"]["name"], provider="mycloud", table=load_prices(prices))
    baseline = ddp_profile(9_600.0)
    section = cost_section(run, quote, duty_cycle=1.0, baseline_summary=baseline)
    # 8 ranks billed: 8 × $2.10 = $16.80 an hour
    assert section.devices == 8
    # 12,000 samples/s × 3,600 = 43.2 M samples an hour: $16.80 / 43.2 = $0.38889 per million
    assert section.usd_per_million_samples == pytest.approx(16.8 / 43.2)
    # 24.576 M tokens/s × 3,600 = 88,473.6 M tokens an hour: $16.80 / 88,473.6 per million
    assert section.usd_per_million_tokens == pytest.approx(16.8 / 88_473.6)
    assert section.usd_per_month == pytest.approx(8 * 2.1 * 730)  # $12,264
    # 8 GPUs × 700 W = 5,600 W over 12,000 samples/s = 0.46667 J per sample
    assert section.joules_per_sample == pytest.approx(5600 / 12_000)
    # the baseline: 9,600 samples/s = 34.56 M an hour, $16.80 / 34.56 = $0.48611 per million
    assert section.baseline_usd_per_million_samples == pytest.approx(16.8 / 34.56)
    assert section.saving_usd_per_million_samples == pytest.approx(16.8 / 34.56 - 16.8 / 43.2)
    # same devices, 1.25× the throughput: 1 − 9,600/12,000 = 20% saved, 20% of $12,264 = $2,452.80
    assert section.saving_pct == pytest.approx(20.0)
    assert section.saving_usd_per_month == pytest.approx(2452.8)
    assert "mycloud" in section.price_source and "2026-11-01" in section.price_source


def test_devices_billed_are_the_ranks():
    assert billed_devices(CPU_PROFILE) == 1
    assert billed_devices(ddp_profile(1.0)) == 8
    # a rank that never reported still holds its device: device.count (the world size) wins
    partial = {**ddp_profile(1.0), "ranks": [{"rank": 0}]}
    assert billed_devices(partial) == 8
    assert billed_devices({}) == 1


def trial(trial_id, throughput, world_size, *, baseline=False, status="ok", usd=None, joules=None):
    """One trial as autotune.tuner.tune_summary.trial_entry writes it."""
    return {
        "id": trial_id,
        "baseline": baseline,
        "params": {"micro_batch": 8},
        "status": status,
        "objective": throughput,
        "throughput": throughput,
        "tokens_per_s": None,
        "peak_memory_bytes": 1 << 30,
        "step_time_s": 0.01,
        "usd_per_million_samples": usd,
        "joules_per_sample": joules,
        "world_size": world_size,
        "duration_s": 30.0,
        "stop_reason": "max_steps",
        "params_used": {},
        "run_dir": "/tmp/study/trials/1",
        "error": None,
    }


def study(best, baseline, price=None):
    trials = [t for t in (baseline, best) if t is not None]
    summary = {"schema": 1, "kind": "tune", "price_per_gpu_hour": price, "best": best, "baseline": baseline,
               "trials": trials}  # fmt: skip
    return TuningSummary.parse(summary, "summary.json")


CONFIRMED = {"speedup_confirmation_rounds": 3, "speedup_geomean": 3.2, "speedup_ci95": [3.0, 3.4]}


def test_cost_of_a_study_best_against_its_baseline():
    summary = study(
        best={**trial(3, 1600.0, 2, joules=0.8), "speedup_vs_baseline": 3.2, **CONFIRMED},
        baseline=trial(0, 500.0, 1, baseline=True),
    )
    section = study_cost_section(summary, resolve_price(None, explicit=3.0), duty_cycle=0.5)
    # best: 2 ranks × $3 = $6/h; 1,600 samples/s × 3,600 = 5.76 M an hour -> $1.0417 per million
    assert section.devices == 2
    assert section.usd_per_million_samples == pytest.approx(6 / 5.76)
    # baseline: 1 rank, $3/h; 500 × 3,600 = 1.8 M an hour -> $1.6667 per million
    assert section.baseline_usd_per_million_samples == pytest.approx(3 / 1.8)
    assert section.saving_usd_per_million_samples == pytest.approx(3 / 1.8 - 6 / 5.76)  # $0.625
    # (6 / 5.76) / (3 / 1.8) = 0.625 of the cost: 37.5% saved
    assert section.saving_pct == pytest.approx(37.5)
    # the baseline's month at 50%: 1 × $3 × 730 h × 0.5 = $1,095; 37.5% of it = $410.625
    assert section.saving_usd_per_month == pytest.approx(410.625)
    # the best configuration's own month: 2 × $3 × 730 × 0.5 = $2,190
    assert section.usd_per_month == pytest.approx(2190.0)
    assert section.joules_per_sample == 0.8
    assert section.usd_per_epoch is None


def test_a_study_saves_nothing_until_its_verdict_is_to_apply():
    """The same best, never measured again (or within the noise): the baseline's cost is shown beside it,
    and no saving is claimed (no figure may promise what the verdict does not)."""
    best = {**trial(3, 1600.0, 2), "speedup_vs_baseline": 3.2}
    quote = resolve_price(None, explicit=3.0)
    unconfirmed = study_cost_section(study(best=best, baseline=trial(0, 500.0, 1, baseline=True)), quote, 0.5)
    assert unconfirmed.baseline_usd_per_million_samples == pytest.approx(3 / 1.8)
    assert unconfirmed.saving_pct is None and unconfirmed.saving_usd_per_month is None
    noise = {**best, **CONFIRMED, "speedup_geomean": 1.1, "speedup_ci95": [0.8, 1.5]}
    section = study_cost_section(study(best=noise, baseline=trial(0, 500.0, 1, baseline=True)), quote, 0.5)
    assert section.saving_pct is None


def test_a_study_trial_without_throughput_is_repriced_from_its_recorded_cost():
    # recorded at the study's $2.00: $1.00 per million; at $3.00 the same samples cost $1.50
    summary = study(best=trial(3, None, 1, usd=1.0), baseline=None, price=2.0)
    section = study_cost_section(
        summary, resolve_price(None, explicit=3.0), duty_cycle=1.0, dataset_samples=2_000_000
    )
    assert section.usd_per_million_samples == pytest.approx(1.5)
    assert section.usd_per_epoch == pytest.approx(3.0)  # 2 million samples × $1.50 per million
    assert section.baseline_usd_per_million_samples is None and section.saving_pct is None


def test_a_study_without_a_best_trial_or_with_a_failed_baseline():
    quote = resolve_price(None, explicit=3.0)
    assert study_cost_section(study(best=None, baseline=None), quote, 1.0) is None
    crashed = trial(0, None, 1, baseline=True, status="crashed")
    section = study_cost_section(study(best=trial(1, 1000.0, 1), baseline=crashed), quote, 1.0)
    assert section.baseline_usd_per_million_samples is None
    assert section.saving_usd_per_month is None
