"""The figures the advice rules need, derived from a loaded run. Pure functions; no torch.

Each function takes a :class:`~profilers.contract.rundir.RunData` and returns a frozen record with
units in its field names, or None (an empty tuple for per-device figures) when the run lacks the
data: a CPU run has no GPU samples, a run killed early has no summary's ``profile_window``, a
summary-only run has no per-step records. Nothing here raises on missing data.

Step figures are rank 0's measured steps (the steps after warm-up, FLOP counting and the
deep-profile window), as summary.json's are. Samples count when they fall inside the span of the
measured steps, so start-up and the profiler's own window do not colour them.
"""

from __future__ import annotations

import bisect
import functools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from autotune.advice.thresholds import MIN_MEMORY_SAMPLES, MIN_STEPS, limit
from profilers.contract.figures import DeviceEntry, Envelope
from profilers.contract.intervals import ratio_interval
from profilers.contract.profile_summary import GpuFigures, ProfileSummary
from profilers.contract.records import DeviceSample, StepRecord, phase_timed
from profilers.contract.rundir import RunData
from profilers.contract.schema import PHASES, POWER_THERMAL_REASONS
from profilers.contract.summarize import measured_span_ns as steps_span_ns
from profilers.contract.summarize import select_measured
from profilers.contract.summarize import steady_span_ns as steps_steady_span_ns

#: 1.4826 × MAD estimates σ of normally distributed values (the median absolute deviation of a
#: normal distribution is 0.6745 σ).
MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True, slots=True)
class DataWait:
    """How long rank 0's measured steps waited for their data (the ``data`` phase)."""

    measured_steps: int
    step_median_s: float
    data_median_s: float
    data_share: float  # 0-1: data time over measured step time (as summary.json's phases)
    dataloader_iter: str | None  # "_SingleProcessDataLoaderIter"… seen in the window, else None


@dataclass(frozen=True, slots=True)
class GpuUtil:
    """NVML utilization of one GPU of the job over the measured steps."""

    index: int
    name: str | None
    samples: int
    p5_pct: float
    p50_pct: float
    p95_pct: float


@dataclass(frozen=True, slots=True)
class DeviceMemory:
    """Peak memory of one GPU of the job against its capacity."""

    index: int
    name: str | None
    total_bytes: int
    used_max_bytes: int | None  # NVML: everything on the device (allocator cache, context, others)
    peak_allocated_bytes: int | None  # torch: the largest rank's max_memory_allocated
    peak_reserved_bytes: int | None  # torch: rank 0's max_memory_reserved

    @property
    def high_bytes(self) -> int:
        """The most memory the device held (the figure that runs out)."""
        return max(
            v for v in (self.used_max_bytes, self.peak_reserved_bytes, self.peak_allocated_bytes, 0) if v
        )


@dataclass(frozen=True, slots=True)
class StepOutliers:
    """Rank 0's measured steps above median + k·σ, σ = 1.4826 × MAD (robust to a huge step)."""

    measured_steps: int
    median_s: float
    sigma_s: float
    threshold_s: float
    steps: tuple[int, ...]  # outlier step numbers
    durations_s: tuple[float, ...]
    excess_s: float  # Σ (duration − median) over the outliers
    total_s: float  # Σ duration over the measured steps
    #: Outlier steps during which other processes took more than ``step_outliers.contention`` cores
    #: (None when the host's samples or core count are not known).
    contended_steps: tuple[int, ...] | None = None
    other_cores_outliers: float | None = None  # mean CPU other processes took during the outliers
    other_cores_rest: float | None = None  # ... and during the other measured steps


@dataclass(frozen=True, slots=True)
class MemoryTrend:
    """The least-squares line of memory in use over the measured steps."""

    source: str  # "GPU 0 memory in use (NVML)" or "host resident memory (RSS)"
    samples: int
    steps: int
    start_bytes: float  # the line's level at the first measured step
    bytes_per_step: float
    growth_bytes: float  # over the measured span
    growth_pct: float  # of start_bytes
    second_half_ratio: float | None  # slope over the second half / slope over the whole
    capacity_bytes: int | None  # the device's (or host's) memory


