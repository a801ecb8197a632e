"""The parts of summary.json only the running process knows, and the job's figures rank 0 gathers.

Split from :class:`profilers.runtime.session.Session`, which calls them at the end of a run: the device
entry, the host's peak memory from the run's readings, the other ranks' figures (read from run.db
where each rank left its own summary) and the atomic write of summary.json.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import time
from dataclasses import replace
from pathlib import Path

from profilers.contract.figures import DeviceEntry, MemoryFigures, RankEntry
from profilers.contract.json_checks import record_json
from profilers.contract.load import LoadFigures
from profilers.contract.profile_summary import ProfileSummary
from profilers.contract.reader import read_ranks, read_steps
from profilers.contract.records import DeviceSample, RankRow
from profilers.contract.summarize import job_load, job_throughput, rank_entry, step_statistics
from profilers.runtime.instrument import StepInstruments

#: Seconds rank 0 waits for the other ranks' summaries before leaving them out.
RANK_WAIT_S = 120.0


def device_entry(
    kind: str, cuda_name: str | None, cuda_index: int | None, world_size: int, job_gpus: list[int] | None
) -> DeviceEntry:
    """summary.json's ``device``: the CUDA device trained on, or this machine's CPU model."""
    nvml = None if job_gpus is None else tuple(job_gpus)
    if kind == "cuda":
        return DeviceEntry("cuda", cuda_name, world_size if world_size > 1 else 1, cuda_index, nvml)
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return DeviceEntry("cpu", name, world_size, None, nvml)


def host_memory(samples: list[DeviceSample], tools: StepInstruments, rss_start: int | None) -> MemoryFigures:
    """The process's memory figures (``memory`` without CUDA's), from its host readings.

    Peak RSS from the readings of the training's own steps: leaving out the FLOP-counting step and
    the torch.profiler window (their buffers and decompositions are the profiler's memory, trimmed
    after the window), and less what the profiler's own imports hold.
    """
    spans = [span for span in (tools.flops_ns, tools.window_ns) if span is not None]
    rss_samples = [
        s.rss_bytes - tools.tool_rss_at(s.t_ns)
        for s in samples
        if s.kind == "host" and s.rss_bytes and not any(a <= s.t_ns <= b for a, b in spans)
    ]
    peak_rss = max(rss_samples, default=None)
    return MemoryFigures(
        rss_start_bytes=rss_start,
        rss_peak_bytes=peak_rss,
        ru_maxrss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        profiler_rss_bytes=tools.tool_rss[-1][1] if tools.tool_rss else 0,
        rss_peak_growth_bytes=None if peak_rss is None or rss_start is None else max(0, peak_rss - rss_start),
    )


def gather_ranks(
    summary: ProfileSummary,
    mine: RankEntry,
    store: Path | None,
    world_size: int,
    samples_per_step: int | None,
    warnings: list[str],
    ranks_per_replica: int = 1,
) -> ProfileSummary:
    """Rank 0's summary with every rank's figures and the job's throughput.

    ``ranks_per_replica`` (tensor × pipeline degree) ranks train on the same samples: the job's
    throughput is the ranks' sum over it (see profilers.runtime.parallel_degrees).

    Waits up to :data:`RANK_WAIT_S` for the other ranks to leave their summaries in ``store``;
    a rank that does not is left out with a warning (appended to ``warnings``).
    """
    entries = {0: mine}
    ranks: dict[int, RankRow] = {}
    if store is not None:
        deadline = time.monotonic() + RANK_WAIT_S
        while True:
            ranks = read_ranks(store)
            done = {r: row for r, row in ranks.items() if row.summary is not None}
            if len(done) >= world_size or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        for r, row in sorted(done.items()):
            if r == 0:
                continue
            rsteps = read_steps(store, rank=r)
            stats = step_statistics(rsteps, samples_per_step)
            entries[r] = rank_entry(r, rsteps, stats, row.facts.peak_memory_bytes)
        missing = [r for r in range(world_size) if r not in entries]
        if missing:
            warnings.append(f"ranks {missing} did not finish within {RANK_WAIT_S:.0f} s; left out")
    ranks_list = tuple(entries[r] for r in sorted(entries))
    return replace(
        summary,
        ranks=ranks_list,
        throughput=job_throughput(summary.throughput, ranks_list, ranks_per_replica),
        load_figures=_job_load(summary.load_figures, ranks),
        warnings=tuple(warnings),
    )


def _job_load(load: LoadFigures | None, ranks: dict[int, RankRow]) -> LoadFigures | None:
    """Rank 0's load less the CPU of every rank on its host (those without a summary: unknown)."""
    if load is None:
        return None
    if 0 not in ranks:  # no store: the other ranks' CPU cannot be told from other processes'
        return replace(load, other_cores=None)
    host = ranks[0].host
    owns: list[float | None] = [load.own_cores]
    owns += [row.own_cores for r, row in sorted(ranks.items()) if r != 0 and row.host == host]
    return job_load(load, owns)


def write_summary(run_dir: Path, summary: ProfileSummary) -> None:
    """summary.json, whole or not at all (written aside, then renamed over)."""
    tmp = run_dir / "summary.json.tmp"
    tmp.write_text(json.dumps(record_json(summary), indent=2) + "\n")
    os.replace(tmp, run_dir / "summary.json")
