"""Load a run directory whole, for the advice, the reports and the dashboard: a profile run or a study.

A directory that is not a run, is corrupt, or is from a newer schema raises :class:`RunDirError`
with one line that says what is wrong. A profile run that was killed before it wrote
``summary.json`` still has its steps and samples in ``run.db``: its summary is rebuilt from them
(``finished`` is then false), so no measured data is lost.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profilers.contract.json_checks import JsonObject, SummaryError, record_json
from profilers.contract.load import LoadProfile, load_profile
from profilers.contract.plan_doc import PlanDocument
from profilers.contract.profile_summary import ProfileSummary
from profilers.contract.reader import RunStoreError, Snapshot, is_study_summary, read_summary
from profilers.contract.records import DeviceSample, OpRecord, RankDevice, StepRecord
from profilers.contract.run_meta import RunMeta
from profilers.contract.schema import (
    PLAN_NAME,
    STORE_NAME,
    SUMMARY_NAME,
    resolve_trial_dir,
)
from profilers.contract.study.summary import TrialEntry, TuningSummary
from profilers.contract.summarize import (
    gpu_aggregates,
    host_aggregates,
    measured_span_ns,
    other_cores_series,
    run_statistics,
    steady_span_ns,
)


class RunDirError(Exception):
    """The directory cannot be reported on; the message is one line for the user."""


@dataclass(frozen=True)
class RunData:
    """Everything the advice and the reports read from one run directory.

    ``steps``, ``samples``, ``ops`` and ``devices`` come from a profile run's ``run.db`` (every
    rank's); they are empty for a study. A study's ``trials`` are its summary's trial entries, and
    ``profile`` is the profile run of its best trial (the baseline's when none is best), loaded the
    same way, or None when that run cannot be read.
    """

    run_dir: Path
    kind: str  # "profile" or "tune"
    summary: JsonObject
    finished: bool = True
    meta: RunMeta = field(default_factory=RunMeta)
    steps: tuple[StepRecord, ...] = ()
    samples: tuple[DeviceSample, ...] = ()
    sample_ranks: tuple[int, ...] = ()  # the rank that wrote each sample (same order), when known
    ops: tuple[tuple[int, OpRecord], ...] = ()  # (rank, op)
    devices: tuple[RankDevice, ...] = ()
    trials: tuple[TrialEntry, ...] = ()  # checked entries; each also reads as summary.json's dict
    profile: RunData | None = None
    notes: tuple[str, ...] = ()  # what was missing or rebuilt, for the report to say
    #: ``autotune plan``'s JSON saved in the run directory (:data:`PLAN_NAME`), when there is one.
    plan: PlanDocument | None = None
    #: Facts derived from this run, computed once each (``autotune.advice.facts`` fills it). Not an
    #: init field: a copy made with ``dataclasses.replace`` (other data) starts with an empty one.
    memo: dict[Any, Any] = field(default_factory=dict, init=False, compare=False, repr=False)
    #: A profile run's summary parsed (typed figures; None for a study). Made from ``summary``.
    figures: ProfileSummary | None = field(default=None, init=False, compare=False, repr=False)
    #: A study's summary parsed (its settings, trials, best and baseline; None for a profile run).
    study: TuningSummary | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        # trials given as summary.json's dicts (a report built from data, a test) are checked and
        # typed here, so every reader of a RunData gets TrialEntry records
        if any(not isinstance(t, TrialEntry) for t in self.trials):
            where = str(self.run_dir / SUMMARY_NAME)
            try:
                trials = tuple(
                    t if isinstance(t, TrialEntry) else TrialEntry.parse(t, where) for t in self.trials
                )
            except SummaryError as exc:
                raise RunDirError(str(exc)) from None
            object.__setattr__(self, "trials", trials)
        if self.samples:
            completed = with_sample_figures(self.summary, self.steps, self.samples, self.sample_ranks)
            if completed is not self.summary:
                object.__setattr__(self, "summary", completed)
        where = str(self.run_dir / SUMMARY_NAME)
        try:
            if self.kind == "profile":
                object.__setattr__(self, "figures", ProfileSummary.parse(self.summary, where))
            else:  # a study; one built from data may give its trials apart from its summary
                summary = self.summary if "trials" in self.summary else {
                    **self.summary, "trials": [t.raw for t in self.trials]}  # fmt: skip
                object.__setattr__(self, "study", TuningSummary.parse(summary, where))
        except SummaryError as exc:
            raise RunDirError(str(exc)) from None

    @property
    def name(self) -> str:
        """The run's name (a study is named after its script)."""
        if self.study is not None:
            command = self.study.command
            return f"tune {Path(command[0]).name}" if command else "tune"
        named = self.figures.name if self.figures is not None else None
        return named or self.meta.name or self.run_dir.name


def load_run(run_dir: str | Path, with_store: bool = True) -> RunData:
    """Read ``run_dir``; raise RunDirError with one line when it cannot be reported on."""
    path = Path(run_dir)
    if not path.exists():
        raise RunDirError(f"{path}: no such directory")
    if not path.is_dir():
        raise RunDirError(f"{path}: not a directory (give the run directory, not a file in it)")
    summary = _read_summary(path)
    if is_study_summary(summary):
        return _with_plan(_load_study(path, summary))
    store = path / STORE_NAME
    if summary is None and not store.exists():
        raise RunDirError(f"{path}: not a run directory (no {SUMMARY_NAME} and no {STORE_NAME})")
    return _with_plan(_load_profile(path, summary, with_store))


def _with_plan(run: RunData) -> RunData:
    """``run`` with the plan saved beside it; one that cannot be read is a note, never a failure."""
    path = run.run_dir / PLAN_NAME
    if not path.exists():
        return run
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return dataclasses.replace(run, notes=(*run.notes, f"{PLAN_NAME} cannot be read: {exc}"))
    try:
        plan = PlanDocument.parse(doc, f"{PLAN_NAME} cannot be read")
    except SummaryError as exc:
        return dataclasses.replace(run, notes=(*run.notes, str(exc)))
    return dataclasses.replace(run, plan=plan)


def _read_summary(path: Path) -> JsonObject | None:
    try:
        return read_summary(path / SUMMARY_NAME)
    except RunStoreError as exc:
        raise RunDirError(str(exc)) from None


def _load_profile(path: Path, summary: JsonObject | None, with_store: bool) -> RunData:
    store = path / STORE_NAME
    notes: list[str] = []
    meta = RunMeta()
    steps: list[StepRecord] = []
    samples: list[DeviceSample] = []
    sample_ranks: list[int] = []
    ops: list[tuple[int, OpRecord]] = []
    devices: list[RankDevice] = []
    if store.exists() and (with_store or summary is None):
        try:
            meta, steps, samples, sample_ranks, ops, devices = _read_store(
                store, lacks_sample_figures(summary)
            )
        except RunStoreError as exc:
            if summary is None or "newer gpu-autotune" in str(exc):
                raise RunDirError(str(exc)) from None
            notes.append(f"run.db could not be read ({_short(exc)}); timelines come from summary.json only")
        except (ValueError, TypeError, KeyError) as exc:
            if summary is None:
                raise RunDirError(f"{store}: corrupt or unreadable run store ({_short(exc)})") from None
            notes.append(f"run.db could not be read ({_short(exc)}); timelines come from summary.json only")
    elif summary is not None and not store.exists():
        notes.append("run.db is missing; per-step and per-sample data are not available")
    if summary is None:
        if not steps:
            raise RunDirError(
                f"{path}: the run recorded no steps yet (no {SUMMARY_NAME}, empty {STORE_NAME})"
            )
        summary = record_json(_rebuild_summary(path, meta, steps, samples, sample_ranks, devices))
        notes.append(
            f"the run did not finish (no {SUMMARY_NAME}): its figures come from the "
            f"{len(steps)} steps in {STORE_NAME}"
        )
    return RunData(
        run_dir=path,
        kind="profile",
        summary=summary,
        finished=(path / SUMMARY_NAME).exists(),
        meta=meta,
        steps=tuple(steps),
        samples=tuple(samples),
        sample_ranks=tuple(sample_ranks),
        ops=tuple(ops),
        devices=tuple(devices),
        notes=tuple(notes),
    )


#: GPU readings per device a report draws (its charts' points); the figures come from the summary.
THINNED_POINTS = 2000


def _read_store(
    store: Path, every_sample: bool
) -> tuple[
    RunMeta,
    list[StepRecord],
    list[DeviceSample],
    list[int],
    list[tuple[int, OpRecord]],
    list[RankDevice],
]:
    """Every table as of one instant.

    The samples: all of them when ``every_sample`` (the summary lacks figures that must be
    computed from them), else every host reading and the GPU readings thinned to
    :data:`THINNED_POINTS` per device (summary.json holds their figures).
    """
    with Snapshot(store) as snap:  # one read transaction: every table as of the same instant
        if every_sample:
            _, ranks, samples = snap.samples()
        else:
            host_ranks, host = snap.host_samples()
            gpu_ranks, gpu = snap.thinned_samples("gpu", THINNED_POINTS)
            samples, ranks = host + gpu, host_ranks + gpu_ranks
            order = sorted(range(len(samples)), key=[s.t_ns for s in samples].__getitem__)
            samples, ranks = [samples[i] for i in order], [ranks[i] for i in order]
        return snap.meta(), snap.steps(), samples, ranks, snap.ops(), snap.devices()


def lacks_sample_figures(summary: JsonObject | None) -> bool:
    """Whether ``summary`` predates figures the summarizer now derives from the samples.

    GPU entries without ``throttle`` (p5 utilisation, throttle shares and the memory envelope came
    with it) or a host entry without ``rss_envelope``: such a summary is completed from run.db's
    samples (:func:`with_sample_figures`). No summary (a killed run) is rebuilt whole.
    """
    return summary is None or _gpu_lacks(summary) or _host_lacks(summary)


def _gpu_lacks(summary: JsonObject) -> bool:
    gpu = summary.get("gpu")
    return isinstance(gpu, list) and any(isinstance(g, dict) and "throttle" not in g for g in gpu)


def _host_lacks(summary: JsonObject) -> bool:
    host = summary.get("host")
    return isinstance(host, dict) and "rss_envelope" not in host


def with_sample_figures(
    summary: JsonObject,
    steps: Sequence[StepRecord],
    samples: Sequence[DeviceSample],
    sample_ranks: Sequence[int],
) -> JsonObject:
    """``summary`` with the sample figures it lacks computed by the summarizer (a new dict), or itself.

    A summary from before a figure existed (or built by hand without ``gpu``/``host``) gets it from
    the samples, so the advice reads every figure from the summary, whichever version wrote it:
    GPU figures over every rank's readings of the GPU (the spans of every rank's steps), host
    figures from rank 0's readings (all of them on a one-process run; none when ranks are unknown
    on a run of several). Figures the summary holds are kept as they are.
    """
    kinds = {s.kind for s in samples}
    gpu, host = summary.get("gpu"), summary.get("host")
    need_gpu = "gpu" in kinds and ("gpu" not in summary or _gpu_lacks(summary))
    need_host = "host" in kinds and ("host" not in summary or _host_lacks(summary))
    if not need_gpu and not need_host:
        return summary
    span, steady = measured_span_ns(steps), steady_span_ns(steps)
    out = dict(summary)
    if need_gpu:
        computed = [record_json(g) for g in gpu_aggregates(samples, {}, span, None, steady)]
        if isinstance(gpu, list):
            by_index = {g["index"]: g for g in computed}
            out["gpu"] = [
                _fill(g, by_index.get(g.get("index"), {})) if isinstance(g, dict) else g for g in gpu
            ]
        else:
            out["gpu"] = computed
    if need_host:
        device = summary.get("device")
        count = device.get("count") if isinstance(device, dict) else None
        if len(sample_ranks) == len(samples):
            own = [s for s, r in zip(samples, sample_ranks, strict=True) if r == 0]
        else:
            own = list(samples) if not isinstance(count, int) or count <= 1 else []
        figures = host_aggregates(own, steady)
        if figures is not None:
            computed_host = record_json(figures)
            out["host"] = _fill(host, computed_host) if isinstance(host, dict) else computed_host
    return out


def _fill(held: dict[str, Any], computed: dict[str, Any]) -> dict[str, Any]:
    """``held`` with the keys it lacks from ``computed`` (one level into nested objects)."""
    out = dict(held)
    for key, value in computed.items():
        if key not in out:
            out[key] = value
        elif isinstance(out[key], dict) and isinstance(value, dict):
            out[key] = {**value, **out[key]}
    return out


def _rebuild_summary(
    path: Path,
    meta: RunMeta,
    steps: list[StepRecord],
    samples: list[DeviceSample],
    sample_ranks: list[int],
    devices: list[RankDevice],
) -> ProfileSummary:
    """A summary from the store alone, for a run killed before it wrote its own.

    The lowest rank's figures through the profiler's own :func:`run_statistics`, so they are what the
    run would have written for them; what only the live process knew (memory, MFU, device, the
    other ranks) is missing.
    """
    rank = min((s.rank for s in steps), default=0)
    own_steps = [s for s in steps if s.rank == rank]
    own_samples = samples
    if sample_ranks:
        own_samples = [s for s, r in zip(samples, sample_ranks, strict=True) if r == rank]
    names = {d.index: d.info.name for d in devices if d.kind == "gpu" and d.rank == rank}
    cores = next((d.info.cpu_cores for d in devices if d.kind == "host" and d.info.cpu_cores), None)
    stats = run_statistics(own_steps, own_samples, gpu_names=names, machine_cores=cores)
    load = stats.load_figures
    if load is not None and len({s.rank for s in steps}) > 1:  # the other ranks' CPU is not known
        load = dataclasses.replace(load, other_cores=None)
    return dataclasses.replace(
        stats,
        name=meta.name or path.name,
        run_dir=str(path),
        load_figures=load,
        stop_reason="killed",
        params_used=dict(meta.params_used),
    )


def _load_study(path: Path, summary: JsonObject) -> RunData:
    try:
        study = TuningSummary.parse(summary, str(path / SUMMARY_NAME))
    except SummaryError as exc:
        raise RunDirError(str(exc)) from None
    notes: list[str] = []
    chosen = study.best or study.baseline
    profile = None
    if chosen is not None and chosen.run_dir:
        trial_dir = resolve_trial_dir(path, chosen.run_dir)
        try:
            profile = load_run(trial_dir)
        except RunDirError as exc:
            notes.append(f"the profile of trial {chosen.id} cannot be read: {exc}")
    return RunData(
        run_dir=path,
        kind="tune",
        summary=summary,
        finished=study.stopped is None,
        trials=study.trials,
        profile=profile,
        notes=tuple(notes),
    )


def read_load_profile(run_dir: Path, summary: JsonObject) -> LoadProfile | None:
    """Other processes' CPU over a profile run's measured steps, reading by reading, from its run.db.

    summary.json keeps only the mean (``load``); the readings behind it are run.db's host samples
    of the lowest rank over its measured steps (:func:`~profilers.contract.summarize.other_cores_series`).
    On a run of several ranks the other ranks' own CPU (summary ``load.own_cores`` less this rank's
    mean) is taken out of each reading as their mean. None when the load or the store is missing or
    unreadable.
    """
    load = summary.get("load")
    cores = load.get("machine_cores") if isinstance(load, dict) else None
    store = Path(run_dir) / STORE_NAME
    if not isinstance(cores, int) or cores <= 0 or not store.exists():
        return None
    try:
        with Snapshot(store) as snap:
            rank = snap.lowest_rank()
            steps = snap.steps(rank=rank) if rank is not None else []
            ranks, host = snap.host_samples()
    except (RunStoreError, ValueError, TypeError):
        return None  # no readings: the gate says the load was not recorded reading by reading
    own_host = [h for h, r in zip(host, ranks, strict=True) if r == rank]
    span = measured_span_ns(steps)
    others, own = other_cores_series(own_host, span, cores)
    if not others:
        return None
    job_own = load.get("own_cores") if isinstance(load, dict) and (load.get("ranks") or 1) > 1 else None
    if isinstance(job_own, int | float):
        extra = max(0.0, float(job_own) - sum(own) / len(own))
        others = [o - extra for o in others]
    return load_profile(others, own, cores)


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
