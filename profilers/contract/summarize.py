"""Build a profile summary from measured records. Pure functions; no torch.

Each part is built as the record that summary.json is written and read through
(:class:`~profilers.contract.profile_summary.ProfileSummary` and its parts).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from profilers.contract.figures import Envelope, LossFigures, RankEntry, StepTimes, Throughput
from profilers.contract.intervals import quantile, rate_interval
from profilers.contract.load import LoadFigures
from profilers.contract.profile_summary import (
    GpuFigures,
    HostFigures,
    ProfileSummary,
    ThrottleFigures,
    UtilFigures,
)
from profilers.contract.records import DeviceSample, StepRecord, mean_loss, phase_timed
from profilers.contract.schema import PHASES, POWER_THERMAL_REASONS, throttle_reason_names


def select_measured(steps: Sequence[StepRecord]) -> list[StepRecord]:
    """Steps that enter the statistics: "measured" ones; failing those, any past warm-up; else all."""
    measured = [s for s in steps if s.kind == "measured"]
    if measured:
        return measured
    return [s for s in steps if s.kind != "warmup"] or list(steps)


@dataclass(frozen=True)
class StepStatistics:
    """Step time, throughput and phase shares over the measured steps (:func:`step_statistics`)."""

    measured_steps: int = 0
    step_time: StepTimes = field(default=StepTimes())
    throughput: Throughput = field(default=Throughput())
    phases: dict[str, float] = field(default_factory=dict)  # empty: no step's phases were timed


def step_statistics(steps: Sequence[StepRecord], samples_per_step: int | None = None) -> StepStatistics:
    """Step time, throughput and phase fractions over the measured steps."""
    chosen = select_measured(steps)
    if not chosen:
        return StepStatistics()
    durations = sorted(s.duration_ns / 1e9 for s in chosen)
    total_s = sum(durations)
    # Throughput over the steps whose inputs were seen (a step can miss them, e.g. keyword-only
    # model inputs while the global hooks of the warm-up are still on).
    with_samples = [s for s in chosen if samples_per_step is not None or s.samples is not None]
    seen_s = sum(s.duration_ns for s in with_samples) / 1e9
    seen_samples = sum(
        samples_per_step if samples_per_step is not None else (s.samples or 0) for s in with_samples
    )
    samples_per_s = seen_samples / seen_s if seen_s > 0 else None
    with_tokens = [s for s in chosen if s.tokens is not None]
    tok_s = sum(s.duration_ns for s in with_tokens) / 1e9
    tokens_per_s = (
        sum(s.tokens or 0 for s in with_tokens) / tok_s
        if tok_s > 0 and len(with_tokens) == len(with_samples)
        else None
    )
    ci95 = rate_interval(samples_per_s, durations)
    return StepStatistics(
        measured_steps=len(chosen),
        step_time=StepTimes(
            median_s=quantile(durations, 0.5),
            mean_s=total_s / len(durations),
            p10_s=quantile(durations, 0.1),
            p90_s=quantile(durations, 0.9),
        ),
        throughput=Throughput(samples_per_s, tokens_per_s, None if ci95 is None else (ci95[0], ci95[1])),
        phases=phase_fractions(chosen) or {},
    )


#: Measured steps at the end of the run whose losses make ``loss.last_mean``.
LAST_MEAN_STEPS = 5


def phase_fractions(steps: Sequence[StepRecord]) -> dict[str, float] | None:
    """Each phase's share of the time of the steps whose phases were timed (:func:`phase_timed`)."""
    timed = phase_timed(steps)
    total_ns = sum(s.duration_ns for s in timed)
    if total_ns <= 0:
        return None
    sums = {p: 0 for p in PHASES}
    for s in timed:
        for p, v in s.phase_ns().items():
            sums[p] += v
    phases = {p: sums[p] / total_ns for p in PHASES[:-1]}
    phases["other"] = max(0.0, 1.0 - sum(phases.values()))
    return phases


