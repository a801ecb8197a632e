"""Skip configurations that will run out of memory, predicted from the trials already finished.

Peak memory grows with the batch. Among trials that share every other parameter (the same layout,
precision, checkpointing...), two rules predict an out-of-memory trial without running it:

1. a batch at least as large as one that already ran out of memory will too (certain);
2. a straight line fitted through the peak memory of the finished trials against the batch
   (least squares, at least two distinct batches) predicts a peak over the budget by more than
   ``margin`` (extrapolation is only trusted that far).

The batch parameter is ``micro_batch`` when the space has it, else the first integer parameter
(or choice of integers) whose name contains "batch"; a space with neither gets no predictions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from autotune.search.records import Trial
from autotune.search.space import Space, Value, batch_param
from profilers.contract.schema import TrialStatus

GIB = 2**30


@dataclass(frozen=True)
class MemoryModel:
    """Predicts out-of-memory configurations of ``space`` from finished trials."""

    space: Space
    budget_bytes: int | None = None
    margin: float = 1.1

    def predict_oom(
        self, params: Mapping[str, Value], trials: Sequence[Trial], fit_line: bool = True
    ) -> str | None:
        """Why ``params`` would run out of memory, or None when nothing says so.

        ``fit_line=False`` keeps the certain rule only (a better prediction of the peak is known).
        """
        batch = batch_param(self.space)
        if batch is None or batch not in params:
            return None
        size = float(params[batch])
        others = {k: v for k, v in params.items() if k != batch}
        same = [t for t in trials if t.params and {k: v for k, v in t.params.items() if k != batch} == others]
        failed = [t for t in same if t.status == TrialStatus.OOM and float(t.params[batch]) <= size]
        if failed:
            first = min(failed, key=lambda t: float(t.params[batch]))
            return (
                f"{batch}={params[batch]} is at least {first.params[batch]}, which ran out of memory "
                f"with the same other parameters (trial {first.id})"
            )
        if self.budget_bytes is None or not fit_line:
            return None
        points = [
            (float(t.params[batch]), float(peak))
            for t in same
            if t.ok and (peak := t.metrics.get("peak_memory_bytes")) is not None
        ]
        fit = _line(points)
        if fit is None:
            return None
        intercept, slope = fit
        predicted = intercept + slope * size
        if slope > 0 and predicted > self.budget_bytes * self.margin:
            return (
                f"predicted peak memory {predicted / GIB:.2f} GiB is over the budget of "
                f"{self.budget_bytes / GIB:.2f} GiB (a line through the peak memory of "
                f"{len(points)} trials with the same other parameters, against {batch})"
            )
        return None


def _line(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares (intercept, slope) of y on x; None with fewer than two distinct x."""
    xs = {x for x, _ in points}
    if len(xs) < 2:
        return None
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in points)
    slope = sxy / sxx
    return mean_y - slope * mean_x, slope
