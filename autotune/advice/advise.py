"""Run every rule on a run and assemble the report's advice section.

``advise(run)`` runs the profile rules (:mod:`autotune.advice.rules`) on a profile run; on a
tuning study it runs the study rules (:mod:`autotune.advice.rules_tune`) and the profile rules on
the run of the study's top trial (``run.profile``: the best, or the search's highest), whose evidence
then says so. Recommendations come
most severe first, then by expected gain. ``rules_checked`` holds the thresholds of every rule that
could be evaluated; ``not_checked`` says, one sentence per rule, why the others could not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from autotune.advice import facts, rules, rules_tune
from autotune.advice.records import SEVERITIES, AdviceSection, Recommendation, Threshold
from autotune.advice.thresholds import (
    MIN_GPU_SAMPLES,
    MIN_MEMORY_SAMPLES,
    MIN_STEPS,
    RUN_THRESHOLDS,
    thresholds_for,
)
from profilers.contract.rundir import RunData
from profilers.contract.study.verdict import verdict_of
from profilers.runtime.flops import match_device


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule: its id (the thresholds' ``rule``), its check, and why it cannot run on a run."""

    id: str
    check: Callable[[RunData], Recommendation | None]
    why_not: Callable[[RunData], str | None]  # a sentence for "not checked", None when it can run


# -- why a rule cannot be evaluated -------------------------------------------------------------
def _cpu(run: RunData) -> bool:
    return facts.device(run).kind != "cuda"


def _why_not_input(run: RunData) -> str | None:
    return None if facts.data_wait(run) else "input-bound: no measured steps or phase breakdown in this run"


def _why_not_util(run: RunData) -> str | None:
    if _cpu(run):
        return "GPU utilization: no GPU samples (CPU run)"
    seen = max((u.samples for u in facts.gpu_utilization(run)), default=0)
    if seen < MIN_GPU_SAMPLES:
        return (
            f"GPU utilization: {seen} NVML readings during the measured steps (needs {MIN_GPU_SAMPLES}; run "
            "more steps, or NVML was not available)"
        )
    return None


def _why_not_window(run: RunData, what: str, gpu: bool) -> str | None:
    if gpu and _cpu(run):
        return f"{what}: CPU run (no GPU kernels)"
    w = facts.window(run)
    if w is None:
        return f"{what}: no deep-profile window statistics (profile_window) in summary.json"
    if gpu and w.kernels_per_step is None:
        return f"{what}: the deep-profile window recorded no GPU activity"
    return None


def _why_not_fp32(run: RunData) -> str | None:
    if _cpu(run):
        return "precision: CPU run (tensor cores are a GPU feature)"
    name, precision = facts.device(run).name, facts.summary_figures(run).precision
    if precision == "fp32" and match_device(str(name or "")) is None:
        return (
            f"precision: no peak figures for {name!r} in profilers/hardware/peaks.py, "
            "so its tensor cores are unknown"
        )
    return None if precision else "precision: the run did not record its precision"


def _why_not_memory(run: RunData) -> str | None:
    if _cpu(run):
        return "device memory: CPU run (host memory is shared with the system; see memory growth)"
    return None if facts.device_memory(run) else "device memory: the GPU's memory size is unknown (no NVML)"


def _why_not_straggler(run: RunData) -> str | None:
    ranks = facts.rank_times(run)
    if len(ranks) < 2:
        return "stragglers: a single-rank run"
    if sum(r.measured_steps >= MIN_STEPS for r in ranks) < 2:
        return f"stragglers: fewer than 2 ranks with {MIN_STEPS} measured steps or more"
    return None


def _why_not_outliers(run: RunData) -> str | None:
    if facts.step_outliers(run) is None:
        return f"step-time outliers: fewer than {MIN_STEPS} measured steps on rank 0"
    return None


def _why_not_growth(run: RunData) -> str | None:
    if facts.memory_trend(run) is not None:
        return None
    if (
        _cpu(run)
        and (facts.device(run).count or 1) > 1
        and len(run.sample_ranks) != len(run.samples)
    ):
        return "memory growth: the host readings' ranks are not known (CPU run under torchrun)"
    return f"memory growth: fewer than {MIN_MEMORY_SAMPLES} memory readings during the measured steps"


def _why_not_throttling(run: RunData) -> str | None:
    if _cpu(run):
        return "throttling: CPU run (NVML clocks-event reasons are a GPU reading)"
    if not [t for t in facts.throttling(run) if t.samples >= MIN_GPU_SAMPLES]:
        return f"throttling: fewer than {MIN_GPU_SAMPLES} NVML throttle readings during the measured steps"
    return None


def _not_a_study(run: RunData) -> str | None:
    return None if run.kind == "tune" else "a profile run, not a tuning study"


