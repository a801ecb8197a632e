"""``autotune compare A B``: what changed between two runs, two traces, or a study's baseline and best.

A side is a profile run (its summary and its deep-profile trace), a torch.profiler trace (a file or
a folder; rank 0's, or the first rank's, figures), or a trial of a study. The comparison gives the
step time (median and spread) and, where both sides have them, throughput, peak memory, each kind
of GPU time per step (busy, idle, compute, non-compute, communication, memcpy), host op time per
step, and the kernels and operators whose time per step changed most. GPU and op figures are per
step of what the trace covers, so a 3-step trace compares with a 10-step window.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.compare_gate import Evidence, GateDecision, decide, weigh
from autotune.fmt import format_seconds
from autotune.report.jsonout import clean_json
from profilers.contract.json_checks import JsonObject
from profilers.contract.load import LoadComparison, LoadProfile, RunLoad, compare_loads, load_phrase
from profilers.contract.profile_summary import ProfileSummary
from profilers.contract.rundir import RunDirError, load_run, read_load_profile
from profilers.contract.schema import Params, resolve_trial_dir
from profilers.contract.traces import TRACES_DIR, is_trace_path
from profilers.traces.analysis import analyse_traces
from profilers.traces.gpu_time import KIND_MEMORY, RankGpuTime
from profilers.traces.kineto import TraceError

#: Kernels and operators listed, most changed first.
SHOWN = 10
_ALL = 1_000_000  # the analysis keeps every kernel and op name for a comparison


class CompareError(ValueError):
    """A side that cannot be compared; the message is one line."""


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a comparison."""

    label: str  # the path, or "trial N" of a study
    kind: str  # "profile", "trace" or "trial"
    step_time_s: float | None  # median
    step_low_s: float | None  # p10 of a run's measured steps, or a trace's shortest step
    step_high_s: float | None  # p90, or a trace's longest step
    steps: int  # steps behind the step time
    samples_per_s: float | None = None
    samples_per_s_ci95: tuple[float, float] | None = None  # a run's 95% interval of its throughput
    peak_memory_bytes: int | None = None
    device: str | None = None
    load: RunLoad | None = None  # other processes' CPU during a run's measured steps (None for a trace)
    load_profile: LoadProfile | None = None  # the same, reading by reading (from run.db)
    source: str | None = None  # the resolved path: two sides from one source are the same run
    params: Params = field(default_factory=dict)
    gpu: RankGpuTime | None = None  # the trace's figures (every kernel and op name kept)
    trace_steps: int = 0  # steps the trace's kernel times are divided by (its last step is left out)
    op_steps: int = 0  # steps its host op times are divided by (every step of the trace; 0: unknown)


@dataclass(frozen=True, slots=True)
class Delta:
    """One figure on both sides: ``ratio`` is b / a."""

    what: str
    unit: str  # "s", "samples/s", "bytes", "cores", "µs/step" (or "µs/trace": steps unknown)
    a: float | None
    b: float | None
    ratio: float | None


@dataclass(frozen=True, slots=True)
class NameDelta:
    """One kernel's or operator's time per step on both sides (0 where it did not run)."""

    name: str
    a_us_per_step: float
    b_us_per_step: float
    delta_us_per_step: float  # b − a
    a_calls_per_step: float
    b_calls_per_step: float


@dataclass(frozen=True, slots=True)
class Comparison:
    """Everything the compare command shows (and writes as JSON)."""

    a: Side
    b: Side
    figures: tuple[Delta, ...]
    kernels: tuple[NameDelta, ...]  # most changed first
    ops: tuple[NameDelta, ...]
    verdict: str  # one sentence on the step time
    notes: tuple[str, ...] = ()
    #: GPU and operator figures per step (both traces' steps known), else over each whole trace
    per_step: bool = True
    evidence: Evidence | None = None  # B's throughput against A's (the verdict's and the gate's)
    gate: GateDecision | None = None  # ``--fail-if-slower``'s decision, when asked for


