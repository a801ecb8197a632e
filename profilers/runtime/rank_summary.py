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
from pathlib import Path
from typing import Any

from profilers.contract.lenient import read_fields
from profilers.contract.reader import read_ranks, read_steps
from profilers.contract.records import DeviceSample, OwnLoad, RankRow
from profilers.contract.summarize import combine_ranks, job_load, rank_entry, step_statistics
from profilers.runtime.instrument import StepInstruments

#: Seconds rank 0 waits for the other ranks' summaries before leaving them out.
RANK_WAIT_S = 120.0


def device_entry(
    kind: str, cuda_name: str | None, cuda_index: int | None, world_size: int, job_gpus: list[int] | None
) -> dict[str, Any]:
    """summary.json's ``device``: the CUDA device trained on, or this machine's CPU model."""
    if kind == "cuda":
        return {
            "kind": "cuda",
            "name": cuda_name,
            "count": world_size if world_size > 1 else 1,
            "index": cuda_index,
            "nvml_indexes": job_gpus,
        }
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"kind": "cpu", "name": name, "count": world_size, "index": None, "nvml_indexes": job_gpus}


def host_memory(samples: list[DeviceSample], tools: StepInstruments, rss_start: int | None) -> dict[str, Any]:
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
    memory: dict[str, Any] = {
        "rss_start_bytes": rss_start,
        "rss_peak_bytes": peak_rss,
        "ru_maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "profiler_rss_bytes": tools.tool_rss[-1][1] if tools.tool_rss else 0,
    }
    if peak_rss is not None and rss_start is not None:
        memory["rss_peak_growth_bytes"] = max(0, peak_rss - rss_start)
    return memory


def gather_ranks(
    summary: dict[str, Any],
    mine: dict[str, Any],
    store: Path | None,
    world_size: int,
    samples_per_step: int | None,
    warnings: list[str],
    ranks_per_replica: int = 1,
) -> dict[str, Any]:
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
            assert row.summary is not None  # in done
            entries[r] = rank_entry(r, rsteps, stats, row.facts.peak_memory_bytes)
        missing = [r for r in range(world_size) if r not in entries]
        if missing:
            warnings.append(f"ranks {missing} did not finish within {RANK_WAIT_S:.0f} s; left out")
    ranks_list = [entries[r] for r in sorted(entries)]
    combined = combine_ranks(ranks_list, ranks_per_replica)
    summary["ranks"] = ranks_list
    job, own = combined["samples_per_s"], mine["samples_per_s"]
    ci = summary["throughput"].get("samples_per_s_ci95")
    summary["throughput"] = {
        "samples_per_s": job,
        "tokens_per_s": combined["tokens_per_s"],
        # rank 0's interval scaled to the job (the ranks step together)
        "samples_per_s_ci95": [v * job / own if v and job and own else None for v in ci] if ci else None,
        "per_rank_samples_per_s": [e["samples_per_s"] for e in ranks_list],
        "ranks_per_replica": ranks_per_replica,
    }
    summary["load"] = _job_load(summary.get("load"), ranks)
    summary["warnings"] = warnings
    return summary


def _job_load(load: Any, ranks: dict[int, RankRow]) -> dict[str, Any] | None:
    """Rank 0's load less the CPU of every rank on its host (those without a summary: unknown)."""
    if not isinstance(load, dict):
        return None
    if 0 not in ranks:  # no store: the other ranks' CPU cannot be told from other processes'
        return {**load, "other_cores": None}
    host = ranks[0].host
    owns: list[float | None] = [OwnLoad(**read_fields(OwnLoad, load)).own_cores]
    owns += [row.own_cores for r, row in sorted(ranks.items()) if r != 0 and row.host == host]
    return job_load(load, owns)


def write_summary(run_dir: Path, summary: dict[str, Any]) -> None:
    """summary.json, whole or not at all (written aside, then renamed over)."""
    tmp = run_dir / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    os.replace(tmp, run_dir / "summary.json")