def loss_summary(steps: Sequence[StepRecord]) -> LossFigures | None:
    """The ``loss`` block of summary.json, or None when no step recorded a loss.

    JSON has no NaN: non-finite losses appear as null in ``per_step`` (and make ``first``, ``last``
    or ``last_mean`` null when they are among theirs), counted in ``non_finite_steps``.
    """
    with_loss = [s for s in steps if s.loss is not None]
    if not with_loss:
        return None

    def finite(value: float | None) -> float | None:
        return value if value is not None and math.isfinite(value) else None

    bad = [s.step for s in with_loss if finite(s.loss) is None]
    tail = [s.loss for s in select_measured(steps) if s.loss is not None][-LAST_MEAN_STEPS:]
    finite_losses = [v for s in with_loss if (v := finite(s.loss)) is not None]
    return LossFigures(
        first=finite(with_loss[0].loss),
        last=finite(with_loss[-1].loss),
        min=min(finite_losses, default=None),
        last_mean=finite(mean_loss(tail)),
        non_finite_steps=len(bad),
        first_non_finite_step=bad[0] if bad else None,
        per_step=tuple(finite(s.loss) for s in steps),
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _vals(samples: list[DeviceSample], field: str) -> list[float]:
    return [float(v) for s in samples if (v := getattr(s, field)) is not None]


def measured_span_ns(steps: Iterable[StepRecord]) -> tuple[int, int] | None:
    """Wall-clock span (time.time_ns) of the measured steps of every rank given, or None."""
    chosen = [s for s in steps if s.kind == "measured"]
    if not chosen:
        return None
    return min(s.start_ns for s in chosen), max(s.start_ns + s.duration_ns for s in chosen)


#: Step kinds during which the profiler's own instruments ran (FLOP count, trace, settling).
INSTRUMENTED_KINDS = ("flops", "trace", "settle")


def steady_span_ns(steps: Iterable[StepRecord]) -> tuple[int, int] | None:
    """The measured span after the profiler's last instrumented step (FLOP count, trace, settle).

    Scripts whose steps are found from backward passes measure some steps before the instruments
    start; the memory the instruments' first use leaves (imports, buffers) would read as growth
    across them, so a memory line is taken over the measured steps after them only.
    """
    steps = list(steps)
    span = measured_span_ns(steps)
    instrumented = [s.start_ns + s.duration_ns for s in steps if s.kind in INSTRUMENTED_KINDS]
    if span is None or not instrumented or max(instrumented) >= span[1]:
        return span
    return max(span[0], max(instrumented)), span[1]


#: Equal time slices of the steady span whose peaks a memory line is fitted through.
ENVELOPE_BINS = 8


def memory_envelope(points: Sequence[tuple[int, float]], span: tuple[int, int] | None) -> Envelope | None:
    """The peak of each of :data:`ENVELOPE_BINS` (at most) equal time slices of ``span``.

    ``points``: (t_ns, bytes) readings; those outside ``span`` are left out. Memory swings inside
    every step (a gradient allocated in the backward and freed at zero_grad), and readings fall
    anywhere in that swing; the peaks of the slices follow what the step keeps. The peaks are at
    each slice's middle, in seconds from the span's start; None with fewer than 2 readings inside
    or an empty span.
    """
    if span is None or span[1] <= span[0]:
        return None
    inside = [(t, v) for t, v in points if span[0] <= t <= span[1]]
    if len(inside) < 2:
        return None
    bins = max(1, min(ENVELOPE_BINS, len(inside) // 2))
    width = (span[1] - span[0]) / bins
    peaks: dict[int, float] = {}
    for t, v in inside:
        b = min(bins - 1, int((t - span[0]) / width))
        if b not in peaks or v > peaks[b]:
            peaks[b] = v
    return Envelope(len(inside), span, tuple(((b + 0.5) * width / 1e9, peaks[b]) for b in sorted(peaks)))


def throttle_shares(masks: Sequence[int]) -> ThrottleFigures | None:
    """How often each NVML clocks-event reason was set in ``masks`` (readings' bit masks).

    ``power_thermal_share``: readings with any of :data:`POWER_THERMAL_REASONS`; ``reason_shares``:
    each reason seen, by name, as a share of the readings. None without readings.
    """
    if not masks:
        return None
    counts = Counter(masks)  # a handful of distinct masks, however many readings
    by_name: Counter[str] = Counter()
    held = 0
    for mask, count in counts.items():
        names = throttle_reason_names(mask)
        for name in names:
            by_name[name] += count
        if any(name in POWER_THERMAL_REASONS for name in names):
            held += count
    shares = {name: count / len(masks) for name, count in sorted(by_name.items())}
    return ThrottleFigures(len(masks), held / len(masks), shares)


def gpu_aggregates(
    samples: Iterable[DeviceSample],
    names: dict[int, str],
    span_ns: tuple[int, int] | None = None,
    devices: Iterable[int] | None = None,
    steady_ns: tuple[int, int] | None = None,
) -> tuple[GpuFigures, ...]:
    """Per-GPU aggregates of the NVML samples; none when no GPU was sampled.

    ``devices``: the job's GPUs (NVML indexes); others are left out. With ``span_ns`` (the
    measured steps' span) the rates (utilisation, power, energy, clocks, PCIe) cover only the
    samples inside it, as samples/s does: start-up and compilation at idle power would otherwise
    bias joules per sample. ``span`` says which ("measured_steps", or "session" when fewer than
    two samples fell inside). Memory, temperature and throttling peaks cover the whole session.
    ``util_pct`` holds p5/p50/p95 and ``throttle`` the share of readings each clocks-event reason
    was set in (over the same readings as the rates); ``mem_used_envelope`` is the memory in use
    over ``steady_ns`` (:func:`memory_envelope`), the line a leak shows in.
    """
    keep = None if devices is None else set(devices)
    by_dev: dict[int, list[DeviceSample]] = {}
    for s in samples:
        if s.kind == "gpu" and (keep is None or s.device_index in keep):
            by_dev.setdefault(s.device_index, []).append(s)
    out = []
    for index in sorted(by_dev):
        every = by_dev[index]
        inside = [] if span_ns is None else [s for s in every if span_ns[0] <= s.t_ns <= span_ns[1]]
        rows = inside if len(inside) > 1 else every
        util = sorted(_vals(rows, "gpu_util_pct"))
        masks = [int(s.throttle_reasons) for s in rows if s.throttle_reasons is not None]
        in_use = [(s.t_ns, float(s.mem_used_bytes)) for s in every if s.mem_used_bytes]
        power = _vals(rows, "power_mw")
        energy = _vals(rows, "energy_mj")
        mask = 0
        for s in every:
            mask |= s.throttle_reasons or 0
        duration_s = (rows[-1].t_ns - rows[0].t_ns) / 1e9 if len(rows) > 1 else 0.0
        run_energy = _vals(every, "energy_mj")
        mem_used = _vals(every, "mem_used_bytes")
        proc_mem = _vals(every, "process_mem_bytes")
        out.append(
            GpuFigures(
                index=index,
                name=names.get(index),
                samples=len(rows),
                span="measured_steps" if rows is inside else "session",
                duration_s=duration_s,
                util=None
                if not util
                else UtilFigures(
                    mean=sum(util) / len(util),
                    readings=len(util),
                    p5=quantile(util, 0.05),
                    p50=quantile(util, 0.5),
                    p95=quantile(util, 0.95),
                    min=util[0],
                    max=util[-1],
                ),
                mem_used_bytes_max=int(max(mem_used)) if mem_used else None,
                mem_total_bytes=next((s.mem_total_bytes for s in every if s.mem_total_bytes), None),
                process_mem_bytes_max=int(max(proc_mem)) if proc_mem else None,
                mem_busy_pct_mean=_mean(_vals(rows, "mem_busy_pct")),
                power_w_mean=None if not power else sum(power) / len(power) / 1000,
                power_w_max=None if not power else max(power) / 1000,
                energy_j=(energy[-1] - energy[0]) / 1000 if len(energy) > 1 else None,
                run_energy_j=(run_energy[-1] - run_energy[0]) / 1000 if len(run_energy) > 1 else None,
                sm_clock_mhz_mean=_mean(_vals(rows, "sm_clock_mhz")),
                mem_clock_mhz_mean=_mean(_vals(rows, "mem_clock_mhz")),
                temperature_c_max=max(_vals(every, "temperature_c"), default=None),
                throttle_reasons=tuple(throttle_reason_names(mask)),
                throttle=throttle_shares(masks),
                mem_used_envelope=memory_envelope(in_use, steady_ns),
                pcie_rx_kbps_mean=_mean(_vals(rows, "pcie_rx_kbps")),
                pcie_tx_kbps_mean=_mean(_vals(rows, "pcie_tx_kbps")),
            )
        )
    return tuple(out)


def host_aggregates(
    samples: Iterable[DeviceSample], steady_ns: tuple[int, int] | None = None
) -> HostFigures | None:
    """Host CPU and memory aggregates, or None without host samples.

    ``rss_envelope``: the process's resident memory over ``steady_ns`` (:func:`memory_envelope`).
    """
    rows = [s for s in samples if s.kind == "host"]
    if not rows:
        return None
    rss = _vals(rows, "rss_bytes")
    return HostFigures(
        samples=len(rows),
        cpu_util_pct_mean=_mean(_vals(rows, "cpu_util_pct")),
        process_cpu_pct_mean=_mean(_vals(rows, "process_cpu_pct")),
        rss_peak_bytes=int(max(rss)) if rss else None,
        host_mem_total_bytes=next((s.host_mem_total_bytes for s in rows if s.host_mem_total_bytes), None),
        rss_envelope=memory_envelope([(s.t_ns, float(s.rss_bytes)) for s in rows if s.rss_bytes], steady_ns),
    )


#: A host reading covers the interval before it: a span shorter than one interval takes the next.
_NEXT_READING_NS = 1_000_000_000


def load_over(
    samples: Iterable[DeviceSample], span_ns: tuple[int, int] | None, machine_cores: int | None
) -> LoadFigures | None:
    """How busy the machine was during ``span_ns``, from one process's host readings (summary ``load``).

    ``busy_cores``: the machine's mean CPU use, in cores; ``own_cores``: the process's and its
    children's (DataLoader workers); ``other_cores``: the rest, what other processes took (on a run
    of several ranks rank 0 subtracts every rank's ``own_cores``: :func:`job_load`). None without
    host readings in the span or without the machine's core count.
    """
    rows = _readings_over(samples, span_ns)
    if not rows or not machine_cores:
        return None
    busy = sum(s.cpu_util_pct or 0.0 for s in rows) / len(rows) / 100 * machine_cores
    own = sum(s.process_cpu_pct or 0.0 for s in rows) / len(rows) / 100
    return LoadFigures(
        int(machine_cores), round(busy, 3), round(own, 3), round(max(0.0, busy - own), 3), len(rows)
    )


def _readings_over(samples: Iterable[DeviceSample], span_ns: tuple[int, int] | None) -> list[DeviceSample]:
    """The host readings (both CPU figures known) over ``span_ns``: those inside it, else the next one."""
    if span_ns is None:
        return []
    host = [
        s
        for s in samples
        if s.kind == "host" and s.cpu_util_pct is not None and s.process_cpu_pct is not None
    ]
    start, end = span_ns
    rows = [s for s in host if start < s.t_ns <= end]
    return rows or [s for s in host if end < s.t_ns <= end + _NEXT_READING_NS][:1]


def other_cores_series(
    samples: Iterable[DeviceSample],
    span_ns: tuple[int, int] | None,
    machine_cores: int | None,
    others_own_cores: float = 0.0,
) -> tuple[list[float], list[float]]:
    """(other processes' cores, the run's own cores) at each host reading over ``span_ns``.

    The readings :func:`load_over` averages, one by one (each covers the interval since the one
    before: 0.1 s at the default 10 Hz): the machine's busy cores less the process's own, less
    ``others_own_cores`` (on a run of several ranks, the other ranks' mean own CPU). Not clamped
    at 0 (the two figures are read a moment apart), so the series' mean is :func:`load_over`'s
    ``other_cores`` before its clamp. Empty without readings or the machine's core count.
    """
    rows = _readings_over(samples, span_ns)
    if not rows or not machine_cores:
        return [], []
    own = [(s.process_cpu_pct or 0.0) / 100 for s in rows]
    others = [
        (s.cpu_util_pct or 0.0) / 100 * machine_cores - o - others_own_cores
        for s, o in zip(rows, own, strict=True)
    ]
    return others, own


def job_load(rank0: LoadFigures | None, own_cores_by_rank: Sequence[float | None]) -> LoadFigures | None:
    """Rank 0's ``load`` with every same-host rank's own CPU taken out of ``other_cores``.

    ``own_cores_by_rank``: each rank's ``own_cores`` on rank 0's host, rank 0's included; an
    unknown one leaves ``other_cores`` unknown (None) rather than counting that rank as load.
    """
    if rank0 is None:
        return None
    known = [v for v in own_cores_by_rank if v is not None]
    if len(known) < len(own_cores_by_rank) or rank0.busy_cores is None:
        return replace(rank0, other_cores=None)
    own = round(sum(known), 3)
    return replace(
        rank0, own_cores=own, other_cores=round(max(0.0, rank0.busy_cores - own), 3), ranks=len(known)
    )


def run_statistics(
    steps: Sequence[StepRecord],
    samples: Sequence[DeviceSample],
    samples_per_step: int | None = None,
    job_gpus: Iterable[int] | None = None,
    gpu_names: dict[int, str] | None = None,
    machine_cores: int | None = None,
) -> ProfileSummary:
    """Every statistic of one rank's run that its records give: a summary holding only those.

    ``steps`` and ``samples`` are the rank's whole record (from run.db; the profiler and the report
    of a killed run both call this, so the two cannot differ): step count, measured steps, step
    time, throughput, phases, loss, GPU aggregates of the job's GPUs (rates over the measured
    steps, ``run_energy_j`` over the whole run), host aggregates and, given the machine's cores,
    the load over the measured steps (:func:`load_over`).
    """
    stats = step_statistics(steps, samples_per_step)
    span, steady = measured_span_ns(steps), steady_span_ns(steps)
    return ProfileSummary(
        steps=len(steps),
        measured_steps=stats.measured_steps,
        step_time=stats.step_time,
        throughput=stats.throughput,
        phases=stats.phases,
        gpus=gpu_aggregates(samples, gpu_names or {}, span, job_gpus, steady),
        host=host_aggregates(samples, steady),
        load_figures=load_over(samples, span, machine_cores),
        loss=loss_summary(steps) or LossFigures(),
    )


def rank_entry(
    rank: int,
    steps: Sequence[StepRecord],
    stats: StepStatistics | ProfileSummary,
    peak_memory_bytes: int | None,
) -> RankEntry:
    """One rank's figures for the ``ranks`` list."""
    return RankEntry(
        rank=rank,
        steps=len(steps),
        measured_steps=stats.measured_steps,
        step_time=stats.step_time if stats.measured_steps else None,
        samples_per_s=stats.throughput.samples_per_s,
        tokens_per_s=stats.throughput.tokens_per_s,
        peak_memory_bytes=peak_memory_bytes,
    )


def job_throughput(own: Throughput, entries: Sequence[RankEntry], ranks_per_replica: int = 1) -> Throughput:
    """The job's throughput: the ranks' sum over ``ranks_per_replica``, with rank 0's interval scaled.

    ``own`` is rank 0's; the ranks of one model-parallel replica (tensor × pipeline degree) train
    on the same samples. The interval is rank 0's, scaled to the job (the ranks step together).
    """

    def total(values: list[float | None]) -> float | None:
        return (
            sum(v for v in values if v is not None) / ranks_per_replica
            if values and None not in values
            else None
        )

    job = total([e.samples_per_s for e in entries])
    tokens = total([e.tokens_per_s for e in entries])
    mine, ci = own.samples_per_s, own.samples_per_s_ci95
    scaled = None if ci is None else tuple(v * job / mine if v and job and mine else None for v in ci)
    return Throughput(
        samples_per_s=job,
        tokens_per_s=tokens,
        samples_per_s_ci95=None if scaled is None else (scaled[0], scaled[1]),
        per_rank_samples_per_s=tuple(e.samples_per_s for e in entries),
        ranks_per_replica=ranks_per_replica,
    )