def _steps_covered(gpu: RankGpuTime | None, window_steps: int = 0) -> tuple[int, int]:
    """The steps a trace's analysed kernels and its host ops cover: (kernel steps, op steps).

    By the trace's ``ProfilerStep#`` ranges (:attr:`RankGpuTime.analysed_steps` for the kernels),
    else by the profile window's steps (a run's summary, for a trace written without them), else
    (0, 0): unknown, and the figures are for the whole trace.
    """
    if gpu is not None and gpu.steps:
        return gpu.analysed_steps, gpu.steps
    return window_steps, window_steps


def trace_side(path: Path) -> Side:
    """A side from a trace file or folder (rank 0's figures, or the first rank's)."""
    rank = analyse_traces(path, top=_ALL).ranks[0]
    times = rank.step_times_s
    kernel_steps, op_steps = _steps_covered(rank)
    return Side(
        label=str(path),
        kind="trace",
        source=str(path.resolve()),
        step_time_s=rank.step_time_s_median,
        step_low_s=min(times) if times else None,
        step_high_s=max(times) if times else None,
        steps=len(times),
        device=rank.device_name,
        gpu=rank,
        trace_steps=kernel_steps,
        op_steps=op_steps,
    )


def run_side(run_dir: Path, kind: str = "profile", label: str | None = None, params: Any = None) -> Side:
    """A side from a profile run's directory (its summary, and its deep-profile trace if any)."""
    run = load_run(run_dir, with_store=False)
    f = run.figures if run.figures is not None else ProfileSummary.parse({}, str(run_dir))
    gpu = None
    traces = Path(run_dir) / TRACES_DIR
    if traces.is_dir():
        try:
            gpu = analyse_traces(traces, top=_ALL).ranks[0]
        except TraceError:
            gpu = None
    kernel_steps, op_steps = _steps_covered(gpu, f.window.steps if f.window is not None else 0)
    return Side(
        label=label or str(run_dir),
        kind=kind,
        step_time_s=f.step_time.median_s,
        step_low_s=f.step_time.p10_s,
        step_high_s=f.step_time.p90_s,
        steps=f.measured_steps or 0,
        samples_per_s=f.throughput.samples_per_s,
        samples_per_s_ci95=f.throughput.bounded_ci95,
        peak_memory_bytes=f.peak_memory_bytes,
        device=f.device.name,
        load=f.load,
        load_profile=read_load_profile(Path(run_dir), run.summary),
        source=str(Path(run_dir).resolve()),
        params=dict(params or f.params_used),
        gpu=gpu,
        trace_steps=kernel_steps,
        op_steps=op_steps,
    )


def side_of(path: Path) -> Side:
    """A side from a path: a trace, or a profile run (a study needs :func:`study_sides`)."""
    if not path.exists():
        raise CompareError(f"{path}: no such file or directory")
    if is_trace_path(path):
        return trace_side(path)
    try:
        side = run_side(path)
    except RunDirError as exc:
        raise CompareError(str(exc)) from None
    return side


def study_sides(study_dir: Path) -> tuple[Side, Side]:
    """A study's baseline trial and its best one."""
    try:
        run = load_run(study_dir, with_store=False)
    except RunDirError as exc:
        raise CompareError(str(exc)) from None
    if run.kind != "tune":
        raise CompareError(f"{study_dir}: a profile run, not a study; give two runs or traces to compare")
    base, best = (run.study.baseline, run.study.best) if run.study is not None else (None, None)
    if base is None or best is None or not base.run_dir or not best.run_dir:
        raise CompareError(f"{study_dir}: the study has no baseline and best trial with a run to compare")
    sides = []
    for entry in (base, best):
        trial_dir = resolve_trial_dir(study_dir, str(entry.run_dir))
        try:
            sides.append(run_side(trial_dir, "trial", f"trial {entry.id}", entry.params))
        except RunDirError as exc:
            raise CompareError(f"trial {entry.id}: {exc}") from None
    return sides[0], sides[1]


