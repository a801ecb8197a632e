"""What a study's trials say, derived once: cost and energy per sample, the Pareto front, the best so far.

The tuning summary, the report and the dashboard all derive these from the same trial entries
(summary.json's ``trials``) through these functions, so they cannot show different fronts, prices
or best-so-far lines. Pure Python.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from profilers.contract.load import too_busy
from profilers.contract.profile_summary import GpuFigures
from profilers.contract.schema import Params, TrialStatus
from profilers.contract.study.summary import TrialEntry, TuningSummary

SECONDS_PER_HOUR = 3600.0


def usd_per_million(rate_per_s: float | None, devices: int, usd_per_gpu_hour: float) -> float | None:
    """Dollars per million samples (or tokens) at ``rate_per_s``; None without a rate.

    ``devices`` devices are billed at ``usd_per_gpu_hour`` each: every device a run holds is billed.
    """
    if rate_per_s is None or not rate_per_s > 0:
        return None
    return usd_per_gpu_hour * devices / SECONDS_PER_HOUR / rate_per_s * 1e6


def energy_per_sample(gpus: Sequence[GpuFigures], samples_per_s: float | None) -> float | None:
    """Joules per sample: the GPUs' summed power (energy counter, else mean power) / samples/s.

    ``gpus``: a profile summary's GPU entries. None without a rate, without GPUs, or when one GPU has
    neither figure (not the power of some of them).
    """
    if not gpus or not samples_per_s:
        return None
    watts = 0.0
    for gpu in gpus:
        if gpu.energy_j is not None and gpu.duration_s:
            watts += gpu.energy_j / gpu.duration_s
        elif gpu.power_w_mean is not None:
            watts += gpu.power_w_mean
        else:
            return None
    return watts / samples_per_s


def pareto_front(points: Mapping[int, tuple[float, ...]]) -> list[int]:
    """Ids of the points no other point dominates (every coordinate is "smaller is better")."""
    front = []
    for i, p in points.items():
        dominated = any(
            all(a <= b for a, b in zip(q, p, strict=True)) and any(a < b for a, b in zip(q, p, strict=True))
            for j, q in points.items()
            if j != i
        )
        if not dominated:
            front.append(i)
    return sorted(front)


def ran_with(trial: TrialEntry, names: Iterable[str] | None = None) -> Params:
    """The parameters a trial ran with: those the study gave it, else what its code read.

    ``params_used`` holds the tuned parameters and built-in knobs the trial's code read, with the
    values it used (for the baseline, given none, the script's own defaults); ``params`` what the
    study set, which win. With ``names``, those parameters only (one neither set nor read is absent).
    """
    out = {**trial.params_used, **trial.params}
    return out if names is None else {n: out[n] for n in names if n in out}


def trial_objective(trial: TrialEntry) -> float | None:
    """A trial entry's objective when it counts: an ok trial's finite number, else None."""
    return trial.objective if trial.ok else None


def convergence(
    trials: Sequence[TrialEntry], maximize: bool
) -> tuple[tuple[int, ...], tuple[float | None, ...], tuple[float | None, ...], tuple[str, ...]]:
    """(ids, objectives, best so far, statuses) of the trials that ran, in id order.

    Skipped trials never ran (a model predicted they would fail) and are left out; a failed trial
    has no objective (None) and keeps the best so far where it was.
    """
    ids: list[int] = []
    values: list[float | None] = []
    best: list[float | None] = []
    statuses: list[str] = []
    current: float | None = None
    for trial in sorted(trials, key=lambda t: t.id):
        if trial.status == TrialStatus.SKIPPED:
            continue
        value = trial_objective(trial)
        if value is not None and (current is None or (value > current if maximize else value < current)):
            current = value
        ids.append(trial.id)
        values.append(value)
        best.append(current)
        statuses.append(trial.status)
    return tuple(ids), tuple(values), tuple(best), tuple(statuses)


def best_trial_id(trials: Sequence[TrialEntry], maximize: bool) -> int | None:
    """The id of the best ok trial (the first of equals), or None: a study's best before its summary says."""
    ids, values, best, _ = convergence(trials, maximize)
    top = best[-1] if best else None
    return None if top is None else next(i for i, v in zip(ids, values, strict=True) if v == top)


def placement_line(
    trials: Sequence[TrialEntry], parallel: int | None, executor: str | None, threads_per_rank: int | None
) -> str | None:
    """How a study's trials ran, in one line: how many at once, where, on what, with how many threads.

    The terminal, the report and the dashboard all say it with these words. None for a study from
    before it was recorded (no ``parallel``).
    """
    if parallel is None:
        return None
    ran = [t for t in trials if t.status != TrialStatus.SKIPPED]
    nodes = sorted({t.node for t in ran if t.node})
    on = "Ray" if executor == "ray" else "this machine"
    where = f"{on} ({', '.join(nodes)})" if nodes else on
    at_once = "one at a time" if parallel <= 1 else f"up to {parallel} at once"
    line = f"trials ran {at_once} on {where}"
    devices = sorted({t.devices for t in ran if t.devices})
    if devices and parallel > 1:
        line += f", each on devices of its own ({', '.join(devices)})"
    if threads_per_rank is not None:
        line += f", {threads_per_rank} thread{'s' if threads_per_rank != 1 else ''} per process"
    return line


def starved_line(study: TuningSummary, trials: Sequence[TrialEntry] | None = None) -> str | None:
    """How much of the search was measured on a machine too busy for it, in one line (None: none was).

    A run short of CPU (no idle core, and its own CPU below what its threads could use) for more than
    half of its measured steps (:func:`~profilers.contract.load.too_busy`) measured other processes,
    not its configuration: the tuner ran it again once the machine was calmer, else left it out
    ("busy", never compared). The baseline is kept either way (the study needs it), its ratios then
    taken against anchors measured calmer. The terminal, the report and the dashboard say it so.
    ``trials``: the study's trials when newer than its summary's (a store read while it runs).
    """
    trials = study.trials if trials is None else trials
    ran = [t for t in trials if t.status in (TrialStatus.OK, TrialStatus.BUSY)]
    calmer = [t for t in ran if t.status == TrialStatus.OK and not too_busy(t.starved_share)]
    again = [t.id for t in calmer if t.busy_before is not None]
    left = [t.id for t in ran if t.status == TrialStatus.BUSY]
    kept = [t.id for t in ran if t.status == TrialStatus.OK and too_busy(t.starved_share)]
    busy_runs = [r for r in (*study.anchors, *study.confirmations) if r.status == TrialStatus.BUSY]
    if not (again or left or kept or busy_runs):
        return None
    parts = []
    if again:
        parts.append(f"{_trials(again)} measured again once the machine was calmer")
    if left:
        parts.append(f"{_trials(left)} left out, never compared (busy)")
    if kept:  # the baseline: a study cannot go on without one
        anchored = any(a.status == TrialStatus.OK for a in study.anchors)
        against = "the anchors measured calmer" if anchored else "it, so they read high"
        baseline = f" (the baseline: the search's ratios are taken against {against})" if kept == [0] else ""
        parts.append(f"{_trials(kept)} kept as measured{baseline}")
    line = ""
    if parts:
        told = [t for t in ran if t.starved_share is not None or t.status == TrialStatus.BUSY]
        over = (
            f"{len(told)} trials"
            if len(told) == len(ran)
            else (f"the {len(told)} trials measured long enough to tell (of {len(ran)} that ran)")
        )
        short = len(again) + len(left) + len(kept)
        line = (
            f"{short} of {over} ran short of CPU for most of their measured steps (other processes held "
            f"the cores their threads needed): {'; '.join(parts)}"
        )
    if busy_runs:
        anchors = sum(r.role == "anchor" for r in busy_runs)
        rounds = len(busy_runs) - anchors
        named = [
            f"{n} {name}{'s' if n != 1 else ''}"
            for n, name in ((anchors, "anchor"), (rounds, "re-measurement"))
            if n
        ]
        line += ("; " if line else "") + f"{' and '.join(named)} left out, short of CPU (busy)"
    return line


def _trials(ids: Sequence[int]) -> str:
    return f"trial{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))}"


__all__ = [
    "SECONDS_PER_HOUR",
    "best_trial_id",
    "convergence",
    "energy_per_sample",
    "pareto_front",
    "placement_line",
    "ran_with",
    "starved_line",
    "trial_objective",
    "usd_per_million",
]
