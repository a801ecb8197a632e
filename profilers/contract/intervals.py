"""Quantiles and 95% intervals: of a mean, of a rate, of paired ratios. Pure Python.

The profile summary's intervals (``profilers.contract.summarize``), the study's between-process
spread (``profilers.contract.study.spread``), early stopping and the re-measured speedups all take their
intervals from here, so one figure has one definition.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted values (q in [0, 1])."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


#: Two-sided 95% quantiles of Student's t for 1 to 30 degrees of freedom.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom (a 95% two-sided interval).

    Exact to 3 decimals up to 30; beyond, ``1.96 + 2.4 / df`` (within 0.002 of the true value).
    """
    if df < 1:
        raise ValueError(f"t975 needs at least 1 degree of freedom, got {df}")
    return _T975[df - 1] if df <= len(_T975) else 1.96 + 2.4 / df


def mean_interval(values: Sequence[float]) -> tuple[float, float] | None:
    """The 95% interval of the mean of ``values`` (Student's t), or None for fewer than 2."""
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t975(n - 1) * sd / math.sqrt(n)
    return mean - half, mean + half


def ratio_interval(ratios: Sequence[float]) -> tuple[float, float, float]:
    """(low, geometric mean, high) of positive ratios: the 95% t interval of their mean log.

    For paired comparisons (a speedup measured in several rounds): the log makes 0.5x and 2x
    symmetric. ValueError for fewer than 2 ratios or a ratio that is not positive.
    """
    if len(ratios) < 2 or any(r <= 0 for r in ratios):
        raise ValueError(f"ratio_interval needs 2 or more positive ratios, got {list(ratios)}")
    logs = [math.log(r) for r in ratios]
    interval = mean_interval(logs)
    assert interval is not None
    return math.exp(interval[0]), math.exp(sum(logs) / len(logs)), math.exp(interval[1])


def rate_interval(rate: float | None, durations_s: Sequence[float]) -> list[float | None] | None:
    """95% interval of a throughput ``rate`` (work per second) from its steps' durations.

    The work per step is taken as fixed and the mean step time as uncertain (its t interval), so
    the rate's interval is ``rate × mean / (mean ± half-width)``; its upper end is None when the
    interval of the mean reaches 0. None without a rate or with fewer than 2 steps.
    """
    interval = mean_interval(durations_s)
    if rate is None or interval is None:
        return None
    mean = sum(durations_s) / len(durations_s)
    low, high = interval
    return [rate * mean / high, rate * mean / low if low > 0 else None]


__all__ = ["mean_interval", "quantile", "rate_interval", "ratio_interval", "t975"]
