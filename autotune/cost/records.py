"""What the cost model gives a report: the run's cost at a price per device-hour."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CostSection:
    """What the run's throughput costs at a price per device-hour."""

    price_per_gpu_hour: float  # USD per device-hour
    price_source: str  # "--price-per-gpu-hour", or the table entry's provider, date and URL
    devices: int  # devices billed (ranks)
    usd_per_million_samples: float | None
    usd_per_million_tokens: float | None
    usd_per_epoch: float | None  # with a dataset size
    dataset_samples: int | None
    usd_per_month: float  # devices × price × hours in a month × duty cycle
    duty_cycle: float  # 0-1
    joules_per_sample: float | None  # from NVML's energy counter
    # A study: the best configuration against the baseline.
    baseline_usd_per_million_samples: float | None = None
    saving_usd_per_million_samples: float | None = None
    saving_pct: float | None = None  # 0-100
    saving_usd_per_month: float | None = None  # same work at the same duty cycle
