"""Scoring a trial, apart from searching: throughput, cost or energy from what the profiler measured.

- ``throughput``: samples per second of the whole job (maximize).
- ``cost``: dollars per million samples at ``price_per_gpu_hour`` for each of the trial's
  devices (ranks) (minimize).
- ``energy``: joules per sample from the GPUs' NVML energy counter, else their mean power
  (minimize); a run without NVML figures has no energy.

Every trial also gets the other metrics it can have, so reports can compare on any of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from profilers.contract.profile_summary import ProfileSummary
from profilers.contract.study.trials import energy_per_sample, usd_per_million

ObjectiveName = Literal["throughput", "cost", "energy"]
#: Each objective and whether larger or smaller is better.
OBJECTIVES: Mapping[str, Literal["maximize", "minimize"]] = {
    "throughput": "maximize",
    "cost": "minimize",
    "energy": "minimize",
}
#: The metric key of each objective in a trial's metrics.
OBJECTIVE_METRIC = {
    "throughput": "samples_per_s",
    "cost": "usd_per_million_samples",
    "energy": "joules_per_sample",
}


@dataclass(frozen=True)
class Scoring:
    """How trials are scored: the objective and, for cost, the price of one device-hour."""

    objective: ObjectiveName = "throughput"
    price_per_gpu_hour: float | None = None

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {self.objective!r}; choose from {', '.join(OBJECTIVES)}")
        if self.objective == "cost" and self.price_per_gpu_hour is None:
            raise ValueError("--objective cost needs --price-per-gpu-hour USD (the price of one device-hour)")
        if self.price_per_gpu_hour is not None and not self.price_per_gpu_hour > 0:
            raise ValueError(f"the price per GPU-hour must be > 0, got {self.price_per_gpu_hour}")

    @property
    def direction(self) -> Literal["maximize", "minimize"]:
        """Whether the study maximizes or minimizes the objective."""
        return OBJECTIVES[self.objective]

    @property
    def metric(self) -> str:
        """The key of the objective in a trial's metrics."""
        return OBJECTIVE_METRIC[self.objective]

    def metrics(self, summary: ProfileSummary | Mapping[str, Any], devices: int) -> dict[str, float | None]:
        """Every metric of a trial from its profiler summary; ``objective`` is the scored one.

        ``summary`` is the parsed record, or summary.json's dict (parsed here).
        """
        summary = ProfileSummary.of(summary)
        samples_per_s = _float(summary.throughput.samples_per_s)
        out: dict[str, float | None] = {
            "samples_per_s": samples_per_s,
            "tokens_per_s": _float(summary.throughput.tokens_per_s),
            "peak_memory_bytes": _float(summary.peak_memory_bytes),
            "step_time_s": _float(summary.step_time.median_s),
            "devices": float(devices),
            "usd_per_million_samples": self.cost_per_million(samples_per_s, devices),
            "joules_per_sample": energy_per_sample(summary.gpus, samples_per_s),
        }
        out["objective"] = out[self.metric]
        return out

    def cost_per_million(self, samples_per_s: float | None, devices: int) -> float | None:
        """Dollars per million samples on ``devices`` devices, or None without a price or a rate."""
        if self.price_per_gpu_hour is None:
            return None
        return usd_per_million(samples_per_s, devices, self.price_per_gpu_hour)

    def throughput_floor(self, best_value: float, devices: int, ratio: float) -> float | None:
        """Samples/s under which a trial on ``devices`` devices is clearly worse than the best.

        "Clearly worse" is ``ratio`` of the best: below ``ratio × best`` throughput, or above
        ``best / ratio`` cost. Energy depends on power too, so it has no throughput floor (None).
        """
        if not 0 < ratio < 1 or best_value <= 0:
            return None
        if self.objective == "throughput":
            return ratio * best_value
        if self.objective == "cost" and self.price_per_gpu_hour is not None:
            # the rate at which a trial costs best / ratio: the same formula, solved for the rate
            return usd_per_million(best_value / ratio, devices, self.price_per_gpu_hour)
        return None


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
