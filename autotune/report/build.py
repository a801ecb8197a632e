"""Build a :class:`Report`'s sections from a loaded run (data first; renderers draw them)."""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Sequence
from pathlib import Path

from autotune.advice.facts import rank_times, step_outliers
from autotune.report.sections import (
    AdviceSection,
    ConvergenceSection,
    CostSection,
    EnvironmentSection,
    GpuTimeline,
    HostTimeline,
    Overview,
    ParetoPoint,
    ParetoSection,
    Report,
    StepSection,
    SweepPoint,
    SweepSection,
    SweepSeries,
    TimelineSection,
    TrialSection,
)
from autotune.search.space import study_batch_param
from profilers.contract.figures import DeviceEntry
from profilers.contract.intervals import quantile
from profilers.contract.load import load_line
from profilers.contract.outcome import outcome_sentence, stop_reason_words
from profilers.contract.plan_doc import PlanDocument
from profilers.contract.profile_summary import ProfileSummary
from profilers.contract.records import DeviceSample, RankDevice, phase_timed
from profilers.contract.rundir import THINNED_POINTS, RunData
from profilers.contract.schema import PHASES, PLAN_NAME, Params, TrialStatus
from profilers.contract.study.summary import TrialEntry, TuningSummary
from profilers.contract.study.trial_view import space_names, study_best_id, trial_views
from profilers.contract.study.trials import (
    convergence,
    pareto_front,
    placement_line,
    ran_with,
    starved_line,
    usd_per_million,
)
from profilers.contract.study.verdict import verdict_of
from profilers.contract.summarize import phase_fractions, select_measured

#: Most points a series keeps for drawing (a 100k-step run is drawn from this many); a finished
#: run's GPU readings are loaded thinned to as many (profilers.contract.rundir).
MAX_POINTS = THINNED_POINTS


def build_report(
    run: RunData,
    advice: AdviceSection,
    cost: CostSection | None = None,
    cost_missing: str | None = None,
    now: dt.datetime | None = None,
) -> Report:
    """Every section of ``run``'s report; sections that do not apply are explained in ``missing``."""
    missing: dict[str, str] = {}
    profile = run.profile if run.kind == "tune" else run
    notes = list(run.notes)
    if run.study is not None and profile is not None:
        chosen = run.study.best or run.study.baseline
        which = f"the {verdict_of(run.study).best_label.lower()}" if run.study.best else "the baseline"
        notes.append(f"step time and timelines are those of trial {chosen.id if chosen else None} ({which})")
    if cost is None:
        missing["cost"] = cost_missing or "no price per GPU-hour is known for this device"
    steps = timelines = host = None
    if profile is None:
        why = "the study has no readable trial run to show" if run.kind == "tune" else "no run data"
        missing.update(steps=why, timelines=why, host=why)
    else:
        steps = step_section(profile)
        if steps is None:
            missing["steps"] = "the run recorded no steps"
        timelines = timeline_section(profile.samples)
        if timelines is None:
            missing["timelines"] = _no_gpu_reason(profile)
        host = host_timeline(profile.samples, profile.devices)
        if host is None:
            missing["host"] = "no host samples were recorded (sampling was off)"
    sweep = convergence = pareto = trials = None
    if run.kind == "tune":
        sweep = sweep_section(run)
        if sweep is None:
            missing["sweep"] = "the study did not vary a batch parameter over finished trials"
        convergence = convergence_section(run)
        price = cost.price_per_gpu_hour if cost is not None else _study(run).price_per_gpu_hour
        pareto = pareto_section(run, price)
        if pareto is None:
            missing["pareto"] = (
                "no price per GPU-hour is known, so trials have no cost"
                if not price
                else "fewer than two trials finished ok"
            )
        trials = trial_section(run)
    else:
        reason = "this is a profile run, not a tuning study (run `autotune tune` for these)"
        missing.update(sweep=reason, convergence=reason, pareto=reason, trials=reason)
    plan = plan_section(run)
    if plan is None:
        missing["plan"] = (
            f"no {PLAN_NAME} in the run directory: `autotune plan SCRIPT ARGS --format json -o "
            f"{run.run_dir / PLAN_NAME}` adds what this training would need and cost on every GPU"
        )
    overview = overview_section(run, tuple(notes))
    when = (now or dt.datetime.now(dt.UTC)).replace(microsecond=0)
    return Report(
        title=f"gpu-autotune report: {run.name}",
        generated_at=when.isoformat(),
        overview=overview,
        advice=advice,
        environment=environment_section(run),
        cost=cost,
        steps=steps,
        timelines=timelines,
        host=host,
        sweep=sweep,
        convergence=convergence,
        pareto=pareto,
        trials=trials,
        plan=plan,
        missing=missing,
    )


