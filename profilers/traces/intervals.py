"""Interval arithmetic on (start, end) spans: merge, union length, overlap length.

Shared by the deep-profile window's summary (:mod:`profilers.runtime.deep`) and the trace analysis
(:mod:`profilers.traces.gpu_time`), so GPU busy time and communication overlap mean one thing.
"""

from __future__ import annotations

from collections.abc import Iterable

Span = tuple[float, float]


def merge(spans: Iterable[Span]) -> list[Span]:
    """Sorted, disjoint intervals covering ``spans`` (touching intervals join)."""
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def length(merged: Iterable[Span]) -> float:
    """Total length of disjoint intervals."""
    return sum((end - start for start, end in merged), 0.0)


def union_us(spans: Iterable[Span]) -> float:
    """Length of the union of ``spans`` (time covered by at least one)."""
    return length(merge(spans))


def overlap_merged(left: list[Span], right: list[Span]) -> float:
    """Length of the time covered by both of two merged (sorted, disjoint) interval lists."""
    i = j = 0
    total = 0.0
    while i < len(left) and j < len(right):
        lo, hi = max(left[i][0], right[j][0]), min(left[i][1], right[j][1])
        if hi > lo:
            total += hi - lo
        if left[i][1] < right[j][1]:
            i += 1
        else:
            j += 1
    return total


def overlap_us(a: Iterable[Span], b: Iterable[Span]) -> float:
    """Length of the time covered both by an interval of ``a`` and one of ``b``."""
    return overlap_merged(merge(a), merge(b))


__all__ = ["Span", "length", "merge", "overlap_merged", "overlap_us", "union_us"]