@dataclass(frozen=True, slots=True)
class Throttling:
    """How often one GPU's clocks were held down by power or heat during the measured steps."""

    index: int
    name: str | None
    samples: int
    share: float  # 0-1: readings with any power/thermal reason
    reasons: dict[str, float]  # reason -> share of readings (0-1)
    sm_clock_mean_mhz: float | None
    sm_clock_max_mhz: int | None  # the device's maximum


@dataclass(frozen=True, slots=True)
class Window:
    """summary.json's ``profile_window``, per step and as shares of the window's wall time."""

    steps: int
    step_us: float  # wall time per profiled step
    cpu_op_share: float  # 0-1 (threads summed, so it can pass 1)
    kernels_per_step: float | None
    kernel_median_us: float | None
    kernel_mean_us: float | None
    gpu_busy_share: float | None  # 0-1: union of kernel time over wall time
    tensor_core_share: float | None  # 0-1 of kernel time
    collective_share: float  # 0-1
    collective_exposed_share: float | None  # 0-1, CUDA only: not hidden behind compute kernels
    collective_source: str | None
    dataloader_iter: str | None
    measured_step_us: float | None  # the run's median measured step, outside the profiler's window

    @property
    def slowdown(self) -> float | None:
        """How much longer the profiled steps took than the measured median (torch.profiler's cost)."""
        return self.step_us / self.measured_step_us if self.measured_step_us else None


@dataclass(frozen=True, slots=True)
class RankTime:
    """One rank's median measured step, and how much of it is waiting for the other ranks."""

    rank: int
    measured_steps: int
    step_median_s: float
    phase_median_s: dict[str, float]
    wait_s: float  # backward median above the fastest rank's: waiting in the gradient all-reduce
    own_s: float  # step_median_s − wait_s: the rank's own work


_T = TypeVar("_T")


def memoized(fn: Callable[..., _T]) -> Callable[..., _T]:
    """Compute a fact of a run once: later calls with the same arguments get the same object.

    The rules, the report's sections and the dashboard ask for the same facts (GPU utilisation,
    step outliers, the memory trend...); each is computed on the first ask and kept in the run's
    ``memo``. Facts are immutable (tuples, frozen records), so sharing them is safe.
    """

    @functools.wraps(fn)
    def wrapper(run: RunData, *args: Any, **kwargs: Any) -> _T:
        key = (fn.__name__, args, tuple(sorted(kwargs.items())))
        try:
            return run.memo[key]
        except KeyError:
            value = run.memo[key] = fn(run, *args, **kwargs)
            return value

    return wrapper


@memoized
def measured_steps(run: RunData, rank: int = 0) -> tuple[StepRecord, ...]:
    """``rank``'s measured steps (see :func:`profilers.contract.summarize.select_measured`)."""
    return tuple(select_measured([s for s in run.steps if s.rank == rank]))


@memoized
def steady_span_ns(run: RunData) -> tuple[int, int] | None:
    """The measured span after the profiler's last instrumented step (:func:`steps_steady_span_ns`)."""
    return steps_steady_span_ns(run.steps)


@memoized
def measured_span_ns(run: RunData) -> tuple[int, int] | None:
    """Wall-clock span (time.time_ns) of every rank's measured steps, or None without steps."""
    return steps_span_ns(run.steps)


def device(run: RunData) -> DeviceEntry:
    """summary.json's ``device``, typed (every field None for a study or a summary without it)."""
    return summary_figures(run).device


def job_gpus(run: RunData) -> list[int]:
    """NVML indexes of the GPUs the job trained on. A CPU run has none.

    The profiler's own answer (``device.nvml_indexes``, matched by UUID: ``profilers.runtime.gpu_match``).
    Runs recorded before it: one process's CUDA device, or under torchrun the first ``world size``
    GPUs, taken as NVML's numbering (right without ``CUDA_VISIBLE_DEVICES``).
    """
    dev = device(run)
    if dev.kind != "cuda":
        return []
    if dev.nvml_indexes is not None:
        return list(dev.nvml_indexes)
    count = dev.count or 1
    return list(range(count)) if count > 1 else [dev.index or 0]


def summary_figures(run: RunData) -> ProfileSummary:
    """The run's summary, typed (``RunData.figures``; an empty one for a study)."""
    return run.figures if run.figures is not None else ProfileSummary.empty()