def _why_not_apply(run: RunData) -> str | None:
    if run.kind != "tune":
        return "a profile run, not a tuning study"
    study = run.study
    if study is not None and study.no_effect:
        return None  # it says to keep the settings: nothing tuned had an effect
    if study is None or study.best is None or study.baseline is None or not study.baseline.ok:
        return "tuned configuration: the study has no ok baseline and best trial to compare"
    return None


#: Rules of a profile run, in report order.
PROFILE_RULES: tuple[Rule, ...] = (
    Rule("input_bound", rules.input_bound, _why_not_input),
    Rule("low_gpu_util", rules.low_gpu_util, _why_not_util),
    Rule("gpu_util_swings", rules.gpu_util_swings, _why_not_util),
    Rule("host_bound", rules.host_bound, lambda run: _why_not_window(run, "host-bound", gpu=True)),
    Rule("precision_fp32", rules.precision_fp32, _why_not_fp32),
    Rule(
        "precision_no_tensor_cores",
        rules.precision_no_tensor_cores,
        lambda run: _why_not_window(run, "tensor-core use", gpu=True),
    ),
    Rule("memory_high", rules.memory_high, _why_not_memory),
    Rule("memory_low", rules.memory_low, _why_not_memory),
    Rule("comm_bound", rules.comm_bound, lambda run: _why_not_window(run, "communication", gpu=False)),
    Rule("straggler", rules.straggler, _why_not_straggler),
    Rule("step_outliers", rules.step_outliers, _why_not_outliers),
    Rule("memory_growth", rules.memory_growth, _why_not_growth),
    Rule("throttling", rules.throttling, _why_not_throttling),
)
#: Rules of a tuning study (the profile rules also run on its best trial's run).
STUDY_RULES: tuple[Rule, ...] = (
    Rule("apply_tuned", rules_tune.apply_tuned, _why_not_apply),
    Rule("precision_study", rules_tune.precision_study, _not_a_study),
    Rule("oom_boundary", rules_tune.oom_boundary, _not_a_study),
)
#: Every rule.
RULES: tuple[Rule, ...] = PROFILE_RULES + STUDY_RULES


def advise(run: RunData) -> AdviceSection:
    """The advice section of ``run``: what fired, the thresholds checked, the rules not checked."""
    if run.kind != "tune":
        recs, checked, missing = _run_rules(PROFILE_RULES, run)
        return AdviceSection(_sorted(recs), _thresholds(checked), tuple(missing))
    recs, checked, missing = _run_rules(STUDY_RULES, run)
    best = (run.study.best or run.study.baseline) if run.study is not None else None
    label = f"trial {best.id}" if best is not None else "the study"
    if run.profile is None:
        missing.append(f"profile rules: the run of {label} cannot be read, so only the study rules ran")
    else:
        prof_recs, prof_checked, prof_missing = _run_rules(PROFILE_RULES, run.profile)
        what = verdict_of(run.study).best_label.lower() if run.study is not None and run.study.best else ""
        of = f"{label}, the {what}" if what else label
        note = f"measured in the run of {of} ({run.profile.run_dir})"
        recs += [dataclasses.replace(r, evidence=(note, *r.evidence)) for r in prof_recs]
        checked |= prof_checked
        missing += [f"{m} ({label}'s run)" for m in prof_missing]
    return AdviceSection(_sorted(recs), _thresholds(checked), tuple(missing))


def _run_rules(chosen: tuple[Rule, ...], run: RunData) -> tuple[list[Recommendation], set[str], list[str]]:
    """Each rule's recommendation, the ids of the rules evaluated, and why the others were not."""
    recs: list[Recommendation] = []
    checked: set[str] = set()
    missing: list[str] = []
    for rule in chosen:
        try:
            why = rule.why_not(run)
            rec = None if why is not None else rule.check(run)
        except Exception as exc:  # a malformed summary.json must not cost the whole report
            missing.append(f"{rule.id}: the rule failed on this run ({type(exc).__name__}: {exc})")
            continue
        if why is not None:
            if why not in missing:
                missing.append(why)
            continue
        checked.add(rule.id)
        if rec is not None:
            recs.append(rec)
    return recs, checked, missing


def _sorted(recs: list[Recommendation]) -> tuple[Recommendation, ...]:
    """Most severe first, then the largest expected gain (no estimate last)."""
    return tuple(sorted(recs, key=lambda r: (SEVERITIES.index(r.severity), -(r.speedup_estimate or 0.0))))


def _thresholds(rule_ids: set[str]) -> tuple[Threshold, ...]:
    return tuple(t for t in RUN_THRESHOLDS if t.rule in rule_ids)


__all__ = ["PROFILE_RULES", "RULES", "STUDY_RULES", "Rule", "advise", "thresholds_for"]