def _overlap(a: tuple[float | None, float | None], b: tuple[float | None, float | None]) -> bool | None:
    """Whether two ranges overlap (None when one is unknown)."""
    if a[0] is None or a[1] is None or b[0] is None or b[1] is None:
        return None
    return a[0] <= b[1] and b[0] <= a[1]


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a if a and b is not None else None


def _per_step(side: Side, value: float, ops: bool = False) -> float:
    steps = side.op_steps if ops else side.trace_steps
    return value / steps if steps else value


def _gpu_figures(a: Side, b: Side, unit: str) -> list[Delta]:
    """Each kind of GPU time per step, and host op time per step, where both traces have them."""
    ga, gb = a.gpu, b.gpu
    if ga is None or gb is None:
        return []
    rows: list[tuple[str, float, float]] = []
    if ga.kernel_time_us > 0 and gb.kernel_time_us > 0:
        rows += [
            ("GPU busy", ga.busy_us, gb.busy_us),
            ("GPU idle", ga.idle_us, gb.idle_us),
            ("compute", ga.compute_us, gb.compute_us),
            ("non-compute", ga.non_compute_us, gb.non_compute_us),
            ("communication", ga.comm_us, gb.comm_us),
            ("communication exposed", ga.comm_exposed_us, gb.comm_exposed_us),
            (
                "memcpy/memset",
                ga.kind_us(KIND_MEMORY),
                gb.kind_us(KIND_MEMORY),
            ),
        ]
    out = []
    for what, va, vb in rows:
        pa, pb = _per_step(a, va), _per_step(b, vb)
        out.append(Delta(what, unit, pa, pb, _ratio(pa, pb)))
    pa, pb = _per_step(a, ga.cpu_op_self_us, ops=True), _per_step(b, gb.cpu_op_self_us, ops=True)
    out.append(Delta("host ops (self time)", unit, pa, pb, _ratio(pa, pb)))
    return out


def _name_deltas(a: Side, b: Side, rows_of: str) -> tuple[NameDelta, ...]:
    """Kernels (``rows_of="kernels"``) or ops whose time per step changed most."""
    if a.gpu is None or b.gpu is None:
        return ()

    def table(side: Side) -> dict[str, tuple[float, float]]:
        assert side.gpu is not None
        if rows_of == "kernels":
            return {
                k.name: (_per_step(side, k.total_us), _per_step(side, k.count)) for k in side.gpu.top_kernels
            }
        return {
            o.name: (_per_step(side, o.self_us, True), _per_step(side, o.count, True))
            for o in side.gpu.top_ops
        }

    ta, tb = table(a), table(b)
    out = []
    for name in ta.keys() | tb.keys():
        (us_a, calls_a), (us_b, calls_b) = ta.get(name, (0.0, 0.0)), tb.get(name, (0.0, 0.0))
        out.append(NameDelta(name, us_a, us_b, us_b - us_a, calls_a, calls_b))
    out.sort(key=lambda d: (-abs(d.delta_us_per_step), d.name))
    return tuple(out[:SHOWN])