def gpu_entry(run: RunData, index: int) -> GpuFigures | None:
    """summary.json's ``gpu`` entry of NVML index ``index``, typed (None when it has none).

    Its figures are the summarizer's over every reading in run.db (a run loaded from a summary
    that predates a figure has it filled from the samples by the same code: ``RunData``).
    """
    return summary_figures(run).gpu(index)


def _gpu_name(run: RunData, index: int) -> str | None:
    gpu = gpu_entry(run, index)
    return gpu.name if gpu is not None else device(run).name


@memoized
def data_wait(run: RunData) -> DataWait | None:
    """Rank 0's data wait, from its measured steps (or summary.json's phases without them)."""
    w = summary_figures(run).window
    loader = w.dataloader_iter if w is not None else None
    steps = measured_steps(run)
    if steps:
        timed = phase_timed(steps)  # a CUDA run's data waits: the steps that timed phases on the GPU
        total = sum(s.duration_ns for s in timed)
        if total <= 0:
            return None
        return DataWait(
            len(steps),
            statistics.median(s.duration_ns for s in steps) / 1e9,
            statistics.median(s.data_ns for s in timed) / 1e9,
            sum(s.data_ns for s in timed) / total,
            loader,
        )
    figures = summary_figures(run)
    share, median = figures.phases.get("data"), figures.step_median_s
    if share is None or not median:
        return None
    return DataWait(figures.measured_steps or 0, median, share * median, share, loader)


@memoized
def gpu_utilization(run: RunData) -> tuple[GpuUtil, ...]:
    """p5/p50/p95 of NVML utilization per job GPU over the measured steps (GPUs with readings)."""
    out = []
    for index in job_gpus(run):
        gpu = gpu_entry(run, index)
        util = gpu.util if gpu is not None else None
        if gpu is None or util is None or util.p5 is None or util.p50 is None or util.p95 is None:
            continue
        readings = util.readings if util.readings is not None else gpu.samples
        out.append(GpuUtil(index, gpu.name, readings, util.p5, util.p50, util.p95))
    return tuple(out)


@memoized
def device_memory(run: RunData) -> tuple[DeviceMemory, ...]:
    """Peak memory of each job GPU whose capacity is known."""
    figures = summary_figures(run)
    allocated = [b for b in (r.peak_memory_bytes for r in figures.ranks) if b]
    peak_allocated = max(allocated) if allocated else figures.peak_memory_bytes
    out = []
    for index in job_gpus(run):
        gpu = gpu_entry(run, index)
        total = (gpu.mem_total_bytes if gpu is not None else None) or _sample_total(run, index)
        if not total:
            continue
        out.append(
            DeviceMemory(
                index,
                (gpu.name if gpu is not None else None) or device(run).name,
                int(total),
                gpu.mem_used_bytes_max if gpu is not None else None,
                peak_allocated,
                figures.memory.cuda_peak_reserved_bytes,
            )
        )
    return tuple(out)


@memoized
def step_outliers(run: RunData, sigmas: float | None = None) -> StepOutliers | None:
    """Rank 0's measured steps slower than median + ``sigmas`` × σ (σ = 1.4826 × MAD).

    The median and the median absolute deviation (MAD) ignore the outliers themselves, so a
    single huge step cannot raise the bar it is judged by (a mean and standard deviation would
    let it hide). None with fewer than :data:`~autotune.advice.thresholds.MIN_STEPS` steps.
    """
    k = limit("step_outliers.sigma") if sigmas is None else sigmas
    steps = [s for s in run.steps if s.rank == 0 and s.kind == "measured"]
    if len(steps) < MIN_STEPS:
        return None

    def training_s(s: StepRecord) -> float:  # evaluation inside a step is its own phase, not a stall
        return (s.duration_ns - s.eval_ns) / 1e9

    durations = [training_s(s) for s in steps]
    median = statistics.median(durations)
    sigma = MAD_TO_SIGMA * statistics.median(abs(d - median) for d in durations)
    threshold = median + k * sigma
    slow = [s for s in steps if training_s(s) > threshold]
    contended, during, rest = _contention(run, slow, [s for s in steps if training_s(s) <= threshold])
    return StepOutliers(
        len(steps),
        median,
        sigma,
        threshold,
        tuple(s.step for s in slow),
        tuple(training_s(s) for s in slow),
        sum(training_s(s) - median for s in slow),
        sum(durations),
        contended,
        during,
        rest,
    )


