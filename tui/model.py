"""The dashboard's data, first: immutable records the panes draw, built from what the readers hold.

Data first, drawing after (as Optuna's plots): :func:`live_info` and :func:`trials_info` return
plain records that tests check directly; the widgets only draw them.
"""

from __future__ import annotations

import os
import socket
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from profilers.contract.profile_summary import ProfileSummary
from profilers.contract.records import RankDevice, RankRow
from profilers.contract.run_meta import RunMeta
from profilers.contract.schema import OPTIONAL_PHASES, PHASES, TrialStatus
from profilers.contract.schema import run_state as state_of
from profilers.contract.study.summary import TrialEntry, TuningSummary
from profilers.contract.study.trial_view import TrialView, space_names, study_best_id, trial_views
from profilers.contract.study.trials import convergence, placement_line, starved_line
from profilers.contract.study.verdict import VerdictStatus, verdict_of

from tui.store import GPU_FIELDS, HOST_FIELDS, StoreReader

#: A run on another host (its process not visible) is running while a sample came this recently.
LIVE_SAMPLE_WITHIN_S = 30.0


@dataclass(frozen=True, slots=True)
class DeviceView:
    """One device's panel: series per field (bucket means, display units) and its latest reading."""

    label: str  # "GPU 0 · NVIDIA H200", "host · rank 0"
    kind: str  # "gpu" or "host"
    series: dict[str, tuple[float, ...]]  # field -> values (power in W, memory in bytes, clock MHz, %)
    latest: dict[str, float | None]
    mem_total_bytes: float | None


@dataclass(frozen=True, slots=True)
class LiveInfo:
    """What the Live screen shows of the followed run."""

    name: str
    state: str  # "running", "finished", "stopped", "unfinished", "waiting"
    following: str | None  # for a study: which trial
    step: int | None
    max_steps: int | None
    steps_per_s: float | None  # over the recent steps
    elapsed_s: float | None
    last_step_s: float | None
    samples_per_s: float | None  # the summary's once finished (the report's), else over the recent steps
    step_time_s: tuple[float, ...]  # per bucket of steps, over the whole run
    samples_per_s_series: tuple[float, ...]
    phases_s: tuple[tuple[str, float], ...]  # mean seconds of each phase over the recent timed steps
    recent_steps: int
    devices: tuple[DeviceView, ...]
    warnings: tuple[str, ...] = ()
    message: str | None = None  # why there is nothing to show yet
    summary: ProfileSummary | None = None  # the run's summary.json once it has finished
    samples_per_s_over: str = "recent"  # which steps samples_per_s is over: "recent" or "measured steps"


@dataclass(frozen=True, slots=True)
class ParamEffect:
    """The trials that ran one value of one parameter."""

    param: str
    value: str
    trials: int
    ok: int
    best: float | None
    median: float | None


