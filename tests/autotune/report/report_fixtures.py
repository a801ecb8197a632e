"""Hand-built :class:`Report` objects for the report renderers' tests.

``full_report()``: a 12-trial study on two H200s with every section filled. ``cpu_report()``: a
profile on a CPU host, where the GPU, tuning and cost sections are None with their reasons.
``xss_report()``: the full report with every user-supplied string replaced by an HTML/JS payload.
Numbers are deterministic (no randomness) and of a realistic size.
"""

from __future__ import annotations

import math
from dataclasses import replace

from autotune.advice.records import Recommendation, Threshold
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
from profilers.contract.study.trial_view import TrialView

GIB = 1024**3
H200_MEM_BYTES = 150_754_820_096  # what NVML reports for a 141 GB H200
PRICE = 3.50  # USD per GPU-hour

XSS_SCRIPT = "<script>alert(1)</script>"
XSS_ATTR = '"><img src=x onerror=alert(1)>'
XSS_PAYLOADS = (XSS_SCRIPT, XSS_ATTR)

RULES = (
    Threshold(
        "input_bound",
        "Input-bound",
        "data-wait share of the step time",
        ">",
        10.0,
        "%",
        "PyTorch performance tuning guide",
    ),
    Threshold("low_gpu_util", "GPU under-used", "median GPU utilisation", "<", 60.0, "%", "this project"),
    Threshold(
        "memory_headroom",
        "Memory headroom",
        "peak memory share of the device",
        "<",
        50.0,
        "%",
        "this project",
    ),
    Threshold("step_jitter", "Step-time jitter", "p90 / p10 step time", ">", 1.5, "x", "this project"),
)

# ----------------------------------------------------------------------------------------- trials

# (id, micro_batch, precision, layout, status, samples/s, peak GiB, stop reason, error)
_TRIALS: tuple[tuple[int, int, str, str, str, float | None, float | None, str | None, str | None], ...] = (
    (0, 16, "fp32", "single", "ok", 610.0, 38.2, "steps", None),
    (1, 32, "bf16", "single", "ok", 1480.0, 41.5, "steps", None),
    (
        2,
        64,
        "fp32",
        "single",
        "oom",
        None,
        None,
        "oom",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 GiB",
    ),
    (3, 8, "bf16", "single", "ok", 1020.0, 12.9, "steps", None),
    (4, 32, "bf16", "ddp", "ok", 2602.0, 42.0, "steps", None),
    (5, 64, "bf16", "ddp", "diverged", None, 79.8, "loss", "loss became nan at step 37"),
    (6, 2, "fp32", "single", "ok", 118.0, 5.1, "steps", None),
    (7, 4, "bf16", "ddp", "ok", 640.0, 8.4, "steps", None),
    (8, 64, "bf16", "single", "ok", 1555.0, 80.3, "steps", None),
    (9, 16, "bf16", "ddp", "ok", 2210.0, 22.6, "steps", None),
    (10, 2, "bf16", "ddp", "skipped", None, None, "predicted oom", "skipped: duplicate of a finished trial"),
    (11, 8, "bf16", "ddp", "ok", 1530.0, 12.8, "steps", None),
)
BEST_TRIAL = 4
BASELINE_TRIAL = 0


def _world(layout: str) -> int:
    return 2 if layout == "ddp" else 1


def _usd_per_million(samples_per_s: float, world: int) -> float:
    return world * PRICE / 3600 / samples_per_s * 1e6


def trial_rows() -> tuple[TrialView, ...]:
    rows = []
    for tid, mb, prec, layout, status, sps, gib, stop, err in _TRIALS:
        world = _world(layout)
        rows.append(
            TrialView(
                id=tid,
                baseline=tid == BASELINE_TRIAL,
                best=tid == BEST_TRIAL,
                params={"micro_batch": mb, "precision": prec, "layout": layout},
                status=status,
                objective=sps,
                samples_per_s=sps,
                peak_memory_bytes=None if gib is None else int(gib * GIB),
                step_time_s=None if sps is None else mb * world / sps,
                world_size=world,
                duration_s=None if status == "skipped" else 40.0 + 3.0 * tid,
                stop_reason=stop,
                error=err,
            )
        )
    return tuple(rows)