def plan_section(run: RunData) -> PlanDocument | None:
    """The plan saved in the run directory, as the report shows it (None without one)."""
    return run.plan


def downsample(n: int, max_points: int = MAX_POINTS) -> list[int]:
    """Evenly spaced indices into ``n`` items, at most ``max_points``, first and last kept."""
    if n <= max_points:
        return list(range(n))
    stride = (n - 1) / (max_points - 1)
    return sorted({round(i * stride) for i in range(max_points)})


def _device_label(device: DeviceEntry) -> str | None:
    name = device.label
    if name is None:
        return None
    label = f"{device.kind} ({name})" if device.kind == "cpu" and name != device.kind else name
    count = device.count or 1
    return f"{label} × {count}" if count > 1 else label


def _study(run: RunData) -> TuningSummary:
    """A study's parsed summary (RunData parses it when the run is a study)."""
    assert run.study is not None, "a tuning study's RunData carries its parsed summary"
    return run.study


def overview_section(run: RunData, notes: tuple[str, ...]) -> Overview:
    """The headline figures: the run's own, or a study's best trial against its baseline."""
    if run.kind == "tune":
        study = _study(run)
        best = study.best
        verdict = verdict_of(study)
        figures = run.profile.figures if run.profile else None
        return Overview(
            name=run.name,
            kind="tune",
            run_dir=str(run.run_dir),
            finished=run.finished,
            step_time_median_s=best.step_time_s if best else None,
            samples_per_s=best.samples_per_s if best else None,
            tokens_per_s=best.tokens_per_s if best else None,
            peak_memory_bytes=best.peak_memory_bytes if best else None,
            precision=figures.precision if figures else None,
            device=_device_label(figures.device) if figures else None,
            world_size=best.world_size if best else 1,
            mfu=figures.mfu if figures else None,
            best_params=dict(best.params) if best else None,
            best_label=verdict.best_label,
            placement=placement_line(
                study.trials, study.parallel, study.executor, study.threads_per_rank
            ),
            starved=starved_line(study),
            speedup_vs_baseline=best.speedup_vs_baseline if best else None,
            notes=notes,
            verdict=verdict.status,
            speedup=verdict.speedup,
            verdict_headline=verdict.headline,
        )
    f = _figures(run)
    return Overview(
        name=run.name,
        kind="profile",
        run_dir=str(run.run_dir),
        finished=run.finished,
        step_time_median_s=f.step_time.median_s,
        samples_per_s=f.throughput.samples_per_s,
        tokens_per_s=f.throughput.tokens_per_s,
        peak_memory_bytes=f.peak_memory_bytes,
        precision=f.precision,
        device=_device_label(f.device),
        world_size=max(f.rank_count, f.device.count or 1),
        mfu=f.mfu,
        notes=notes,
        outcome=outcome_sentence(f),
        load=load_line(f.load),
    )


def _figures(run: RunData) -> ProfileSummary:
    """A profile run's parsed summary (RunData parses it when the run is a profile)."""
    assert run.figures is not None, "a profile run's RunData carries its parsed summary"
    return run.figures


