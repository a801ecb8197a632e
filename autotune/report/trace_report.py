"""The report of torch.profiler traces (a file, or a folder of per-rank traces) and of a run's own trace.

``autotune report TRACE`` builds the same :class:`Report` as for a run from the traces alone: the
overview (device from ``deviceProperties``, ranks, median step), the trace rules' advice
(:mod:`autotune.advice.rules_trace`) and the GPU-time section; the sections a trace cannot fill
(cost, NVML timelines, trials) say why. A profile run's report gets the same GPU-time section from
the trace of its deep-profile window (``traces/``), through the same analysis.
"""

from __future__ import annotations

import datetime as dt
import statistics
from pathlib import Path

from autotune.advice.rules_trace import advise_trace
from autotune.report.sections import EnvironmentSection, GpuTimeSection, Overview, Report
from profilers.contract.traces import TRACES_DIR
from profilers.traces.analysis import TraceAnalysis, analyse_traces
from profilers.traces.kineto import TraceError


def gpu_time_section(analysis: TraceAnalysis) -> GpuTimeSection:
    """The section of an analysis."""
    return GpuTimeSection(analysis.path, analysis.ranks, analysis.spread, analysis.problems)


def run_gpu_time(run_dir: Path) -> tuple[GpuTimeSection | None, str | None]:
    """The GPU-time section of a run's deep-profile trace, or None with why there is none."""
    traces = run_dir / TRACES_DIR
    if not traces.is_dir():
        return (
            None,
            "the run has no deep-profile trace (traces/); autotune profile writes one unless given "
            "--no-deep-profile",
        )
    try:
        analysis = analyse_traces(traces)
    except TraceError as exc:
        return None, f"the run's trace could not be read: {exc}"
    if not any(r.kernel_time_us > 0 for r in analysis.ranks):
        return None, "the run's deep-profile trace has no GPU activity (a CPU run)"
    return gpu_time_section(analysis), None


def _device(analysis: TraceAnalysis) -> str | None:
    names = [r.device_name for r in analysis.ranks if r.device_name]
    if not names:
        return None
    first = max(set(names), key=names.count)
    return f"{first} × {len(analysis.ranks)}" if len(analysis.ranks) > 1 else first


def trace_report(path: Path, now: dt.datetime | None = None) -> Report:
    """The report of the traces at ``path`` (raises TraceError when none can be read)."""
    analysis = analyse_traces(path)
    medians = [r.step_time_s_median for r in analysis.ranks if r.step_time_s_median is not None]
    world = max([len({r.rank for r in analysis.ranks}), *(r.world_size or 0 for r in analysis.ranks)])
    notes = list(analysis.problems)
    if len({r.rank for r in analysis.ranks}) < world:
        notes.append(f"traces of {len(analysis.ranks)} of {world} ranks: the others' figures are not here")
    if not any(r.kernel_time_us > 0 for r in analysis.ranks):
        notes.append("the trace has no GPU activity (a CPU-only trace): only host figures are shown")
    overview = Overview(
        name=path.name,
        kind="trace",
        run_dir=str(path),
        finished=True,
        step_time_median_s=statistics.median(medians) if medians else None,
        samples_per_s=None,
        tokens_per_s=None,
        peak_memory_bytes=None,
        precision=None,
        device=_device(analysis),
        world_size=world,
        mfu=None,
        notes=tuple(notes),
    )
    section = gpu_time_section(analysis)
    profile = "autotune profile measures it"
    missing = {
        "cost": f"a trace has no throughput (samples per step) to price; {profile}",
        "steps": "each rank's ProfilerStep times are in the GPU time section; the phase breakdown needs "
        f"the training loop's phases ({profile})",
        "timelines": f"a trace has no NVML samples (utilization, memory, power); {profile}",
        "host": f"a trace has no host CPU and memory samples; {profile}",
    }
    missing.update(dict.fromkeys(("sweep", "convergence", "pareto", "trials"), "a trace, not a tuning study"))
    items = [("trace", str(path)), ("files", str(len(analysis.ranks)))]
    backends = sorted({r.backend for r in analysis.ranks if r.backend})
    if backends:
        items.append(("distributed backend", ", ".join(backends)))
    items += [(f"rank {r.rank}", r.source) for r in analysis.ranks]
    when = (now or dt.datetime.now(dt.UTC)).replace(microsecond=0)
    return Report(
        title=f"gpu-autotune report: {path.name}",
        generated_at=when.isoformat(),
        overview=overview,
        advice=advise_trace(analysis),
        environment=EnvironmentSection(tuple(items)),
        gpu_time=section,
        missing=missing,
    )


__all__ = ["gpu_time_section", "run_gpu_time", "trace_report"]
