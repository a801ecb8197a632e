"""Bounded series for drawing: a whole run in a fixed number of buckets, and the recent steps.

A run of 100k steps and 1M samples must not be held in memory, nor read again on each refresh.
:class:`Buckets` keeps at most ``capacity`` buckets over an axis (wall-clock nanoseconds for the
device samples, the step number for the steps); each bucket holds, per field, the count, sum and
maximum of the values that fell in it. When a value lands past the last bucket, neighbouring
buckets are merged in pairs and the bucket width doubles, so memory stays fixed however long the
run is, and every value read so far is still accounted for. The first read of a run fills the
buckets from an SQL ``GROUP BY`` (:meth:`Buckets.merge_row`); later refreshes add the new rows one
by one (:meth:`Buckets.add`).
"""

from __future__ import annotations

from collections.abc import Sequence

#: Buckets kept per series (a sparkline is drawn from these, a few per character cell).
CAPACITY = 256


def bucket_width(span: float, base: float, capacity: int = CAPACITY) -> float:
    """The smallest ``base * 2**k`` whose ``capacity`` buckets cover ``span`` (from an origin)."""
    width = base
    while span >= width * capacity:
        width *= 2
    return width


class Buckets:
    """Per-field count, sum and maximum in at most ``capacity`` equal buckets from ``origin``.

    ``width`` starts at ``base`` and doubles (merging pairs of buckets) whenever a value would fall
    past the last bucket. Values below ``origin`` count in the first bucket.
    """

    def __init__(
        self, fields: Sequence[str], origin: float, base: float, capacity: int = CAPACITY, width: float = 0.0
    ) -> None:
        self.fields = tuple(fields)
        self.origin = origin
        self.capacity = capacity
        self.width = max(width, base)
        self._count = {f: [0] * capacity for f in self.fields}
        self._sum = {f: [0.0] * capacity for f in self.fields}
        self._max: dict[str, list[float | None]] = {f: [None] * capacity for f in self.fields}
        self.used = 0  # buckets in use: 1 + the index of the last bucket that received a value

    def _index(self, x: float) -> int:
        i = int((x - self.origin) // self.width)
        while i >= self.capacity:
            self._halve()
            i = int((x - self.origin) // self.width)
        return max(i, 0)

    def _halve(self) -> None:
        """Merge buckets in pairs: half as many buckets of twice the width."""
        half = self.capacity // 2
        for f in self.fields:
            count, total, peak = self._count[f], self._sum[f], self._max[f]
            for i in range(half):
                a, b = 2 * i, 2 * i + 1
                count[i] = count[a] + count[b]
                total[i] = total[a] + total[b]
                pa, pb = peak[a], peak[b]
                peak[i] = pb if pa is None else (pa if pb is None else max(pa, pb))
            for i in range(half, self.capacity):
                count[i], total[i], peak[i] = 0, 0.0, None
        self.width *= 2
        self.used = (self.used + 1) // 2

    def add(self, x: float, values: Sequence[float | None]) -> None:
        """Add one point: ``values`` in field order (None: not measured, not counted)."""
        i = self._index(x)
        for f, v in zip(self.fields, values, strict=True):
            if v is None:
                continue
            self._count[f][i] += 1
            self._sum[f][i] += v
            peaks = self._max[f]
            if peaks[i] is None or v > peaks[i]:  # type: ignore[operator]
                peaks[i] = v
        if i >= self.used:
            self.used = i + 1

    def merge_row(
        self, x: float, counts: Sequence[int], sums: Sequence[float | None], peaks: Sequence[float | None]
    ) -> None:
        """Add a pre-aggregated group (an SQL GROUP BY row) whose points all lie in ``x``'s bucket."""
        i = self._index(x)
        for f, n, total, top in zip(self.fields, counts, sums, peaks, strict=True):
            if not n:
                continue
            self._count[f][i] += n
            self._sum[f][i] += total or 0.0
            peak = self._max[f][i]
            if top is not None and (peak is None or top > peak):
                self._max[f][i] = top
        self.used = max(self.used, i + 1)

    def means(self, field: str) -> list[float]:
        """The mean of ``field`` per bucket in use; an empty bucket repeats the previous mean."""
        out: list[float] = []
        count, total = self._count[field], self._sum[field]
        last: float | None = None
        for i in range(self.used):
            if count[i]:
                last = total[i] / count[i]
            if last is not None:
                out.append(last)
        return out

    def ratio(self, numerator: str, denominator: str, scale: float = 1.0) -> list[float]:
        """``scale * sum(numerator) / sum(denominator)`` per bucket in use (a rate, e.g. samples/s)."""
        out: list[float] = []
        last: float | None = None
        for i in range(self.used):
            den = self._sum[denominator][i]
            if self._count[numerator][i] and den > 0:
                last = scale * self._sum[numerator][i] / den
            if last is not None:
                out.append(last)
        return out

    def peak(self, field: str) -> float | None:
        """The largest value of ``field`` seen so far."""
        return max((v for v in self._max[field][: self.used] if v is not None), default=None)

    def count(self, field: str) -> int:
        """How many values of ``field`` were added."""
        return sum(self._count[field][: self.used])