#: Host samples cover the interval before them: a step's is the first at or after its end, within this.
_SAMPLE_REACH_NS = 250_000_000


@memoized
def host_cpu(run: RunData) -> tuple[int, list[DeviceSample]] | None:
    """(the machine's cores, rank 0's host samples with a CPU reading); None without the core count."""
    cores = next((d.info.cpu_cores for d in run.devices if d.kind == "host"), None)
    if not cores:
        return None
    ranks_known = len(run.sample_ranks) == len(run.samples)
    return int(cores), [
        s
        for i, s in enumerate(run.samples)
        if s.kind == "host" and s.cpu_util_pct is not None and not (ranks_known and run.sample_ranks[i] != 0)
    ]


def _rank_cpu(run: RunData) -> list[tuple[list[int], list[float]]]:
    """(times, cores) of the process CPU of every other rank on rank 0's host, from their own readings.

    Which ranks share rank 0's host: the summary's ``load.ranks`` (the job's first ranks, as torchrun
    numbers them); none when it does not say.
    """
    same_host = summary_figures(run).host_ranks
    if same_host is None or same_host < 2 or len(run.sample_ranks) != len(run.samples):
        return []
    out = []
    for rank in range(1, same_host):
        rows = [
            (s.t_ns, s.process_cpu_pct / 100)
            for s, r in zip(run.samples, run.sample_ranks, strict=True)
            if r == rank and s.kind == "host" and s.process_cpu_pct is not None
        ]
        out.append(([t for t, _ in rows], [c for _, c in rows]))
    return out


@memoized
def other_cores(run: RunData) -> list[tuple[int, float]]:
    """(t_ns, cores other processes kept busy) from rank 0's host samples; [] when unknown.

    The host's CPU use (all processes, % of the machine) less the job's: this process's (with its
    children) and that of every other rank on the host, read from its nearest reading.
    """
    host = host_cpu(run)
    if host is None:
        return []
    cores, samples = host
    ranks = _rank_cpu(run)

    def job_cpu(s: DeviceSample) -> float:
        total = (s.process_cpu_pct or 0.0) / 100
        for times, cpu in ranks:
            i = bisect.bisect_left(times, s.t_ns)
            near = [j for j in (i - 1, i) if 0 <= j < len(times)]
            near = [j for j in near if abs(times[j] - s.t_ns) <= _SAMPLE_REACH_NS]
            if near:
                total += cpu[min(near, key=lambda j: abs(times[j] - s.t_ns))]
        return total

    return [
        (s.t_ns, max(0.0, s.cpu_util_pct / 100 * cores - job_cpu(s)))
        for s in samples
        if s.cpu_util_pct is not None and s.process_cpu_pct is not None
    ]


@memoized
def idle_cores(run: RunData) -> tuple[float, int] | None:
    """(mean idle cores, the machine's cores) over rank 0's host samples; None when unknown."""
    host = host_cpu(run)
    if host is None or not host[1]:
        return None
    cores, samples = host
    return statistics.fmean(max(0.0, (1 - (s.cpu_util_pct or 0.0) / 100) * cores) for s in samples), cores


def _contention(
    run: RunData, slow: Sequence[StepRecord], rest: Sequence[StepRecord]
) -> tuple[tuple[int, ...] | None, float | None, float | None]:
    """Which slow steps coincide with other processes' CPU, and those processes' mean load."""
    readings = other_cores(run)
    if not readings or not slow or not rest:
        return None, None, None
    times = [t for t, _ in readings]

    def load(step: StepRecord) -> float | None:
        end = step.start_ns + step.duration_ns
        i = bisect.bisect_left(times, end)
        return readings[i][1] if i < len(times) and times[i] - end <= _SAMPLE_REACH_NS else None

    base = [v for s in rest if (v := load(s)) is not None]
    hits = [(s.step, v) for s in slow if (v := load(s)) is not None]
    if not base or not hits:
        return None, None, None
    contended = tuple(step for step, v in hits if v > limit("step_outliers.contention"))
    return contended, statistics.fmean(v for _, v in hits), statistics.fmean(base)