def _verdict(a: Side, b: Side, ev: Evidence) -> str:
    """One sentence on which side is faster, and whether beyond the noise, from the gate's evidence.

    Throughput when both have it (their steps may hold different batches): beyond the noise only
    when :func:`~autotune.compare_gate.weigh` could decide (loads alike burst by burst, enough
    steps) and the 95% interval of B / A, with the spread between processes, leaves out 1, the
    same figures ``--fail-if-slower`` acts on. When the slower side ran beside more load than the
    other, by more than the band, the sentence says the load can explain the difference. Without
    a throughput on a side (a trace), the median step and the step times' spreads (p10–p90 of a
    run, shortest–longest of a trace).
    """
    if ev.same_run is not None:
        return f"A and B are the same run ({ev.same_run})"
    if a.step_time_s is None or b.step_time_s is None:
        return "one side has no step time, so the two cannot be compared on it"
    ratio = a.step_time_s / b.step_time_s
    how = f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"
    step_a, step_b = format_seconds(a.step_time_s), format_seconds(b.step_time_s)
    loads = compare_loads(a.load, b.load)
    if ev.ratio is None or not a.samples_per_s or not b.samples_per_s:
        text = f"B's median step ({step_b}) is {how} than A's ({step_a})"
        overlap = _overlap((a.step_low_s, a.step_high_s), (b.step_low_s, b.step_high_s))
        if loads.explains(ratio < 1):
            return text + _explained(loads, ratio < 1)
        clause = _load_clause(loads, a, b)
        if overlap is None:
            return text + clause
        if overlap:
            return (
                text
                + "; the two step-time spreads overlap, so this may be noise: compare longer runs"
                + clause
            )
        return text + "; the two step-time spreads do not overlap" + clause
    speed = ev.ratio
    faster = f"{speed:.2f}x the throughput of A" if speed >= 1 else f"{1 / speed:.2f}x less throughput than A"
    text = (
        f"B trains at {faster} ({b.samples_per_s:,.1f} against {a.samples_per_s:,.1f} samples/s); "
        f"its median step ({step_b}) is {how} than A's ({step_a})"
    )
    if loads.explains(speed < 1):
        return text + _explained(loads, speed < 1)
    if ev.problem is not None:
        tail = ": compare runs made under the same load" if ev.problem.startswith("loads") else ""
        return text + f"; but {ev.problem}, so no claim is made beyond the noise{tail}"
    assert ev.ratio_ci95 is not None
    low, high = ev.ratio_ci95
    span = f"the 95% interval of B / A with the spread between processes ({low:.2f}–{high:.2f}x)"
    if low <= 1 <= high:
        return text + f"; {span} holds 1, so this may be noise: compare longer runs" + _alike_clause(ev)
    side = "above" if low > 1 else "below"
    return text + f"; {span} lies wholly {side} 1: beyond the noise" + _alike_clause(ev)


def _explained(loads: LoadComparison, b_slower: bool) -> str:
    """The slower side's heavier load, which can explain the difference."""
    assert loads.a is not None and loads.b is not None
    slow, fast = ("B", "A") if b_slower else ("A", "B")
    slow_load, fast_load = (loads.b, loads.a) if b_slower else (loads.a, loads.b)
    return (
        f"; but {slow} ran with {load_phrase(slow_load)} against {fast_load.other_cores:.1f} "
        f"for {fast} (more than the ±{loads.band_cores:.1f}-core band), which can explain the "
        "difference: compare runs made under the same load"
    )


def _alike_clause(ev: Evidence) -> str:
    """The loads the claim stands on (alike burst by burst)."""
    if ev.loads is None or ev.loads.a is None or ev.loads.b is None:
        return ""
    a, b = ev.loads.a, ev.loads.b
    return (
        f" (loads alike burst by burst: other processes on {a.mean_cores:.1f} and {b.mean_cores:.1f} cores, "
        f"p90 {a.p90_cores:.1f} and {b.p90_cores:.1f})"
    )


def _load_clause(loads: LoadComparison, a: Side, b: Side) -> str:
    """What the two mean loads add to a step-time verdict they do not explain."""
    if loads.a is None or loads.b is None:
        missing = " and ".join(n for n, s in (("A", a), ("B", b)) if s.kind != "trace" and s.load is None)
        return f" (the machine's load during {missing} was not recorded)" if missing else ""
    if loads.differs:  # the faster side had the more load: the difference stands despite it
        return (
            f", though the faster side ran under more load ({loads.a.other_cores:.1f} cores of other "
            f"processes for A, {loads.b.other_cores:.1f} for B)"
        )
    return (
        f" (similar load: {loads.a.other_cores:.1f} and {loads.b.other_cores:.1f} cores of other processes)"
    )