def step_section(run: RunData) -> StepSection | None:
    """Phase shares and medians, and rank 0's step time over the run."""
    if not run.steps:
        return None
    rank0 = [st for st in run.steps if st.rank == 0] or list(run.steps)
    chosen = select_measured(rank0)
    durations = sorted(st.duration_ns / 1e9 for st in chosen)
    timed = phase_timed(chosen)  # a CUDA run's phases: the steps that timed them on the GPU
    fractions = phase_fractions(chosen) or dict.fromkeys(PHASES, 0.0)
    medians = {phase: statistics.median(st.phase_ns()[phase] / 1e9 for st in timed) for phase in PHASES}
    keep = downsample(len(rank0))
    outliers = step_outliers(run)  # the same steps the step_outliers rule judges
    per_rank = {r.rank: r.step_median_s for r in rank_times(run)}  # the straggler rule's medians
    return StepSection(
        phase_fractions=fractions,
        phase_median_s=medians,
        median_s=statistics.median(durations),
        p10_s=quantile(durations, 0.1),
        p90_s=quantile(durations, 0.9),
        series_step=tuple(rank0[i].step for i in keep),
        series_duration_s=tuple(rank0[i].duration_ns / 1e9 for i in keep),
        series_kind=tuple(rank0[i].kind for i in keep),
        outlier_steps=outliers.steps if outliers is not None else (),
        per_rank_median_s=per_rank if len(per_rank) > 1 else {},
    )


def timeline_section(samples: Sequence[DeviceSample]) -> TimelineSection | None:
    """Each GPU's samples, seconds from the first sample of the run, downsampled."""
    gpu = [s for s in samples if s.kind == "gpu"]
    if not gpu:
        return None
    t0 = min(s.t_ns for s in samples)
    out = []
    for index in sorted({s.device_index for s in gpu}):
        rows = sorted((s for s in gpu if s.device_index == index), key=lambda s: s.t_ns)
        rows = [rows[i] for i in downsample(len(rows))]
        out.append(
            GpuTimeline(
                index=index,
                name=None,
                t_s=tuple((s.t_ns - t0) / 1e9 for s in rows),
                util_pct=tuple(s.gpu_util_pct for s in rows),
                mem_used_bytes=tuple(
                    None if s.mem_used_bytes is None else float(s.mem_used_bytes) for s in rows
                ),
                mem_total_bytes=next((s.mem_total_bytes for s in rows if s.mem_total_bytes), None),
                power_w=tuple(None if s.power_mw is None else s.power_mw / 1000 for s in rows),
                sm_clock_mhz=tuple(None if s.sm_clock_mhz is None else float(s.sm_clock_mhz) for s in rows),
            )
        )
    return TimelineSection(gpus=tuple(out))


def host_timeline(samples: Sequence[DeviceSample], devices: Sequence[RankDevice]) -> HostTimeline | None:
    """The host's CPU utilisation and rank 0's resident memory over the run."""
    rows = sorted((s for s in samples if s.kind == "host"), key=lambda s: s.t_ns)
    if not rows:
        return None
    t0 = min(s.t_ns for s in samples)
    rows = [rows[i] for i in downsample(len(rows))]
    total = next((s.host_mem_total_bytes for s in rows if s.host_mem_total_bytes), None)
    if total is None:
        total = next((d.info.mem_total_bytes for d in devices if d.kind == "host"), None)
    return HostTimeline(
        t_s=tuple((s.t_ns - t0) / 1e9 for s in rows),
        cpu_util_pct=tuple(s.cpu_util_pct for s in rows),
        rss_bytes=tuple(None if s.rss_bytes is None else float(s.rss_bytes) for s in rows),
        mem_total_bytes=total,
    )


def _no_gpu_reason(run: RunData) -> str:
    if run.figures is not None and run.figures.device.kind == "cpu":
        return "this run trained on the CPU, so there are no GPU samples (the host timeline is below)"
    return "no GPU samples were recorded (NVML was not available, or sampling was off)"


def _label(params: Params) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "the script's defaults"


def sweep_section(run: RunData) -> SweepSection | None:
    """Throughput and peak memory against the batch parameter, one series per other setting."""
    name = study_batch_param(_study(run).space)
    if name is None:
        return None
    others = [k for k in _study(run).space if k != name]
    groups: dict[str, list[SweepPoint]] = {}
    for trial in run.trials:
        params = ran_with(trial)
        batch = params.get(name)
        if trial.status == TrialStatus.SKIPPED or not isinstance(batch, int | float):
            continue
        label = " · ".join(str(params.get(k, "?")) for k in others) or "all"
        groups.setdefault(label, []).append(
            SweepPoint(
                trial_id=trial.id,
                batch=float(batch),
                samples_per_s=trial.samples_per_s,
                peak_memory_bytes=trial.peak_memory_bytes,
                status=trial.status,
            )
        )
    if not any(p.status == TrialStatus.OK for points in groups.values() for p in points):
        return None
    series = tuple(
        SweepSeries(label=label, points=tuple(sorted(points, key=lambda p: (p.batch, p.trial_id))))
        for label, points in sorted(groups.items())
    )
    return SweepSection(
        batch_param=name, series=series, memory_budget_bytes=_study(run).memory_budget_bytes
    )