def sweep_section() -> SweepSection:
    groups: dict[str, list[SweepPoint]] = {}
    for tid, mb, prec, layout, status, sps, gib, _stop, _err in _TRIALS:
        if status == "skipped":
            continue
        point = SweepPoint(tid, float(mb), sps, None if gib is None else int(gib * GIB), status)
        groups.setdefault(f"{prec} · {layout}", []).append(point)
    series = tuple(
        SweepSeries(label, tuple(sorted(pts, key=lambda p: p.batch))) for label, pts in groups.items()
    )
    return SweepSection(
        batch_param="micro_batch", series=series, memory_budget_bytes=int(0.9 * H200_MEM_BYTES)
    )


def convergence_section() -> ConvergenceSection:
    values = [sps for _tid, _mb, _p, _l, _s, sps, _g, _st, _e in _TRIALS]
    best: list[float | None] = []
    for v in values:
        prev = best[-1] if best else None
        best.append(v if prev is None else (prev if v is None else max(prev, v)))
    return ConvergenceSection(
        metric="samples_per_s",
        direction="maximize",
        trial_ids=tuple(t[0] for t in _TRIALS),
        values=tuple(values),
        best_so_far=tuple(best),
        statuses=tuple(t[4] for t in _TRIALS),
    )


def pareto_section() -> ParetoSection:
    ok = [
        (
            t[0],
            t[5],
            _usd_per_million(t[5], _world(t[3])),
            f"micro_batch={t[1]} precision={t[2]} layout={t[3]}",
        )
        for t in _TRIALS
        if t[4] == "ok" and t[5] is not None
    ]
    points = []
    for tid, sps, usd, label in ok:
        dominated = any(
            o_sps >= sps and o_usd <= usd and (o_sps, o_usd) != (sps, usd) for _, o_sps, o_usd, _ in ok
        )
        points.append(ParetoPoint(tid, sps, usd, not dominated, label))
    return ParetoSection(points=tuple(points), price_per_gpu_hour=PRICE)


# -------------------------------------------------------------------------------------- timelines


def step_section() -> StepSection:
    steps = tuple(range(300))
    durations, kinds = [], []
    for s in steps:
        if s < 5:
            durations.append(0.35 - 0.06 * s)
            kinds.append("warmup")
        else:
            durations.append(0.0123 + 0.0004 * math.sin(s / 7) + (0.021 if s in (120, 121, 250) else 0.0))
            kinds.append("measured")
    return StepSection(
        phase_fractions={"data": 0.08, "forward": 0.31, "backward": 0.49, "optimizer": 0.09, "other": 0.03},
        phase_median_s={
            "data": 0.00098,
            "forward": 0.0038,
            "backward": 0.0060,
            "optimizer": 0.0011,
            "other": 0.00037,
        },
        median_s=0.0123,
        p10_s=0.0119,
        p90_s=0.0128,
        series_step=steps,
        series_duration_s=tuple(durations),
        series_kind=tuple(kinds),
        outlier_steps=(120, 121, 250),
        per_rank_median_s={0: 0.0123, 1: 0.0124},
    )


def gpu_timeline(index: int, name: str = "NVIDIA H200") -> GpuTimeline:
    t = tuple(0.5 * i for i in range(240))
    util = tuple(
        None if i == 17 else (5.0 if i < 10 else 93.0 + 4 * math.sin(i / 5 + index)) for i in range(240)
    )
    mem = tuple(
        2.0 * GIB if i < 10 else (41.0 + 0.5 * index + 0.3 * math.sin(i / 9)) * GIB for i in range(240)
    )
    power = tuple(110.0 if i < 10 else 610.0 + 40 * math.sin(i / 4 + index) for i in range(240))
    clock = tuple(1980.0 if i < 10 else 1830.0 + 20 * math.cos(i / 6) for i in range(240))
    return GpuTimeline(index, name, t, util, mem, H200_MEM_BYTES, power, clock)