def compare(a: Side, b: Side, fail_if_slower_pct: float | None = None) -> Comparison:
    """The comparison of two sides (B against A), with the gate's decision given a threshold (percent)."""
    evidence = weigh(a, b)
    figures = [
        Delta("step time (median)", "s", a.step_time_s, b.step_time_s, _ratio(a.step_time_s, b.step_time_s)),
    ]
    if a.samples_per_s is not None or b.samples_per_s is not None:
        figures.append(Delta("throughput", "samples/s", a.samples_per_s, b.samples_per_s,
                             _ratio(a.samples_per_s, b.samples_per_s)))  # fmt: skip
    if a.load is not None or b.load is not None:
        la = a.load.other_cores if a.load else None
        lb = b.load.other_cores if b.load else None
        figures.append(Delta("other processes' CPU", "cores", la, lb, _ratio(la, lb)))
    if a.load_profile is not None or b.load_profile is not None:
        pa90 = a.load_profile.p90_cores if a.load_profile else None
        pb90 = b.load_profile.p90_cores if b.load_profile else None
        figures.append(Delta("other processes' CPU (p90)", "cores", pa90, pb90, _ratio(pa90, pb90)))
    if a.peak_memory_bytes is not None or b.peak_memory_bytes is not None:
        pa, pb = a.peak_memory_bytes, b.peak_memory_bytes
        figures.append(Delta("peak memory", "bytes", pa, pb, _ratio(pa, pb)))
    # per step only where both traces' steps are known; else both over their whole trace
    per_step = bool(a.op_steps and b.op_steps) or a.gpu is None or b.gpu is None
    da, db = (a, b) if per_step else (_whole_trace(a), _whole_trace(b))
    figures += _gpu_figures(da, db, "µs/step" if per_step else "µs/trace")
    notes = []
    for name, side in (("A", a), ("B", b)):
        if side.gpu is None:
            notes.append(
                f"{name} has no trace: no GPU or operator figures for it (profile with the deep window)"
            )
        else:
            if side.gpu.kernel_time_us <= 0:
                notes.append(f"{name}'s trace has no GPU activity: operators only")
            if not side.op_steps:
                notes.append(
                    f"{name}'s trace marks no steps (no ProfilerStep# ranges: torch.profiler writes them "
                    "only with a schedule): its GPU and operator figures are for the whole trace, not "
                    "per step"
                )
    if a.device and b.device and a.device != b.device:
        notes.append(f"different devices: A on {a.device}, B on {b.device}")
    return Comparison(
        a,
        b,
        tuple(figures),
        _name_deltas(da, db, "kernels"),
        _name_deltas(da, db, "ops"),
        _verdict(a, b, evidence),
        tuple(notes),
        per_step,
        evidence,
        decide(evidence, fail_if_slower_pct) if fail_if_slower_pct is not None else None,
    )


def _whole_trace(side: Side) -> Side:
    """The side with its trace's figures left whole (divided by no step count)."""
    return dataclasses.replace(side, trace_steps=0, op_steps=0)


def comparison_dict(c: Comparison) -> JsonObject:
    """The comparison as JSON-ready data (the sides without their full trace tables)."""

    def side(s: Side) -> JsonObject:
        data = dataclasses.asdict(dataclasses.replace(s, gpu=None, load_profile=None))
        del data["gpu"], data["load_profile"]  # the evidence holds the load's figures
        return data

    out = {"schema": 1, "kind": "comparison", "a": side(c.a), "b": side(c.b), "verdict": c.verdict,
           "figures": [dataclasses.asdict(d) for d in c.figures],
           "kernels": [dataclasses.asdict(d) for d in c.kernels],
           "ops": [dataclasses.asdict(d) for d in c.ops], "per_step": c.per_step,
           "notes": list(c.notes),
           "evidence": c.evidence.to_dict() if c.evidence is not None else None,
           "gate": c.gate.to_dict() if c.gate is not None else None}  # fmt: skip
    cleaned: JsonObject = clean_json(out)
    return cleaned


__all__ = [
    "CompareError",
    "Comparison",
    "Delta",
    "NameDelta",
    "Side",
    "compare",
    "comparison_dict",
    "run_side",
    "side_of",
    "study_sides",
    "trace_side",
]
