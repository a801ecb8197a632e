"""When a search trial stops early: once its throughput's upper bound is below the best's lower bound.

As successive halving does, a trial whose first measured steps already show it losing stops there,
and the study spends its devices on the next configuration. "Losing" is a statement with evidence:
the comparison carries the spread between separate processes of one configuration (the study's
anchors, :mod:`profilers.contract.study.spread`), not only each run's own steps. Two processes' log
throughputs differ by a spread of √2·s (each one draw of the machine's between-process noise, sd
``s``), so the trial stops once

    own_upper  <  best_low × e^(−√2·t·s)

with ``own_upper`` its optimistic samples/s (the profiler's ``below_threshold`` rule: samples per
step over the lower end of its step time's 95% interval, decided after ``--min-measured-steps``),
``best_low`` the lower end of the best trial's own 95% interval, ``s`` the sd of the anchors' log
throughputs and ``t`` Student's 97.5% quantile at their degrees of freedom: the floor handed to the
trial (for the cost objective, at equal cost per sample: × the trial's devices / the best's). Each
run's own interval is counted on top of the spread (which holds their noise too): the test errs
toward letting a trial run.

The best is the best trial that ran its whole budget: a trial stopped early measured too few steps to
be a reference. Until the spread is measured (one anchor: ``--anchor-every 0``, or before the first
re-run), or when the best has no interval of its own, the floor is ``--early-stop`` × the best's
value, a fixed share that says nothing of the noise.
The energy objective depends on power as well, so it stops nothing early. A stopped trial keeps its
partial figures (its row, its ratio) and is never a result: never the best, never on the Pareto front.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autotune.search.records import Trial
from autotune.tuner.trial_facts import facts, metrics
from profilers.contract.intervals import t975

if TYPE_CHECKING:
    from autotune.tuner.objectives import Scoring
    from profilers.contract.study.spread import ProcessSpread

#: The stop reason of a trial stopped as losing (profilers.runtime.stopping).
STOPPED_LOSING = "below_threshold"
#: How the floor was set: from the best's lower bound and the spread, or as a share of the best.
SPREAD, SHARE = "spread", "share"


@dataclass(frozen=True, slots=True)
class StopFloor:
    """The samples/s under which a trial stops early, and what it stands on."""

    samples_per_s: float
    rule: str  # SPREAD or SHARE
    best_id: int  # the trial it is measured against


def reference_trials(trials: Sequence[Trial]) -> list[Trial]:
    """The trials that can be a result: finished ok and not stopped early as losing."""
    return [t for t in trials if t.ok and t.value is not None and facts(t).stop_reason != STOPPED_LOSING]


def best_result(trials: Sequence[Trial], maximize: bool = True) -> Trial | None:
    """The best of :func:`reference_trials` (the first of equals): the result, never a stopped trial."""
    references = reference_trials(trials)
    if not references:
        return None
    sign = 1.0 if maximize else -1.0
    return max(references, key=lambda t: sign * float(t.value or 0.0))


def stop_floor(
    scoring: Scoring,
    trials: Sequence[Trial],
    devices: int,
    spread: ProcessSpread | None,
    share: float,
    maximize: bool = True,
) -> StopFloor | None:
    """The floor of a new trial on ``devices`` devices, or None (no reference yet, energy, ``share`` 0)."""
    if not 0 < share < 1:
        return None
    best = best_result(trials, maximize)
    if best is None or best.value is None:
        return None
    rate, low = metrics(best).samples_per_s, (facts(best).throughput_ci95 or (None, None))[0]
    fixed = scoring.throughput_floor(best.value, devices, share)
    if fixed is None:  # energy, or a cost without a price: no floor in samples/s
        return None
    if spread is not None and spread.log_sd is not None and rate and low and low > 0:
        best_devices = facts(best).world_size
        floor = low * math.exp(-math.sqrt(2) * t975(spread.dof) * spread.log_sd)
        if scoring.objective == "cost":  # the same cost per sample on another number of devices
            floor *= devices / max(1, best_devices)
        return StopFloor(floor, SPREAD, best.id)
    return StopFloor(fixed, SHARE, best.id)


def stop_words(
    floor_samples_per_s: float | None, rule: str | None, best_id: int | None, steps: int | None
) -> str:
    """Why a trial stopped early, for the terminal and the report."""
    after = f" after {steps} measured steps" if steps else ""
    if floor_samples_per_s is None or rule is None:
        return f"stopped early{after}: clearly below the best"
    versus = f"trial {best_id}'s" if best_id is not None else "the best's"
    if rule == SPREAD:
        return (
            f"stopped early{after}: its upper bound fell below {floor_samples_per_s:,.0f} samples/s, "
            f"{versus} lower bound less the spread between processes; partial figures, never a result"
        )
    return (
        f"stopped early{after}: its upper bound fell below {floor_samples_per_s:,.0f} samples/s, "
        f"the --early-stop share of {versus} (the spread between processes, or its interval, not yet known)"
    )
