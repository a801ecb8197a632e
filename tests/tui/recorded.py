"""Fixed runs for the dashboard tests: written with the profiler's own store writer, from fixed numbers.

No clock and no randomness: every timestamp starts at :data:`T0_NS`, every value is a fixed
function of the step or sample number, so the screens drawn from these runs are the same on every
machine (the snapshot tests rely on it).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from profilers.contract.figures import DeviceEntry, LossFigures
from profilers.contract.json_checks import record_json
from profilers.contract.profile_summary import ProfileSummary
from profilers.contract.records import DeviceInfo, DeviceSample, StepRecord
from profilers.contract.study.summary import TrialEntry, TuningSummary
from profilers.contract.summarize import (
    gpu_aggregates,
    host_aggregates,
    loss_summary,
    measured_span_ns,
    steady_span_ns,
    step_statistics,
)
from profilers.runtime.store import RunStore
from tui.model import TrialsInfo, trials_info

T0_NS = 1_764_000_000_000_000_000  # 2025-11-24T16:00:00Z
GIB = 1024**3
H200_MEM = 150_754_820_096
HOST_MEM = 64 * GIB
STEP_NS = 40_000_000
SAMPLE_NS = 100_000_000  # 10 Hz


def step_record(step: int, rank: int = 0, base_ns: int = STEP_NS, t0_ns: int = T0_NS) -> StepRecord:
    """Step ``step`` (1-based): warm-up steps are slow, then ~40 ms with a slow wave."""
    duration = int(base_ns * (2.5 if step <= 3 else 1.0 + 0.08 * math.sin(step / 9)))
    data = duration * 8 // 100
    forward = duration * 30 // 100
    backward = duration * 48 // 100
    optimizer = duration * 10 // 100
    other = duration - data - forward - backward - optimizer
    return StepRecord(
        step=step,
        rank=rank,
        start_ns=t0_ns + (step - 1) * base_ns + 5_000_000,
        duration_ns=duration,
        data_ns=data,
        forward_ns=forward,
        backward_ns=backward,
        optimizer_ns=optimizer,
        other_ns=other,
        samples=32,
        tokens=None,
        kind="warmup" if step <= 3 else "measured",
        loss=2.5 - step / 400,
    )


def gpu_sample(i: int, index: int, t0_ns: int = T0_NS) -> DeviceSample:
    """GPU ``index``'s ``i``-th reading."""
    warm = i < 5
    return DeviceSample(
        t_ns=t0_ns + i * SAMPLE_NS,
        device_index=index,
        kind="gpu",
        gpu_util_pct=5.0 if warm else round(88 + 8 * math.sin(i / 6 + index), 1),
        mem_used_bytes=int((2 if warm else 30 + 4 * index + 2 * math.sin(i / 11)) * GIB),
        mem_total_bytes=H200_MEM,
        mem_busy_pct=40.0,
        power_mw=110_000 if warm else int(520_000 + 60_000 * math.sin(i / 5 + index)),
        energy_mj=i * 50_000,
        sm_clock_mhz=1980 if warm else int(1830 + 40 * math.cos(i / 7)),
        mem_clock_mhz=3201,
        temperature_c=60,
        throttle_reasons=0,
    )


def host_sample(i: int, t0_ns: int = T0_NS) -> DeviceSample:
    """The host's ``i``-th reading."""
    return DeviceSample(
        t_ns=t0_ns + i * SAMPLE_NS,
        device_index=0,
        kind="host",
        cpu_util_pct=round(55 + 20 * math.sin(i / 4), 1),
        process_cpu_pct=round(98 + 30 * math.sin(i / 3), 1),
        rss_bytes=int((1.5 + 0.004 * i) * GIB),
        host_mem_used_bytes=int((20 + 0.01 * i) * GIB),
        host_mem_total_bytes=HOST_MEM,
    )


def _devices(gpus: int) -> list[DeviceInfo]:
    if not gpus:
        return [DeviceInfo(0, "host", "AMD EPYC 9654", HOST_MEM)]
    return [
        DeviceInfo(
            i,
            "gpu",
            "NVIDIA H200",
            H200_MEM,
            uuid=f"GPU-{i:04d}",
            power_limit_mw=700_000,
            max_sm_clock_mhz=1980,
            max_mem_clock_mhz=3201,
        )
        for i in range(gpus)
    ]