@dataclass(frozen=True, slots=True)
class TrialsInfo:
    """What the Trials screen shows of a study."""

    metric: str
    direction: str  # "maximize" or "minimize"
    rows: tuple[TrialView, ...]  # in id order
    param_names: tuple[str, ...]
    best_id: int | None
    running_ids: tuple[int, ...]  # trial directories without a finished entry yet (trials at once)
    n_trials: int | None
    stopped: str | None
    # The convergence, as the report draws it (profilers.contract.study.trials.convergence): the trials that
    # ran (skipped ones never did), in id order, their objectives (None: not ok) and the best so far.
    convergence_ids: tuple[int, ...]
    values: tuple[float | None, ...]
    best_so_far: tuple[float | None, ...]
    convergence_statuses: tuple[str, ...]
    effects: tuple[ParamEffect, ...]
    speedup: float | None  # the study's verdict's headline figure (profilers.contract.study.verdict)
    verdict: str | None = None  # the verdict's sentence, as the terminal and the report say it
    #: What the verdict calls the top trial: "best" only when it is to be applied (StudyVerdict.best_label).
    best_label: str = "best"
    placement: str | None = None  # how the trials ran (profilers.contract.study.trials.placement_line)
    starved: str | None = None  # how much of the search ran short of CPU (study.starved_line)
    #: What the study cost and when it pays back, as its summary.json says (contract.study.bill).
    bill: str | None = None

    @property
    def running_id(self) -> int | None:
        """The latest running trial (None when none runs)."""
        return self.running_ids[-1] if self.running_ids else None


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the Run screen shows besides the environment: the raw facts of the run directory."""

    run_dir: str
    kind: str
    name: str
    state: str
    meta: RunMeta
    summary: ProfileSummary | TuningSummary | None
    devices: tuple[RankDevice, ...]
    ranks: tuple[tuple[int, RankRow], ...]
    warnings: tuple[str, ...]
    trial_dir: str | None = None  # for a study: the followed trial's directory
    trial_meta: RunMeta | None = None
    trial_summary: ProfileSummary | None = None


def _alive(reader: StoreReader) -> bool | None:
    """Whether a rank process still runs (None when that cannot be told from here)."""
    here = socket.gethostname()
    verdicts = []
    for rank in reader.ranks.values():
        if rank.finished_ns is not None:
            continue
        if rank.host != here or not rank.pid:
            return None
        try:
            os.kill(rank.pid, 0)
            verdicts.append(True)
        except PermissionError:
            verdicts.append(True)
        except (ProcessLookupError, OSError, ValueError):
            verdicts.append(False)
    return any(verdicts) if verdicts else None


def run_state(reader: StoreReader, summary: ProfileSummary | None, now_ns: int) -> str:
    """``finished``, ``running``, ``stopped`` (process gone, no summary), ``unfinished`` or ``waiting``."""
    last = reader.last_sample_ns
    return state_of(
        finished=summary is not None or reader.finished_ns() is not None,
        has_data=reader.has_data,
        alive=_alive(reader),  # None on another host: judged by the newest sample
        idle_s=None if last is None else (now_ns - last) / 1e9,
        running_within_s=LIVE_SAMPLE_WITHIN_S,
    )


def _device_label(reader: StoreReader, rank: int, kind: str, index: int) -> str:
    names = {(d.rank, d.kind, d.index): d.info.name for d in reader.devices}
    name = names.get((rank, kind, index))
    ranks = {r for (r, _k, _i) in reader.tracks}
    if kind == "host":
        return (
            f"host · {name}" + (f" · rank {rank}" if len(ranks) > 1 else "")
            if name
            else f"host · rank {rank}"
        )
    label = f"GPU {index}" + (f" · rank {rank}" if len(ranks) > 1 else "")
    return f"{label} · {name}" if name else label


def device_views(reader: StoreReader, limit: int = 8) -> tuple[DeviceView, ...]:
    """The sampled devices: GPUs when there are any (CPU-only run: the hosts), at most ``limit``."""
    keys = sorted(reader.tracks)
    gpus = [k for k in keys if k[1] == "gpu"]
    chosen = (gpus or [k for k in keys if k[1] == "host"])[:limit]
    out = []
    for key in chosen:
        track = reader.tracks[key]
        fields = GPU_FIELDS if track.kind == "gpu" else HOST_FIELDS
        series = {}
        for f in fields:
            values = track.buckets.means(f)
            series[f] = tuple(v / 1000 for v in values) if f == "power_mw" else tuple(values)
        latest = {f: track.latest.get(f) for f in fields}
        if latest.get("power_mw") is not None:
            latest["power_mw"] = float(latest["power_mw"] or 0) / 1000
        out.append(DeviceView(_device_label(reader, *key), track.kind, series, latest, track.mem_total_bytes))
    return tuple(out)


def live_info(
    reader: StoreReader,
    summary: ProfileSummary | None,
    name: str,
    now_ns: int,
    following: str | None = None,
    message: str | None = None,
) -> LiveInfo:
    """The Live screen's record for the run ``reader`` follows."""
    state = run_state(reader, summary, now_ns)
    recent = list(reader.recent)
    steps_per_s = samples_per_s = None
    if len(recent) >= 2:
        span_ns = recent[-1].start_ns + recent[-1].duration_ns - recent[0].start_ns
        steps_per_s = len(recent) / (span_ns / 1e9) if span_ns > 0 else None
    with_samples = [s for s in recent if s.samples is not None]
    busy_ns = sum(s.duration_ns for s in with_samples)
    if busy_ns > 0:
        samples_per_s = sum(s.samples or 0 for s in with_samples) / (busy_ns / 1e9)
    rate_over = "recent"
    finished_rate = summary.throughput.samples_per_s if summary is not None else None
    if finished_rate is not None:
        # a finished run: the report's figure (its measured steps), not the last few steps'
        samples_per_s, rate_over = float(finished_rate), "measured steps"
    phases: tuple[tuple[str, float], ...] = ()
    timed = [s for s in recent if s.phases_timed] or recent  # as the summary's phases: timed steps
    if timed:
        means = ((p, sum(s.phases_ns[i] for s in timed) / len(timed) / 1e9) for i, p in enumerate(PHASES))
        phases = tuple((p, v) for p, v in means if v or p not in OPTIONAL_PHASES)
    started = reader.meta.started_ns or reader.first_step_start_ns
    elapsed = None
    if isinstance(started, int | float):
        end: float | None = reader.finished_ns()
        if end is None and state == "running":
            end = now_ns
        if end is None:
            ends = [reader.last_sample_ns or 0] + [s.start_ns + s.duration_ns for s in recent[-1:]]
            end = max(ends) or None
        elapsed = max(0.0, (end - started) / 1e9) if end else None
    max_steps = reader.meta.max_steps
    buckets = reader.steps
    if message is None and not reader.has_data:
        message = "waiting for the run to record its first step…"
    return LiveInfo(
        name=name,
        state=state,
        following=following,
        step=reader.last_step or None,
        max_steps=max_steps if isinstance(max_steps, int) else None,
        steps_per_s=steps_per_s,
        elapsed_s=elapsed,
        last_step_s=recent[-1].duration_ns / 1e9 if recent else None,
        samples_per_s=samples_per_s,
        samples_per_s_over=rate_over,
        step_time_s=tuple(v / 1e9 for v in buckets.means("duration_ns")) if buckets else (),
        samples_per_s_series=tuple(buckets.ratio("samples", "seen_ns", 1e9)) if buckets else (),
        phases_s=phases,
        recent_steps=len(recent),
        devices=device_views(reader),
        warnings=tuple(f"rank {r} {part}: {msg}" for r, part, msg in reader.warnings[-5:]),
        message=message,
        summary=summary,
    )