def host_timeline(n: int = 240, total: int | None = 2048 * GIB) -> HostTimeline:
    t = tuple(0.5 * i for i in range(n))
    cpu = tuple(30.0 + 10 * math.sin(i / 8) for i in range(n))
    rss = tuple((6.0 + 0.01 * i) * GIB for i in range(n))
    return HostTimeline(t, cpu, rss, total)


# ---------------------------------------------------------------------------------------- reports


def recommendations() -> tuple[Recommendation, ...]:
    return (
        Recommendation(
            rule="tuned_config",
            severity="high",
            title="Use bf16 with DDP at micro-batch 32: 4.3x the samples/s of the baseline",
            evidence=(
                "trial 4 ran 2,602 samples/s against 610 samples/s for the baseline (trial 0)",
                "peak memory 42.0 GiB of 140.4 GiB per device",
            ),
            actions=(
                "set precision=bf16 (torch.autocast(dtype=torch.bfloat16))",
                "launch with torchrun --nproc-per-node 2",
                "set micro_batch=32",
            ),
            speedup_estimate=4.27,
            measured=True,
            saving_pct=53.1,
            saving_usd_per_month=1860.0,
            params={"micro_batch": 32, "precision": "bf16", "layout": "ddp"},
        ),
        Recommendation(
            rule="input_bound",
            severity="medium",
            title="Input-bound: 8% of each step waits for data",
            evidence=("data phase median 0.98 ms of a 12.3 ms step", "DataLoader num_workers=2"),
            actions=("raise DataLoader num_workers to 8", "set pin_memory=True"),
            speedup_estimate=1.08,
        ),
        Recommendation(
            rule="step_jitter",
            severity="low",
            title="3 outlier steps took 2.7x the median",
            evidence=("steps 120, 121 and 250 took 33 ms",),
            actions=("look for periodic evaluation or checkpointing inside the loop",),
        ),
    )


def full_report() -> Report:
    """A finished 12-trial study on 2 × H200 with every section present."""
    rows = trial_rows()
    return Report(
        title="resnet50-imagenet: tuning study",
        generated_at="2025-11-30T03:50:00Z",
        overview=Overview(
            name="resnet50-imagenet",
            kind="tune",
            run_dir="runs/resnet50-2025-11-30",
            finished=True,
            step_time_median_s=0.0123,
            samples_per_s=2602.0,
            tokens_per_s=None,
            peak_memory_bytes=int(42.0 * GIB),
            precision="bf16",
            device="NVIDIA H200 × 2",
            world_size=2,
            mfu=0.412,
            best_params={"micro_batch": 32, "precision": "bf16", "layout": "ddp"},
            speedup_vs_baseline=4.27,
            verdict="not_measured_again",
            speedup=4.27,
            verdict_headline="4.27× in the search, not measured again (a search's best is biased upward)",
        ),
        advice=AdviceSection(
            recommendations=recommendations(),
            rules_checked=RULES,
            not_checked=("Communication-bound: needs a torch.profiler trace of a multi-rank trial",),
        ),
        environment=EnvironmentSection(
            items=(
                ("Command", "python train.py --arch resnet50 --data /data/imagenet"),
                ("Python", "3.11.9"),
                ("PyTorch", "2.13.0+cu128"),
                ("CUDA", "12.8"),
                ("Driver", "570.124.06"),
                ("GPUs", "2 × NVIDIA H200 (141 GB, 700 W)"),
                ("Host", "AMD EPYC 9654, 192 cores, 2.0 TiB"),
                ("autotune", "0.1.0"),
            )
        ),
        cost=CostSection(
            price_per_gpu_hour=PRICE,
            price_source="--price-per-gpu-hour",
            devices=2,
            usd_per_million_samples=_usd_per_million(2602.0, 2),
            usd_per_million_tokens=None,
            usd_per_epoch=_usd_per_million(2602.0, 2) * 1.281167,
            dataset_samples=1_281_167,
            usd_per_month=2 * PRICE * 730 * 0.5,
            duty_cycle=0.5,
            joules_per_sample=0.47,
            baseline_usd_per_million_samples=_usd_per_million(610.0, 1),
            saving_usd_per_million_samples=_usd_per_million(610.0, 1) - _usd_per_million(2602.0, 2),
            saving_pct=53.1,
            saving_usd_per_month=1860.0,
        ),
        steps=step_section(),
        timelines=TimelineSection(gpus=(gpu_timeline(0), gpu_timeline(1))),
        host=host_timeline(),
        sweep=sweep_section(),
        convergence=convergence_section(),
        pareto=pareto_section(),
        trials=TrialSection(metric="samples_per_s", rows=rows),
    )