def convergence_section(run: RunData) -> ConvergenceSection:
    """Each run trial's objective in id order, and the best so far (``profilers.contract.study.trials``)."""
    study = _study(run)
    maximize = study.direction == "maximize"
    ids, values, best, statuses = convergence(run.trials, maximize)
    return ConvergenceSection(
        metric=study.metric,
        direction="maximize" if maximize else "minimize",
        trial_ids=ids,
        values=values,
        best_so_far=best,
        statuses=statuses,
    )


def pareto_section(run: RunData, price_per_gpu_hour: float | None) -> ParetoSection | None:
    """Ok trials on throughput (more is better) against $ per million samples (less is better).

    Every trial is priced at ``price_per_gpu_hour``, the report's one price (the cost section's):
    not at a price stored with the trial, which a later report may have changed.
    """
    if not price_per_gpu_hour:
        return None
    points: list[tuple[TrialEntry, float, float]] = []
    for trial in run.trials:
        rate = trial.samples_per_s
        usd = usd_per_million(rate, trial.world_size, price_per_gpu_hour) if rate else None
        if not trial.ok or usd is None or rate is None:
            continue
        points.append((trial, rate, usd))
    if len(points) < 2:
        return None
    front = set(pareto_front({t.id: (-rate, usd) for t, rate, usd in points}))
    out = [
        ParetoPoint(
            trial_id=trial.id,
            samples_per_s=rate,
            usd_per_million_samples=usd,
            on_front=trial.id in front,
            label=_label(trial.params),
        )
        for trial, rate, usd in points
    ]
    return ParetoSection(points=tuple(out), price_per_gpu_hour=float(price_per_gpu_hour))


def trial_section(run: RunData) -> TrialSection:
    """The trial table, in id order."""
    study = _study(run)
    rows = trial_views(study.trials, study_best_id(study), space_names(study))
    label = verdict_of(_study(run)).best_label.lower()
    return TrialSection(metric=_study(run).metric, rows=rows, best_label=label)


def environment_section(run: RunData) -> EnvironmentSection:
    """Where and how the run was made."""
    items: list[tuple[str, str]] = [("run directory", str(run.run_dir))]
    if run.kind == "tune":
        study = _study(run)
        items += [
            ("command", " ".join(study.command)),
            ("objective", f"{study.objective} ({study.metric}, {study.direction})"),
            ("searcher", f"{study.searcher} (seed {study.seed})"),
            ("trials", f"{study.trials_run} run of {study.n_trials}"),
        ]
        if study.stopped:
            items.append(("stopped", study.stopped))
    profile = run.profile if run.kind == "tune" else run
    if profile is not None:
        meta, ps = profile.meta, _figures(profile)
        if run.kind != "tune" and meta.command_line:
            items.append(("command", meta.command_line))
        if meta.started_ns is not None:
            when = dt.datetime.fromtimestamp(meta.started_ns / 1e9, dt.UTC).replace(microsecond=0)
            items.append(("started", when.isoformat()))
        for label, value in (
            ("host", meta.host),
            ("python", meta.python),
            ("device", _device_label(ps.device)),
            ("precision", ps.precision),
            ("ranks", meta.world_size),
            ("sampling backends", ", ".join(meta.backends) or None),
            ("step detection", ps.step_mode),
            ("stop reason", stop_reason_words(ps.stop_reason) or None),
        ):
            if value is not None:
                items.append((label, str(value)))
        for gpu in ps.gpus:
            memory = f", {gpu.mem_total_bytes / 2**30:.0f} GiB" if gpu.mem_total_bytes else ""
            items.append((f"GPU {gpu.index}", f"{gpu.name}{memory}"))
        for trace in ps.trace_files:
            items.append(("trace", str(Path(profile.run_dir) / trace)))
        for snapshot in ps.memory_snapshot_files:
            items.append(("memory snapshot", str(Path(profile.run_dir) / snapshot)))
    return EnvironmentSection(items=tuple(items))