def write_profile_run(
    path: Path,
    *,
    name: str = "gpt-small",
    gpus: int = 2,
    steps: int = 300,
    finished: bool = True,
    command: list[str] | None = None,
    t0_ns: int = T0_NS,
) -> Path:
    """A profile run of ``steps`` steps sampled at 10 Hz on ``gpus`` GPUs (0: the host only)."""
    path.mkdir(parents=True, exist_ok=True)
    store = RunStore(path / "run.db")
    command = command or ["train.py", "--model", name]
    store.set_meta(
        {
            "name": name,
            "command": command,
            "cwd": "/work/project",
            "started_ns": t0_ns,
            "host": "trainer-01",
            "world_size": 1,
            "python": "3.11.9",
            "backends": ["nvml"] if gpus else ["host"],
            "options": {"name": name, "max_steps": None, "sample_hz": 10.0},
        }
    )
    store.set_devices(_devices(gpus))
    store.set_rank(1, "trainer-01", 4242, None, None)
    records = [step_record(s, t0_ns=t0_ns) for s in range(1, steps + 1)]
    store.add_steps(records)
    n_samples = steps * STEP_NS // SAMPLE_NS
    samples = (
        [gpu_sample(i, g, t0_ns) for i in range(n_samples) for g in range(gpus)]
        if gpus
        else [host_sample(i, t0_ns) for i in range(n_samples)]
    )
    store.add_samples(samples)
    if finished:
        stats = step_statistics(records)
        figures = ProfileSummary(
            name=name,
            run_dir=str(path),
            steps=steps,
            measured_steps=stats.measured_steps,
            step_time=stats.step_time,
            throughput=stats.throughput,
            phases=stats.phases,
            peak_memory_bytes=int((38 if gpus else 1.9) * GIB),
            flops_per_step=int(4.2e12) if gpus else None,
            mfu=0.31 if gpus else None,
            precision="bf16" if gpus else "fp32",
            device=DeviceEntry(
                "cuda" if gpus else "cpu",
                "NVIDIA H200" if gpus else "AMD EPYC 9654",
                max(gpus, 1),
                0 if gpus else None,
            ),
            gpus=gpu_aggregates(
                samples,
                {i: "NVIDIA H200" for i in range(gpus)},
                span_ns=measured_span_ns(records),
                steady_ns=steady_span_ns(records),
            ),
            host=host_aggregates(samples, steady_span_ns(records)),
            step_mode="optimizer",
            wall_time_s=steps * STEP_NS / 1e9,
            loss=loss_summary(records) or LossFigures(),
            rank=0,
        )
        summary = record_json(figures)
        store.set_rank(1, "trainer-01", 4242, t0_ns + steps * STEP_NS + 10_000_000, figures)
        (path / "summary.json").write_text(json.dumps(summary, indent=2))
    store.close()
    return path


#: (id, micro_batch, precision, status, samples/s, peak GiB, duration s, stop reason, error)
STUDY_TRIALS: tuple[
    tuple[int, int | None, str | None, str, float | None, float | None, float, str | None, str | None], ...
] = (
    (0, None, None, "ok", 610.0, 38.2, 41.0, "stable", None),
    (1, 32, "bf16", "ok", 1480.0, 41.5, 38.0, "stable", None),
    (2, 128, "fp32", "oom", None, None, 12.0, None, "torch.OutOfMemoryError: CUDA out of memory"),
    (3, 8, "bf16", "ok", 1020.0, 12.9, 40.0, "below_threshold", None),
    (4, 64, "bf16", "ok", 2602.0, 62.0, 39.0, "stable", None),
    (5, 64, "fp16", "diverged", None, 61.0, 20.0, "non_finite_loss", "loss became nan at step 17"),
    (6, 16, "fp32", "ok", 890.0, 22.6, 44.0, "stable", None),
    (7, 32, "fp32", "ok", 1150.0, 40.1, 42.0, "stable", None),
)


def write_study(path: Path, *, running: bool = True, trial_steps: int = 60) -> Path:
    """A 10-trial throughput study with 8 finished trials; with ``running``, trial 8 is being run."""
    path.mkdir(parents=True, exist_ok=True)
    entries = []
    for tid, mb, prec, status, sps, gib, dur, stop, err in STUDY_TRIALS:
        params = {} if mb is None else {"micro_batch": mb, "precision": prec}
        entries.append(
            {
                "id": tid,
                "baseline": tid == 0,
                "params": params,
                "status": status,
                "objective": sps if status == "ok" else None,
                "throughput": sps,
                "tokens_per_s": None,
                "peak_memory_bytes": None if gib is None else int(gib * GIB),
                "step_time_s": None if sps is None else 32 / sps,
                "usd_per_million_samples": None,
                "joules_per_sample": None,
                "world_size": 1,
                "duration_s": dur,
                "stop_reason": stop,
                "params_used": {},
                "run_dir": str(path / "trials" / f"trial-{tid:04d}"),
                "error": err,
            }
        )
        (path / "trials" / f"trial-{tid:04d}").mkdir(parents=True, exist_ok=True)
    best = {**entries[4], "speedup_vs_baseline": 2602.0 / 610.0, "cost_saving_vs_baseline": None}
    summary = {
        "schema": 1,
        "kind": "tune",
        "run_dir": str(path),
        "command": ["train.py", "--model", "gpt-small"],
        "objective": "throughput",
        "metric": "samples_per_s",
        "direction": "maximize",
        "price_per_gpu_hour": None,
        "memory_budget_bytes": None,
        "searcher": "bayes",
        "seed": 0,
        "space": {
            "micro_batch": {"type": "int", "low": 8, "high": 128, "power_of_two": True},
            "precision": {"type": "categorical", "choices": ["fp32", "bf16", "fp16"]},
        },
        "n_trials": 10,
        "trials_run": len(entries),
        "status_counts": {"ok": 6, "oom": 1, "diverged": 1},
        "baseline": entries[0],
        "best": best,
        "pareto": None,
        "stopped": None,
        "trials": entries,
    }
    write_profile_run(path / "trials" / "trial-0004", name="trial-0004", gpus=1, steps=trial_steps)
    if running:
        write_profile_run(
            path / "trials" / "trial-0008",
            name="trial-0008",
            gpus=1,
            steps=trial_steps,
            finished=False,
            t0_ns=T0_NS + 600 * 10**9,
        )
    (path / "summary.json").write_text(json.dumps(summary, indent=2))
    return path


def study_info(summary: dict[str, Any], entries: list[Any], running: list[int] | None = None) -> TrialsInfo:
    """The Trials screen's record of a study given as summary.json's dicts, parsed as the source does."""
    raw = [e.raw if isinstance(e, TrialEntry) else e for e in entries]
    study = TuningSummary.parse({**summary, "trials": raw}, "summary.json")
    return trials_info(study, list(study.trials), running)