CPU_MISSING = {
    "cost": "No price per device-hour: pass --price-per-gpu-hour to see the cost.",
    "timelines": "No GPU was sampled: this run used the CPU backend.",
    "sweep": "A profile run has no trials to sweep; run `autotune tune` for one.",
    "convergence": "A profile run has no tuning trials.",
    "pareto": "A profile run has no tuning trials to compare on cost.",
    "trials": "A profile run has no tuning trials.",
}


def cpu_report() -> Report:
    """A profile on a CPU-only host: no GPU timelines, no study, no cost."""
    steps = step_section()
    return Report(
        title="mlp-demo: profile",
        generated_at="2025-11-30T03:55:00Z",
        overview=Overview(
            name="mlp-demo",
            kind="profile",
            run_dir="runs/mlp-demo",
            finished=False,
            step_time_median_s=0.0123,
            samples_per_s=5203.0,
            tokens_per_s=None,
            peak_memory_bytes=None,
            precision="fp32",
            device="cpu (AMD EPYC 9654) × 1",
            world_size=1,
            mfu=None,
            notes=("summary.json was missing: the summary was rebuilt from run.db",),
        ),
        advice=AdviceSection(
            recommendations=(),
            rules_checked=RULES[:1] + RULES[3:],
            not_checked=("GPU under-used: no GPU samples",),
        ),
        environment=EnvironmentSection(items=(("Python", "3.11.9"), ("PyTorch", "2.13.0+cpu"))),
        steps=replace(steps, per_rank_median_s={0: 0.0123}),
        host=host_timeline(n=120),
        missing=dict(CPU_MISSING),
    )


def _xss_params() -> dict[str, object]:
    return {XSS_SCRIPT: XSS_ATTR, XSS_ATTR: XSS_SCRIPT}


def xss_report() -> Report:
    """The full report with every user-supplied string an HTML/JS injection attempt."""
    base = full_report()
    x, y = XSS_SCRIPT, XSS_ATTR
    assert base.advice is not None and base.trials is not None and base.sweep is not None
    assert base.pareto is not None and base.cost is not None and base.timelines is not None
    recs = tuple(
        replace(r, rule=x, title=f"{x} {y}", evidence=(x, y), actions=(y, x), params=_xss_params())
        for r in base.advice.recommendations
    )
    rules = tuple(replace(t, rule=x, title=y, metric=x, unit=y, source=x) for t in base.advice.rules_checked)
    rows = tuple(
        replace(r, params=_xss_params(), error=f"{x}\n{y}", stop_reason=y, status=x if i == 3 else r.status)
        for i, r in enumerate(base.trials.rows)
    )
    return replace(
        base,
        title=f"{x}{y}",
        overview=replace(
            base.overview, name=x, run_dir=y, precision=x, device=y, best_params=_xss_params(), notes=(x, y)
        ),
        advice=AdviceSection(recommendations=recs, rules_checked=rules, not_checked=(x, y)),
        environment=EnvironmentSection(items=((x, y), (y, x), ("Command", f"python train.py {y} {x}"))),
        cost=replace(base.cost, price_source=y),
        timelines=TimelineSection(gpus=tuple(replace(g, name=x) for g in base.timelines.gpus)),
        sweep=replace(
            base.sweep, batch_param=y, series=tuple(replace(s, label=f"{x} {y}") for s in base.sweep.series)
        ),
        pareto=replace(base.pareto, points=tuple(replace(p, label=f"{x} {y}") for p in base.pareto.points)),
        convergence=replace(base.convergence, metric=x) if base.convergence else None,
        trials=replace(base.trials, metric=x, rows=rows),
        missing={"host": y},
        host=None,
    )
