"""What a run's throughput costs: pure functions of throughput, devices and a price (no torch).

Every device the run holds is billed for the whole time (a DDP run on 8 GPUs pays 8 GPU-hours
per hour), so the devices billed are the run's ranks.

- dollars per million samples = price per device-hour × devices / 3600 / samples per s × 10⁶
  (the same formula as ``autotune.tuner.objectives.Scoring.cost_per_million``);
- dollars per epoch = dollars per million samples × dataset samples / 10⁶;
- dollars per month = devices × price × 730 h × duty cycle. A month is 730 hours: 365 days ×
  24 hours / 12 months = 730, the convention of the cloud providers' monthly estimates. The duty
  cycle is the fraction (0-1) of that month the job runs;
- a configuration against a baseline doing the same work: the same samples cost
  ``new / old`` of what they did, so a month of the baseline's work at the same duty cycle saves
  ``monthly cost × (1 − new cost / old cost)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autotune.cost.prices import PriceQuote
from autotune.cost.records import CostSection
from profilers.contract.profile_summary import ProfileSummary
from profilers.contract.study.cost import saving_share
from profilers.contract.study.summary import TrialEntry, TuningSummary
from profilers.contract.study.trials import energy_per_sample, usd_per_million

#: Hours in a month: 365 days × 24 hours / 12 months.
HOURS_PER_MONTH = 730.0


@dataclass(frozen=True, slots=True)
class Saving:
    """What a configuration saves against a baseline doing the same work (negative: it costs more)."""

    usd_per_million_samples: float  # baseline − new
    pct: float  # 0-100, of the baseline's cost
    usd_per_month: float  # a month of the baseline's work at its duty cycle


def usd_per_hour(usd_per_gpu_hour: float, devices: int) -> float:
    """Dollars per hour of a run holding ``devices`` devices."""
    return usd_per_gpu_hour * devices


def usd_per_million_samples(
    samples_per_s: float | None, devices: int, usd_per_gpu_hour: float
) -> float | None:
    """Dollars per million samples at ``samples_per_s`` (the whole job's), or None without a rate."""
    return usd_per_million(samples_per_s, devices, usd_per_gpu_hour)


def usd_per_million_tokens(tokens_per_s: float | None, devices: int, usd_per_gpu_hour: float) -> float | None:
    """Dollars per million tokens at ``tokens_per_s`` (the whole job's), or None without a rate."""
    return usd_per_million(tokens_per_s, devices, usd_per_gpu_hour)


def usd_per_epoch(
    samples_per_s: float | None, devices: int, usd_per_gpu_hour: float, dataset_samples: int | None
) -> float | None:
    """Dollars for one pass over ``dataset_samples`` samples, or None without a rate or a size."""
    return _epoch(usd_per_million_samples(samples_per_s, devices, usd_per_gpu_hour), dataset_samples)


def usd_per_month(devices: int, usd_per_gpu_hour: float, duty_cycle: float) -> float:
    """Dollars per 730-hour month for a job running ``duty_cycle`` (0-1) of the month."""
    _check_duty_cycle(duty_cycle)
    return devices * usd_per_gpu_hour * HOURS_PER_MONTH * duty_cycle


def saving_vs_baseline(
    new_usd_per_million_samples: float,
    baseline_usd_per_million_samples: float,
    baseline_usd_per_month: float,
) -> Saving:
    """The saving of a configuration against a baseline that does the same work.

    The same samples cost ``new / old`` of the baseline's cost, so the baseline's month of work
    costs ``baseline_usd_per_month × new / old``: the saving is ``monthly × (1 − new / old)``.
    """
    if not baseline_usd_per_million_samples > 0:
        raise ValueError(f"the baseline cost must be > 0, got {baseline_usd_per_million_samples}")
    ratio = new_usd_per_million_samples / baseline_usd_per_million_samples
    return Saving(
        usd_per_million_samples=baseline_usd_per_million_samples - new_usd_per_million_samples,
        pct=(1.0 - ratio) * 100.0,
        usd_per_month=baseline_usd_per_month * (1.0 - ratio),
    )


def saving_from_speedup(speedup: float, usd_per_month: float) -> tuple[float, float]:
    """(saving %, dollars saved per month) of a speedup on the same devices.

    The same work takes ``1 / speedup`` of the time, so a 1.25× speedup saves 1 − 1/1.25 = 20%
    of ``usd_per_month``. A speedup under 1 gives negative savings (a loss).
    """
    if isinstance(speedup, bool) or not math.isfinite(speedup) or speedup <= 0:
        raise ValueError(f"the speedup must be a positive number, got {speedup!r}")
    fraction = 1.0 - 1.0 / speedup
    return fraction * 100.0, usd_per_month * fraction


def billed_devices(summary: ProfileSummary | Mapping[str, Any]) -> int:
    """The devices a profile run is billed for: its ranks (``device.count``, ``ranks``), at least 1."""
    figures = ProfileSummary.of(summary)
    return max(1, figures.device.count or 1, figures.rank_count)


def cost_section(
    summary: ProfileSummary | Mapping[str, Any],
    quote: PriceQuote,
    duty_cycle: float,
    dataset_samples: int | None = None,
    baseline_summary: ProfileSummary | Mapping[str, Any] | None = None,
) -> CostSection:
    """The cost section of a profile's ``summary.json`` at ``quote``'s price.

    With ``baseline_summary`` (another profile of the same work), the baseline and saving fields
    compare the two runs at the same price and duty cycle.
    """
    figures = ProfileSummary.of(summary)
    price = quote.usd_per_gpu_hour
    devices = billed_devices(figures)
    samples_per_s = _number(figures.throughput.samples_per_s)
    tokens_per_s = _number(figures.throughput.tokens_per_s)
    per_million = usd_per_million_samples(samples_per_s, devices, price)
    baseline = None
    if baseline_summary is not None:
        base = ProfileSummary.of(baseline_summary)
        base_devices = billed_devices(base)
        base_rate = _number(base.throughput.samples_per_s)
        baseline = (usd_per_million_samples(base_rate, base_devices, price), base_devices)
    return _section(
        quote,
        duty_cycle,
        dataset_samples,
        devices=devices,
        samples_per_s=samples_per_s,
        tokens_per_s=tokens_per_s,
        per_million=per_million,
        joules=energy_per_sample(figures.gpus, samples_per_s),  # the energy objective's figure
        baseline=baseline,
    )


def study_cost_section(
    study: TuningSummary,
    quote: PriceQuote,
    duty_cycle: float,
    dataset_samples: int | None = None,
) -> CostSection | None:
    """The cost section of a tuning study: its best trial against the baseline.

    Each trial is billed for its ``world_size`` devices at ``quote``'s price (recomputed from its
    throughput, so a study run without a price, or at another one, is priced the same way). None
    when the study has no best trial. A saving is claimed only when the study's verdict is to apply
    the best configuration, and it is the verdict's (re-measured) speedup's, over the devices each
    configuration holds (:func:`profilers.contract.study.cost.saving_share`, the figure the study's bill
    pays back with), and the best's cost per million samples is then the re-measured one, the
    baseline's less that saving (the search's own figure is biased upward: it is in the trials'
    table); otherwise the baseline's cost is shown beside the search's figure with no saving.
    """
    best = study.best
    if best is None:
        return None
    baseline = None
    base = study.baseline
    per_million = _trial_cost(best, quote, study.price_per_gpu_hour)
    share = saving_share(study)
    if base is not None and base.ok:
        base_cost = _trial_cost(base, quote, study.price_per_gpu_hour)
        baseline = (base_cost, base.world_size)
        if share is not None and base_cost:
            per_million = base_cost * (1 - share)
    return _section(
        quote,
        duty_cycle,
        dataset_samples,
        devices=best.world_size,
        samples_per_s=_number(best.samples_per_s),
        tokens_per_s=_number(best.tokens_per_s),
        per_million=per_million,
        joules=_number(best.joules_per_sample),
        baseline=baseline,
        claim_saving=share is not None,
    )


def _section(
    quote: PriceQuote,
    duty_cycle: float,
    dataset_samples: int | None,
    *,
    devices: int,
    samples_per_s: float | None,
    tokens_per_s: float | None,
    per_million: float | None,
    joules: float | None,
    baseline: tuple[float | None, int] | None,
    claim_saving: bool = True,
) -> CostSection:
    price = quote.usd_per_gpu_hour
    monthly = usd_per_month(devices, price, duty_cycle)
    base_cost, saving = None, None
    if baseline is not None:
        base_cost, base_devices = baseline
        if claim_saving and base_cost is not None and base_cost > 0 and per_million is not None:
            base_monthly = usd_per_month(base_devices, price, duty_cycle)
            saving = saving_vs_baseline(per_million, base_cost, base_monthly)
    return CostSection(
        price_per_gpu_hour=price,
        price_source=quote.describe(),
        devices=devices,
        usd_per_million_samples=per_million,
        usd_per_million_tokens=usd_per_million_tokens(tokens_per_s, devices, price),
        usd_per_epoch=_epoch(per_million, dataset_samples),
        dataset_samples=dataset_samples,
        usd_per_month=monthly,
        duty_cycle=duty_cycle,
        joules_per_sample=joules,
        baseline_usd_per_million_samples=base_cost,
        saving_usd_per_million_samples=None if saving is None else saving.usd_per_million_samples,
        saving_pct=None if saving is None else saving.pct,
        saving_usd_per_month=None if saving is None else saving.usd_per_month,
    )


def _trial_cost(trial: TrialEntry, quote: PriceQuote, study_price: float | None) -> float | None:
    """A trial's dollars per million samples at ``quote``'s price.

    From its throughput when the summary has it; else its recorded cost rescaled from the
    study's price to ``quote``'s.
    """
    rate = _number(trial.samples_per_s)
    if rate:
        return usd_per_million_samples(rate, trial.world_size, quote.usd_per_gpu_hour)
    recorded = _number(trial.usd_per_million_samples)
    if recorded is None or not study_price:
        return None
    return recorded * quote.usd_per_gpu_hour / study_price


def _epoch(usd_per_million: float | None, dataset_samples: int | None) -> float | None:
    if usd_per_million is None or not dataset_samples or dataset_samples <= 0:
        return None
    return usd_per_million * dataset_samples / 1e6


def _check_duty_cycle(duty_cycle: float) -> None:
    if isinstance(duty_cycle, bool) or not 0.0 <= duty_cycle <= 1.0:
        raise ValueError(f"the duty cycle is the fraction of a month the job runs (0-1), got {duty_cycle!r}")


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)