@memoized
def memory_trend(run: RunData) -> MemoryTrend | None:
    """The memory line over the measured steps, where memory grows fastest.

    A least-squares line through the peaks of up to 8 equal time slices of the steady span (the
    summary's envelopes: :func:`profilers.contract.summarize.memory_envelope`): its slope per step,
    its growth over the span against its level at the start, and the slope of the second half
    against the whole (a leak keeps growing; a warm-up allocation stops).

    Each job GPU's NVML memory in use, or on a CPU run the host's resident memory (rank 0's: the
    summary is rank 0's). None with fewer than
    :data:`~autotune.advice.thresholds.MIN_MEMORY_SAMPLES` readings in the span.
    """
    steps = _steady_steps(run)
    if not steps:
        return None
    series: list[tuple[str, Envelope | None, int | None]] = []
    for index in job_gpus(run):
        gpu = gpu_entry(run, index)
        if gpu is not None:
            total = gpu.mem_total_bytes or _sample_total(run, index)
            series.append((f"GPU {index} memory in use (NVML)", gpu.mem_used_envelope, total))
    host = summary_figures(run).host
    if not job_gpus(run) and host is not None:
        series.append(("host resident memory (RSS)", host.rss_envelope, host.host_mem_total_bytes))
    trends = [t for name, env, cap in series if (t := _trend(name, env, cap, len(steps))) is not None]
    enough = [t for t in trends if t.samples >= MIN_MEMORY_SAMPLES]
    return max(enough, key=lambda t: t.growth_pct, default=None)


def _steady_steps(run: RunData) -> list[StepRecord]:
    """The measured steps of the steady span (after the profiler's instruments); [] without one."""
    span = steady_span_ns(run)
    return [s for s in measured_steps(run) if span is not None and s.start_ns >= span[0]]


#: What the heap trend is a line of (summary ``memory.heap_live_envelope``: profilers.runtime.heap).
HEAP_SOURCE = "memory in live C allocations at step ends (glibc)"


@memoized
def heap_trend(run: RunData) -> MemoryTrend | None:
    """The line of the bytes held in live C allocations at step ends, over the steady span.

    Beside RSS it tells a leak (live bytes grow) from an allocator that keeps what was freed (RSS
    grows, live bytes stay flat). None without the readings (another C library, an older run).
    """
    steps = _steady_steps(run)
    figures = summary_figures(run)
    envelope, host = figures.memory.heap_live_envelope, figures.host
    if not steps or envelope is None:
        return None
    trend = _trend(HEAP_SOURCE, envelope, host.host_mem_total_bytes if host else None, len(steps))
    return trend if trend is not None and trend.samples >= MIN_MEMORY_SAMPLES else None


def _sample_total(run: RunData, index: int) -> int | None:
    """GPU ``index``'s capacity from its readings (a summary without it)."""
    return next(
        (
            s.mem_total_bytes
            for s in run.samples
            if s.kind == "gpu" and s.device_index == index and s.mem_total_bytes
        ),
        None,
    )


def _trend(source: str, envelope: Envelope | None, capacity: int | None, steps: int) -> MemoryTrend | None:
    """The line through an envelope's peaks (None without one)."""
    if envelope is None:
        return None
    readings, (start_ns, end_ns), peaks = envelope.readings, envelope.span_ns, envelope.peaks
    if readings < 2 or end_ns <= start_ns or len(peaks) < 2:
        return None
    slope, intercept = _fit([x for x, _ in peaks], [v for _, v in peaks])
    seconds = (end_ns - start_ns) / 1e9
    half = [(x, v) for x, v in peaks if x >= seconds / 2]
    ratio = None
    if len(half) >= 2 and slope > 0:
        ratio = _fit([x for x, _ in half], [v for _, v in half])[0] / slope
    start = intercept if intercept > 0 else peaks[0][1]
    growth = slope * seconds
    return MemoryTrend(
        source, readings, steps, start, growth / steps, growth, 100 * growth / start, ratio, capacity
    )


def _fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares slope and intercept of ys on xs (slope 0 when xs do not vary)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx > 0 else 0.0
    return slope, my - slope * mx