def trials_info(
    study: TuningSummary | None,
    entries: Sequence[TrialEntry],
    running: Sequence[int] | None = (),
) -> TrialsInfo:
    """The Trials screen's record: the table, the convergence and the effect of each parameter.

    ``study`` is the study's parsed summary.json (None before it has one); ``entries`` its trials
    (the summary's, or its store's before the summary lists them).
    """
    study = study if study is not None else NO_STUDY
    trials = sorted(entries, key=lambda t: t.id)
    direction, best = study.direction, study.best
    best_id = study_best_id(study, trials)
    verdict = verdict_of(study)
    rows = list(trial_views(trials, best_id, space_names(study)))
    ids, values, best_so_far, statuses = convergence(trials, maximize=direction != "minimize")
    names: list[str] = []
    for r in rows:
        names += [k for k in r.params if k not in names]
    finished = {r.id for r in rows}
    return TrialsInfo(
        metric=study.metric,
        direction=direction,
        rows=tuple(rows),
        param_names=tuple(names),
        best_id=best_id,
        running_ids=tuple(sorted(i for i in set(running or ()) if i not in finished)),
        n_trials=study.n_trials,
        stopped=study.stopped,
        convergence_ids=ids,
        values=values,
        best_so_far=best_so_far,
        convergence_statuses=statuses,
        effects=param_effects(rows, names, direction),
        speedup=verdict.speedup if best else None,
        verdict=verdict.headline if best or verdict.status == VerdictStatus.NO_EFFECT else None,
        best_label=verdict.best_label.lower(),
        placement=placement_line(trials, study.parallel, study.executor, study.threads_per_rank),
        starved=starved_line(study, trials),
        bill=study.bill.sentence() if study.bill is not None else None,
    )


#: The settings of a study that has written no summary yet: every default.
NO_STUDY = TuningSummary()


def param_effects(rows: list[TrialView], names: list[str], direction: str) -> tuple[ParamEffect, ...]:
    """Per parameter and value: trials run, how many were ok, the best and median objective."""
    out = []
    for name in names:
        groups: dict[str, list[TrialView]] = {}
        for r in rows:
            if name in r.params and r.status != TrialStatus.SKIPPED:
                groups.setdefault(str(r.params[name]), []).append(r)
        for value in sorted(groups, key=_natural):
            group = groups[value]
            ok = sorted(r.objective for r in group if r.status == TrialStatus.OK and r.objective is not None)
            top = (min(ok) if direction == "minimize" else max(ok)) if ok else None
            median = statistics.median(ok) if ok else None
            out.append(ParamEffect(name, value, len(group), len(ok), top, median))
    return tuple(out)


def _natural(text: str) -> tuple[int, float, str]:
    try:
        return (0, float(text), text)
    except ValueError:
        return (1, 0.0, text)
