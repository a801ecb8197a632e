"""Constructed runs for the advice tests: an H200 profile built with the profiler's own record types.

``h200_run()`` is a healthy bf16 run on one (or several) NVIDIA H200s: 40 steps of about 120 ms
(3 warm-up, 1 FLOP-counting, 3 traced, 1 settle, 32 measured), NVML readings at 10 Hz with ~97%
utilization and 61 GiB in use of 140.4 GiB, a host reading beside each, and a deep-profile window
of ~1,400 kernels per step (median 38 µs, 94% busy, 62% of kernel time on tensor cores). Every
figure a rule reads can be changed through the keyword arguments, so a test changes one thing
and checks that exactly its rule reacts. summary.json is built by ``profilers.contract.summarize`` as a real
session builds it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from profilers.contract.figures import DeviceEntry, MemoryFigures, ProfileWindow, RankEntry
from profilers.contract.json_checks import record_json
from profilers.contract.profile_summary import ProfileSummary
from profilers.contract.records import DeviceInfo, DeviceSample, RankDevice, StepRecord
from profilers.contract.rundir import RunData
from profilers.contract.summarize import (
    gpu_aggregates,
    host_aggregates,
    measured_span_ns,
    rank_entry,
    steady_span_ns,
    step_statistics,
)

GIB = 2**30
H200_MEM_BYTES = 150_754_820_096  # what NVML reports for a 141 GB H200
H200 = "NVIDIA H200"
T0_NS = 1_780_000_000_000_000_000
KINDS = ["warmup"] * 3 + ["flops"] + ["trace"] * 3 + ["settle"]

# NVML clocks-event reason bits (profilers.runtime.backends.libnvml.THROTTLE_REASONS)
SW_POWER_CAP = 0x4
HW_THERMAL = 0x40
GPU_IDLE = 0x1


def _jitter(step: int) -> float:
    """A deterministic ±1.5% wobble of the step time."""
    return 1 + 0.015 * math.sin(step * 2.3)


def healthy_window(**changes: Any) -> dict[str, Any]:
    """A profile_window of 3 steps of a bf16 transformer on an H200 (times in µs)."""
    window: dict[str, Any] = {
        "steps": 3,
        "wall_us": 3 * 121_000.0,
        "cpu_op_self_us": 3 * 52_000.0,
        "kernels": 3 * 1_400,
        "kernel_time_us": 3 * 116_000.0,
        "kernel_mean_us": 82.9,
        "kernel_median_us": 38.0,
        "kernel_busy_us": 3 * 113_700.0,
        "tensor_core_fraction": 0.62,
        "collective_calls": 0,
        "collective_time_us": 0.0,
        "collective_exposed_us": None,
        "collective_source": None,
        "dataloader_us": 3 * 900.0,
        "dataloader_iter": "_MultiProcessingDataLoaderIter",
    }
    window.update(changes)
    return window


def h200_run(
    *,
    steps: int = 40,
    world: int = 1,
    step_ms: Callable[[int, int], float] = lambda rank, step: 120.0 * _jitter(step),
    data_ms: Callable[[int, int], float] = lambda rank, step: 1.5,
    backward_ms: Callable[[int, int], float] | None = None,
    util_pct: Callable[[float], float] = lambda t: 97.0 - 2.0 * math.sin(t),
    mem_used_bytes: Callable[[float], float] = lambda t: 101 * GIB,
    throttle_mask: Callable[[float], int] = lambda t: 0,
    sm_clock_mhz: Callable[[float], int] = lambda t: 1_980,
    precision: str | None = "bf16",
    device_name: str = H200,
    peak_allocated_bytes: int | None = 88 * GIB,
    peak_reserved_bytes: int | None = 96 * GIB,
    window: dict[str, Any] | None = None,
    mfu: float | None = 0.41,
    sample_hz: float = 10.0,
    run_dir: str = "/runs/h200",
) -> RunData:
    """A profile run on ``world`` H200s (one process per GPU), every figure overridable."""
    records: list[StepRecord] = []
    for rank in range(world):
        t = T0_NS
        for step in range(1, steps + 1):
            total = step_ms(rank, step) * 1e6
            data = data_ms(rank, step) * 1e6
            forward = 0.30 * (total - data)
            backward = backward_ms(rank, step) * 1e6 if backward_ms else 0.60 * (total - data)
            optimizer = max(0.0, total - data - forward - backward) * 0.8
            other = max(0.0, total - data - forward - backward - optimizer)
            kind = KINDS[step - 1] if step <= len(KINDS) else "measured"
            records.append(
                StepRecord(
                    step,
                    rank,
                    t,
                    int(total),
                    int(data),
                    int(forward),
                    int(backward),
                    int(optimizer),
                    int(other),
                    32,
                    32 * 2048,
                    kind,
                    2.5 - 0.01 * step,
                )
            )
            t += int(total)
    end_ns = max(r.start_ns + r.duration_ns for r in records)
    samples: list[DeviceSample] = []
    n = int((end_ns - T0_NS) / 1e9 * sample_hz) + 1
    for i in range(n):
        t_ns = T0_NS + int(i * 1e9 / sample_hz)
        t_s = (t_ns - T0_NS) / 1e9
        for index in range(world):
            samples.append(
                DeviceSample(
                    t_ns,
                    index,
                    "gpu",
                    gpu_util_pct=util_pct(t_s),
                    mem_used_bytes=int(mem_used_bytes(t_s)),
                    mem_total_bytes=H200_MEM_BYTES,
                    mem_busy_pct=41.0,
                    power_mw=640_000,
                    energy_mj=int(640_000 * t_s),
                    sm_clock_mhz=sm_clock_mhz(t_s),
                    mem_clock_mhz=3_201,
                    temperature_c=62,
                    throttle_reasons=throttle_mask(t_s),
                    process_mem_bytes=int(mem_used_bytes(t_s)),
                )
            )
        samples.append(
            DeviceSample(
                t_ns,
                0,
                "host",
                cpu_util_pct=38.0,
                process_cpu_pct=105.0,
                rss_bytes=6 * GIB,
                host_mem_used_bytes=210 * GIB,
                host_mem_total_bytes=2015 * GIB,
            )
        )
    rank0 = [r for r in records if r.rank == 0]
    stats = step_statistics(rank0)
    names = {i: device_name for i in range(world)}
    ranks: tuple[RankEntry, ...] = ()
    if world > 1:
        ranks = tuple(
            rank_entry(
                r,
                [s for s in records if s.rank == r],
                step_statistics([s for s in records if s.rank == r]),
                peak_allocated_bytes,
            )
            for r in range(world)
        )
    figures = ProfileSummary(
        name="train",
        run_dir=run_dir,
        steps=steps,
        measured_steps=stats.measured_steps,
        step_time=stats.step_time,
        throughput=stats.throughput,
        phases=stats.phases,
        peak_memory_bytes=peak_allocated_bytes,
        memory=MemoryFigures(
            cuda_peak_allocated_bytes=peak_allocated_bytes, cuda_peak_reserved_bytes=peak_reserved_bytes
        ),
        mfu=mfu,
        precision=precision,
        device=DeviceEntry("cuda", device_name, world, 0),
        # as the profiler summarizes rank 0: rates over its measured steps, memory after the instruments
        gpus=gpu_aggregates(samples, names, measured_span_ns(rank0), None, steady_span_ns(rank0)),
        host=host_aggregates(samples, steady_span_ns(rank0)),
        ranks=ranks,
        step_mode="optimizer",
        wall_time_s=(end_ns - T0_NS) / 1e9,
        rank=0,
        window=ProfileWindow(**(healthy_window() if window is None else window)),
    )
    summary = record_json(figures)
    devices = [
        RankDevice(0, DeviceInfo(i, "gpu", device_name, H200_MEM_BYTES, f"GPU-{i}", 700_000, 1_980, 3_201))
        for i in range(world)
    ] + [RankDevice(0, DeviceInfo(0, "host", "Intel Xeon Platinum 8480+", 2015 * GIB))]
    return RunData(
        run_dir=Path(run_dir),
        kind="profile",
        summary=summary,
        steps=tuple(records),
        samples=tuple(samples),
        devices=tuple(devices),
    )


def study(
    trials: list[dict[str, Any]], best_id: int | None, space: dict[str, Any] | None = None, **extra: Any
) -> RunData:
    """A tuning study's RunData from trial entries (``id``, ``params``, ``status``, ``throughput``…)."""
    full = []
    for t in trials:
        entry = {
            "baseline": t["id"] == 0,
            "objective": t.get("throughput"),
            "tokens_per_s": None,
            "peak_memory_bytes": None,
            "step_time_s": None,
            "usd_per_million_samples": None,
            "joules_per_sample": None,
            "world_size": 1,
            "duration_s": 30.0,
            "stop_reason": "stable",
            "params_used": {},
            "run_dir": f"/runs/study/trials/trial-{t['id']:04d}",
            "error": None,
        }
        entry.update(t)
        full.append(entry)
    by_id = {t["id"]: t for t in full}
    base = by_id.get(0)
    best = None
    if best_id is not None:
        best = dict(by_id[best_id])
        rate, base_rate = best.get("throughput"), base.get("throughput") if base else None
        best["speedup_vs_baseline"] = rate / base_rate if rate and base_rate else None
        best["cost_saving_vs_baseline"] = None
    counts: dict[str, int] = {}
    for t in full:
        counts[t["status"]] = counts.get(t["status"], 0) + 1
    summary = {
        "schema": 1,
        "kind": "tune",
        "run_dir": "/runs/study",
        "command": ["train.py"],
        "objective": "throughput",
        "metric": "samples_per_s",
        "direction": "maximize",
        "price_per_gpu_hour": None,
        "memory_budget_bytes": None,
        "searcher": "bayes",
        "seed": 0,
        "space": space or {},
        "n_trials": len(full),
        "trials_run": len(full),
        "status_counts": counts,
        "baseline": base,
        "best": best,
        "pareto": None,
        "stopped": None,
        "trials": full,
    }
    summary.update(extra)
    return RunData(run_dir=Path("/runs/study"), kind="tune", summary=summary, trials=tuple(full))
