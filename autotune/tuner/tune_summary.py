"""``summary.json`` of a tuning study: the best configuration against the baseline, every trial.

Keys are stable and documented in the README ("Tuning summary").
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.search.records import Trial
from autotune.tuner.confirm import ConfirmRun, verdict
from autotune.tuner.host_load import machine_cores
from autotune.tuner.trial_facts import TrialMetrics, facts, metrics
from profilers.contract.schema import TUNE_SUMMARY_SCHEMA
from profilers.contract.study import pareto_front
from profilers.contract.summaries import TuningSummary
from profilers.contract.verdict import study_verdict

if TYPE_CHECKING:
    from autotune.search.study import Study
    from autotune.tuner.tune import TuneConfig


def trial_entry(trial: Trial) -> dict[str, Any]:
    """One trial as ``summary.json`` lists it."""
    m, f = metrics(trial), facts(trial)
    return {
        "id": trial.id,
        "baseline": trial.baseline,
        "params": trial.params,
        "status": trial.status,
        "objective": trial.value,
        "throughput": m.samples_per_s,
        "tokens_per_s": m.tokens_per_s,
        "peak_memory_bytes": m.peak_memory_bytes,
        "step_time_s": m.step_time_s,
        "usd_per_million_samples": m.usd_per_million_samples,
        "joules_per_sample": m.joules_per_sample,
        "world_size": f.world_size,
        "duration_s": trial.duration_s,
        "stop_reason": f.stop_reason,
        "throughput_ci95": None if f.throughput_ci95 is None else list(f.throughput_ci95),
        "stable": f.stable,
        "other_load_cores": f.other_load_cores,
        "threads_per_rank": f.threads_per_rank,
        "precision": f.precision,  # what the profiler saw the model run in
        "params_used": f.params_used,
        "run_dir": f.run_dir,
        # where and when it ran (autotune.tuner.running): "local", this host, "cuda:0" / "cpu:1"
        "executor": f.executor,
        "node": f.node,
        "devices": f.devices,
        "started_at": f.started_at,
        "ended_at": f.ended_at,
        "error": trial.error,
    }


def tune_summary(
    study: Study,
    config: TuneConfig,
    run_dir: Path,
    stopped: str | None,
    confirmations: Sequence[ConfirmRun] = (),
) -> dict[str, Any]:
    """The summary of ``study`` as it stands (``confirmations``: the study's re-measurements)."""
    trials = study.trials
    baseline = trials[0] if trials and trials[0].baseline else None
    ok = [t for t in trials if t.ok]
    best = study.best if ok else None
    settings = config.settings
    out: dict[str, Any] = {
        "schema": TUNE_SUMMARY_SCHEMA,
        "kind": "tune",
        "run_dir": str(run_dir),
        "command": [settings.script, *settings.script_args],
        "objective": config.scoring.objective,
        "metric": config.scoring.metric,
        "direction": study.direction,
        "price_per_gpu_hour": config.scoring.price_per_gpu_hour,
        "memory_budget_bytes": settings.memory_budget_bytes,
        "loss_tolerance": config.loss_tolerance,
        "searcher": study.searcher.name,
        "seed": study.searcher.seed,
        "space": study.space.to_dict(),
        "n_trials": config.n_trials,
        "trials_run": study.n_run,
        "status_counts": {s: n for s in _statuses(trials) if (n := sum(t.status == s for t in trials))},
        "baseline": None if baseline is None else trial_entry(baseline),
        "best": None if best is None else _best_entry(best, baseline, confirmations),
        "pareto": _pareto(ok) if config.multi_objective else None,
        "stopped": stopped,
        "trials": [trial_entry(t) for t in trials],
        "confirm_rounds": config.confirm_rounds,
        "preset": settings.preset,
        "preset_per_rank": settings.preset_per_rank,
        "confirmations": [c.to_dict() for c in confirmations if best is not None and c.best_id == best.id],
        "machine_cores": machine_cores(),
        "threads": {
            "threads_per_rank": settings.threads_per_rank,
            "device_kind": None if baseline is None else facts(baseline).device_kind,
        },
    }
    out["verdict"] = study_verdict(TuningSummary.parse(out, "the study's summary")).to_dict()
    return out


def _best_entry(best: Trial, baseline: Trial | None, confirmations: Sequence[ConfirmRun]) -> dict[str, Any]:
    entry = trial_entry(best)
    mine, base = metrics(best), TrialMetrics() if baseline is None else metrics(baseline)
    base_rate = base.samples_per_s if baseline is not None and baseline.ok else None
    rate, cost, base_cost = mine.samples_per_s, mine.usd_per_million_samples, base.usd_per_million_samples
    entry["speedup_vs_baseline"] = rate / base_rate if rate and base_rate else None
    entry["cost_saving_vs_baseline"] = 1 - cost / base_cost if cost is not None and base_cost else None
    entry.update(verdict(confirmations, best.id).entry())
    return entry


def _pareto(ok: list[Trial]) -> list[int]:
    """Ids of the trials on the front of throughput (max), peak memory (min) and cost (min)."""
    points: dict[int, tuple[float, ...]] = {}
    for t in ok:
        m = metrics(t)
        rate, memory, cost = m.samples_per_s, m.peak_memory_bytes, m.usd_per_million_samples
        if not rate:
            continue
        points[t.id] = (
            -rate,
            memory if memory is not None else float("inf"),
            cost if cost is not None else 1 / rate,
        )
    return pareto_front(points)


def _statuses(trials: list[Trial]) -> list[str]:
    return sorted({t.status for t in trials})


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically (a reader never sees half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)
