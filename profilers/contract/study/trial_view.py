"""One trial as every layer shows it: the report's trial table and the dashboard's Trials screen.

Both derive their rows from a tuning summary's trial entries through :func:`trial_views`, so a
trial's parameters, status and figures cannot differ between the two. Pure Python.

>>> entries = [TrialEntry.parse(e, "summary.json") for e in [
...     {"id": 0, "baseline": True, "params": {}, "params_used": {"batch_size": 8}, "status": "ok",
...      "objective": 100.0, "throughput": 100.0},
...     {"id": 1, "params": {"batch_size": 64}, "status": "ok", "objective": 240.0, "throughput": 240.0},
... ]]
>>> [(v.id, v.params, v.best) for v in trial_views(entries, best_id=1, names=["batch_size"])]
[(0, {'batch_size': 8}, False), (1, {'batch_size': 64}, True)]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from profilers.contract.schema import Params, TrialStatus
from profilers.contract.study.summary import TrialEntry, TuningSummary
from profilers.contract.study.trials import best_trial_id, ran_with


@dataclass(frozen=True, slots=True)
class TrialView:
    """One trial of a study, from its summary.json trial entry."""

    id: int
    baseline: bool
    best: bool
    params: Params  # what it ran with: the study's values, else what its code read
    status: TrialStatus
    objective: float | None
    samples_per_s: float | None  # job-wide throughput
    peak_memory_bytes: float | None
    step_time_s: float | None
    world_size: int | None
    duration_s: float | None
    stop_reason: str | None
    error: str | None


def _number(value: Any) -> float | None:
    """A finite number as a float; anything else (None, a string, NaN, a bool) as None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def trial_view(entry: TrialEntry, best_id: int | None, names: Iterable[str] | None = None) -> TrialView:
    """The view of one trial entry.

    ``names``: the searched parameters to show, each with the value the trial ran with (for the
    baseline, what its code read); by default those the study set in this trial.
    """
    shown = list(names) if names is not None else list(entry.params)
    return TrialView(
        id=entry.id,
        baseline=entry.baseline,
        best=entry.id == best_id,
        params=ran_with(entry, shown),
        status=entry.status,
        objective=entry.objective,
        samples_per_s=_number(entry.samples_per_s),
        peak_memory_bytes=_number(entry.peak_memory_bytes),
        step_time_s=_number(entry.step_time_s),
        world_size=entry.world_size if "world_size" in entry.raw else None,
        duration_s=_number(entry.duration_s),
        stop_reason=entry.stop_reason,
        error=entry.error,
    )


def trial_views(
    entries: Sequence[TrialEntry], best_id: int | None, names: Iterable[str] | None = None
) -> tuple[TrialView, ...]:
    """Every trial's view, in id order."""
    shown = None if names is None else list(names)
    return tuple(trial_view(e, best_id, shown) for e in sorted(entries, key=lambda e: e.id))


def space_names(study: TuningSummary) -> list[str] | None:
    """The parameters a study searched (its space's names), or None when its summary has no space."""
    return list(study.space) or None


def study_best_id(study: TuningSummary, trials: Sequence[TrialEntry] | None = None) -> int | None:
    """The study's best trial: its summary's ``best``, else (before one is written) the best ok trial.

    ``trials``: the study's trials when its summary does not list them yet (read from its store).
    """
    if study.no_effect:  # what it tuned changed nothing: no trial is best
        return None
    if study.best is not None:
        return study.best.id
    return best_trial_id(study.trials if trials is None else trials, study.direction != "minimize")


__all__ = ["TrialView", "space_names", "study_best_id", "trial_view", "trial_views"]
