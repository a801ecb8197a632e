"""One trial as every layer shows it: the report's trial table and the dashboard's Trials screen.

Both derive their rows from a tuning summary's trial entries through :func:`trial_views`, so a
trial's parameters, status and figures cannot differ between the two. Pure Python.

>>> entries = [
...     {"id": 0, "baseline": True, "params": {}, "params_used": {"batch_size": 8}, "status": "ok",
...      "objective": 100.0, "throughput": 100.0},
...     {"id": 1, "params": {"batch_size": 64}, "status": "ok", "objective": 240.0, "throughput": 240.0},
... ]
>>> [(v.id, v.params, v.best) for v in trial_views(entries, best_id=1, names=["batch_size"])]
[(0, {'batch_size': 8}, False), (1, {'batch_size': 64}, True)]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from profilers.contract.study import best_trial_id, ran_with


@dataclass(frozen=True, slots=True)
class TrialView:
    """One trial of a study, from its summary.json trial entry."""

    id: int
    baseline: bool
    best: bool
    params: dict[str, Any]  # what it ran with: the study's values, else what its code read
    status: str  # one of schema.STATUSES
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


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def trial_view(
    entry: Mapping[str, Any], best_id: int | None, names: Iterable[str] | None = None
) -> TrialView:
    """The view of one trial entry.

    ``names``: the searched parameters to show, each with the value the trial ran with (for the
    baseline, what its code read); by default those the study set in this trial.
    """
    world = entry.get("world_size")
    params = entry.get("params")
    shown = list(names) if names is not None else list(params) if isinstance(params, Mapping) else []
    return TrialView(
        id=int(entry["id"]),
        baseline=bool(entry.get("baseline")),
        best=entry.get("id") == best_id,
        params=ran_with(entry, shown),
        status=str(entry.get("status")),
        objective=_number(entry.get("objective")),
        samples_per_s=_number(entry.get("throughput")),
        peak_memory_bytes=_number(entry.get("peak_memory_bytes")),
        step_time_s=_number(entry.get("step_time_s")),
        world_size=world if isinstance(world, int) and not isinstance(world, bool) else None,
        duration_s=_number(entry.get("duration_s")),
        stop_reason=_text(entry.get("stop_reason")),
        error=_text(entry.get("error")),
    )


def trial_views(
    entries: Sequence[Mapping[str, Any]], best_id: int | None, names: Iterable[str] | None = None
) -> tuple[TrialView, ...]:
    """Every trial's view, in id order."""
    shown = None if names is None else list(names)
    return tuple(trial_view(e, best_id, shown) for e in sorted(entries, key=lambda e: int(e["id"])))


def space_names(summary: Mapping[str, Any]) -> list[str] | None:
    """The parameters a study searched (its space's names), or None when its summary has no space."""
    space = summary.get("space")
    return list(space) if isinstance(space, Mapping) and space else None


def study_best_id(summary: Mapping[str, Any], entries: Sequence[Mapping[str, Any]]) -> int | None:
    """The study's best trial: its summary's ``best``, else (before one is written) the best ok trial."""
    best = summary.get("best")
    if isinstance(best, Mapping) and isinstance(best.get("id"), int):
        return int(best["id"])
    return best_trial_id(entries, summary.get("direction") != "minimize")


__all__ = ["TrialView", "space_names", "study_best_id", "trial_view", "trial_views"]