@memoized
def throttling(run: RunData) -> tuple[Throttling, ...]:
    """Power/thermal clocks-event reasons per job GPU over the measured steps (GPUs with readings)."""
    max_clock = {d.index: d.info.max_sm_clock_mhz for d in run.devices if d.kind == "gpu"}
    out = []
    for index in job_gpus(run):
        gpu = gpu_entry(run, index)
        held = gpu.throttle if gpu is not None else None
        if gpu is None or held is None or not held.readings:
            continue
        out.append(
            Throttling(
                index,
                gpu.name,
                held.readings,
                held.power_thermal_share,
                {n: v for n, v in held.reason_shares.items() if n in POWER_THERMAL_REASONS and v > 0},
                gpu.sm_clock_mhz_mean,
                max_clock.get(index),
            )
        )
    return tuple(out)


@memoized
def own_work_ratio(run: RunData, slow_rank: int, fast_rank: int) -> tuple[float, float, float] | None:
    """(low, geometric mean, high): ``slow_rank``'s own work over ``fast_rank``'s, step by step.

    Each measured step both ranks ran is one pair: a rank's own work in it is its step less its
    backward above the step's fastest backward (the wait in the all-reduce, as in ``rank_times``).
    The ranks' steps are coupled by DDP, so pairing takes out what the whole step shares (a slow
    all-reduce, a busy moment of the machine); the interval is the 95% t interval of the mean log
    ratio. None with fewer than MIN_STEPS pairs or a step without own work.
    """
    by_rank: dict[int, dict[int, StepRecord]] = {}
    for rank in {s.rank for s in run.steps}:
        rows = phase_timed(select_measured([s for s in run.steps if s.rank == rank]))  # backward: timed
        by_rank[rank] = {s.step: s for s in rows}
    if slow_rank not in by_rank or fast_rank not in by_rank:
        return None
    common = set.intersection(*(set(steps) for steps in by_rank.values()))
    ratios = []
    for step in sorted(common):
        fastest_backward = min(steps[step].backward_ns for steps in by_rank.values())

        def own_ns(rank: int, step: int = step, floor: int = fastest_backward) -> int:
            s = by_rank[rank][step]
            return s.duration_ns - max(0, s.backward_ns - floor)

        slow, fast = own_ns(slow_rank), own_ns(fast_rank)
        if slow <= 0 or fast <= 0:
            return None
        ratios.append(slow / fast)
    return ratio_interval(ratios) if len(ratios) >= MIN_STEPS else None


@memoized
def window(run: RunData) -> Window | None:
    """summary.json's ``profile_window`` as per-step figures and shares; None without one."""
    w = summary_figures(run).window
    if w is None:
        return None
    steps = w.steps

    def share(value: float | None) -> float | None:
        return None if value is None else value / w.wall_us

    median_s = summary_figures(run).step_median_s
    return Window(
        steps,
        w.wall_us / steps,
        share(w.cpu_op_self_us) or 0.0,
        None if w.kernels is None else w.kernels / steps,
        w.kernel_median_us,
        w.kernel_mean_us,
        share(w.kernel_busy_us),
        w.tensor_core_fraction,
        share(w.collective_time_us) or 0.0,
        share(w.collective_exposed_us),
        w.collective_source,
        w.dataloader_iter,
        None if median_s is None else median_s * 1e6,
    )


@memoized
def rank_times(run: RunData) -> tuple[RankTime, ...]:
    """Each rank's median step and phases, with its wait for the others taken out.

    Under DDP a rank that is ahead waits for the others inside its backward pass (the gradient
    all-reduce), so every rank's step takes as long as the slowest one's. A rank's backward
    median above the fastest rank's is counted as that wait; what is left is its own work. (A rank
    slow *inside* its backward is hidden this way: every rank's backward then waits as long.)
    """
    by_rank: dict[int, list[StepRecord]] = {}
    for s in run.steps:
        by_rank.setdefault(s.rank, []).append(s)
    medians = {}
    for rank, rows in sorted(by_rank.items()):
        steps = select_measured(rows)
        if steps:
            timed = phase_timed(steps)
            phases = {p: statistics.median(s.phase_ns()[p] for s in timed) / 1e9 for p in PHASES}
            medians[rank] = (len(steps), statistics.median(s.duration_ns for s in steps) / 1e9, phases)
    if not medians:
        return ()
    fastest_backward = min(m[2]["backward"] for m in medians.values())
    out = []
    for rank, (n, step, phases) in medians.items():
        wait = max(0.0, phases["backward"] - fastest_backward)
        out.append(RankTime(rank, n, step, phases, wait, max(step - wait, 1e-12)))
    return tuple(out)
