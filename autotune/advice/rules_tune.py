"""The study rules: what a tuning study measured, as recommendations (``kind == "tune"`` runs).

They read the study's typed summary (``run.study``: its trials, ``best`` and ``baseline``).
``apply_tuned`` reports a *measured* speedup (``measured=True``): the trial ran the configuration it
recommends. A profile run gets None from every one of them.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from autotune.advice.records import Recommendation
from autotune.advice.rules import gib
from autotune.advice.thresholds import limit, severity_for
from autotune.fmt import format_number
from autotune.knob_values import KnobValues
from autotune.presets import PRESETS, preset_args
from autotune.search.space import study_batch_param
from profilers.contract.intervals import ratio_interval
from profilers.contract.lenient import read_fields
from profilers.contract.rundir import RunData
from profilers.contract.schema import Params, ParamValue, TrialStatus
from profilers.contract.study.summary import TrialEntry
from profilers.contract.study.trials import ran_with, starved_line
from profilers.contract.study.verdict import VERDICT_LABELS, VerdictStatus, verdict_of

REDUCED = ("bf16", "fp16")
FULL = ("fp32", "tf32")


def _precision(trial: TrialEntry) -> str | None:
    """The precision a trial trained in: its parameter, what its script read, or what its model ran in.

    The last is what the profiler saw: a baseline whose script reads no precision knob.
    """
    return KnobValues.of(ran_with(trial)).precision or trial.precision


def _label(params: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "the script's own defaults"


@dataclass(frozen=True)
class _Delivery:
    """How a searched parameter reaches an unmodified script: its space entry's ``arg`` or ``env``."""

    arg: str | None = None  # a command-line template, "--batch-size={value}"
    env: str | None = None  # an environment variable's name


def _how_to_apply(name: str, value: Any, space: Mapping[str, Any]) -> str:
    """How a parameter reaches the script: its ``arg`` or ``env`` template, else the knob in code."""
    entry = space[name] if name in space and isinstance(space[name], Mapping) else {}
    delivery = _Delivery(**read_fields(_Delivery, entry))
    if delivery.arg:
        return delivery.arg.replace("{value}", str(value))
    if delivery.env:
        return f"{delivery.env}={value}"
    if name in ("precision", "layout", "activation_checkpointing", "compile", "reshard_after_forward"):
        return f"autotune.prepare(..., {name}={value!r})"
    if name in ("micro_batch", "grad_accum", "global_batch"):
        return f"autotune.batch_plan(..., {name}={value!r})"
    return f"autotune.param({name!r}, {value!r}) (or AUTOTUNE_PARAM_{name.upper()}={json.dumps(value)})"


#: Severities from the most to the least pressing.
SEVERITY_ORDER = ("high", "medium", "low")


def apply_tuned(run: RunData) -> Recommendation | None:
    """The study's verdict (:func:`profilers.contract.study.verdict.study_verdict`) as advice, and only it.

    "Apply" only for the verdict's action "apply" (a re-measured gain above the threshold, under the
    search's load); "keep the current settings" when the verdict finds no gain to act on; "measure
    again" when the study has not measured enough to say. The figure is always the verdict's.
    """
    if run.kind != "tune" or run.study is None:
        return None
    study = run.study
    verdict = verdict_of(study)
    if verdict.status == VerdictStatus.NO_EFFECT:
        return _keep(verdict.headline, [f"the study stopped: {study.stopped}"], verdict.status, {})
    if verdict.status == VerdictStatus.TOO_BUSY:
        busy = starved_line(study)
        return Recommendation(
            "apply_tuned", "low",
            f"Measure again with the machine calmer: {VERDICT_LABELS[VerdictStatus.TOO_BUSY]}",
            (f"verdict: {verdict.headline}", *([busy] if busy else [])),
            (verdict.firmer,), None, measured=True, figures={"verdict": verdict.status},
        )  # fmt: skip
    best, base = study.best, study.baseline
    if best is None or base is None:
        return None
    params = dict(best.params)
    speedup, search = verdict.speedup, verdict.search_speedup
    anchor_rate = study.anchor_rate(best)
    against = f"the baseline's {anchor_rate or 0:,.1f}"
    if best.anchor:
        against = (
            f"{anchor_rate or 0:,.1f} of the baseline's configuration run again just before it "
            f"(anchor {best.anchor})"
        )
    evidence = [
        f"trial {best.id} ({_label(params)}) measured {best.samples_per_s or 0:,.1f} samples/s "
        f"against {against} in the search" + (f" ({search:.2f}x)" if search is not None else ""),
        f"peak memory {gib(best.peak_memory_bytes)} against the baseline's {gib(base.peak_memory_bytes)}",
    ]
    saving = best.cost_saving_vs_baseline
    if saving is not None:
        evidence.append(f"{100 * saving:.1f}% cheaper per sample at the study's price, in the search")
    trials_run = study.trials_run if study.trials_run is not None else len(run.trials)
    evidence.append(
        f"{trials_run} trials ran ("
        + ", ".join(f"{n} {s}" for s, n in study.status_counts.items())
        + f"); objective {study.metric}"
    )
    if study.process_spread is not None:
        evidence.append(study.process_spread.sentence())
    evidence.append(f"verdict: {verdict.headline}")
    evidence.append(
        f"applied only above {limit('apply_tuned.speedup'):.2f}x re-measured (per core when the cores "
        "differ), its 95% interval above 1"
    )
    apply = _apply_line(study, base, params)
    figures = {
        "best_trial": best.id,
        "samples_per_s": best.samples_per_s,
        "baseline_samples_per_s": base.samples_per_s,
        "anchor": best.anchor,  # the process of the baseline's configuration the search ratio is over
        "anchor_samples_per_s": anchor_rate,
        "speedup": speedup,
        "search_speedup": search,
        "speedup_ci95": list(verdict.speedup_ci95) if verdict.speedup_ci95 else None,
        "verdict": verdict.status,
        "confirmed": verdict.status == VerdictStatus.CONFIRMED,
        "peak_memory_bytes": best.peak_memory_bytes,
        "baseline_peak_memory_bytes": base.peak_memory_bytes,
        "cost_saving_vs_baseline": saving,
    }
    if verdict.action == "keep":
        extra = [f"do not {apply}"] if verdict.status == VerdictStatus.SLOWER else []
        extra += [verdict.firmer] if verdict.firmer else []
        return _keep(verdict.headline, evidence, verdict.status, figures, extra)
    if verdict.action == "measure again":
        title = f"Measure again before applying trial {best.id}: {VERDICT_LABELS[verdict.status]}"
        return Recommendation(
            "apply_tuned", "low", title, tuple(evidence), (verdict.firmer,), None,
            measured=True, figures=figures,
        )  # fmt: skip
    if verdict.action != "apply" or speedup is None:
        return None
    ci = verdict.speedup_ci95
    within = f" (95% interval {ci[0]:.2f}–{ci[1]:.2f}x)" if ci else ""
    title = f"Apply the tuned configuration: {speedup:.2f}x the baseline's throughput, confirmed{within}"
    actions = [apply]
    if any(_precision(best) == p for p in REDUCED):
        actions.append(
            "the study checked the loss of this precision against the fp32 baseline (see precision)"
        )
    return Recommendation(
        "apply_tuned", severity_for(speedup), title, tuple(evidence), tuple(actions), float(speedup),
        measured=True, params=params, figures=figures,
    )  # fmt: skip


def _apply_line(study: Any, base: TrialEntry, params: Params) -> str:
    """How to run the script with ``params``: its flags, environment or the knobs in code."""
    ran = ran_with(base)
    changed = {k: v for k, v in params.items() if k not in ran or ran[k] != v} or params
    preset = study.preset
    if preset is not None:  # the framework's own flags, as the trials got them
        per_rank, kind = study.preset_per_rank, study.device_kind
        flags = preset_args(preset, params, per_rank, device_kind=kind) if preset in PRESETS else []
        return f"run with {' '.join(flags) or 'its own defaults'}"
    return f"run with {', '.join(_how_to_apply(k, v, study.space) for k, v in changed.items())}"


def _keep(
    headline: str,
    evidence: list[str],
    status: str,
    figures: dict[str, Any],
    extra: Sequence[str] = (),
) -> Recommendation:
    """"Keep the current settings": the study found no gain that its measurements carry (no params)."""
    if "verdict: " + headline not in evidence:
        evidence = [*evidence, f"verdict: {headline}"]
    return Recommendation(
        "apply_tuned", "low", f"Keep the current settings: {VERDICT_LABELS[status]}", tuple(evidence),
        ("keep the script's own settings: the study measured no gain that holds beyond its noise", *extra),
        None, measured=True, figures={**figures, "verdict": status},
    )  # fmt: skip


def _settings(trial: TrialEntry, names: list[str]) -> dict[str, ParamValue | None]:
    """What ``trial`` ran for each tuned parameter but precision: its value, else what its script read."""
    ran = ran_with(trial)
    return {n: ran.get(n) for n in names if n != "precision"}


def _twin(trial: TrialEntry, run: RunData) -> TrialEntry | None:
    """The ok fp32/tf32 trial that ran the same settings as ``trial`` but its precision, if any."""
    space = run.study.space if run.study is not None else {}
    names = sorted({*space, *trial.params})
    mine = _settings(trial, names)
    for other in run.trials:
        if (
            other.ok
            and (_precision(other) or "fp32") in FULL
            and _settings(other, names) == mine
        ):
            return other
    return None


class PairVerdict(NamedTuple):
    """What the like-for-like precision pairs say together."""

    direction: str | None  # "faster", "slower", or None (no pair, or within the noise)
    median_ratio: float | None
    interval: tuple[float, float] | None  # 95% interval of the geometric-mean ratio (2+ pairs)
    summary: str  # one evidence line ("" without pairs)


def pair_verdict(ratios: Sequence[float]) -> PairVerdict:
    """Reduced precision against fp32 over every like-for-like pair, never one pair alone.

    One pair decides only beyond the trials' own noise (``precision_study.pair_ratio``); several
    decide by the 95% interval (Student's t on the log ratios) of their geometric-mean ratio: faster
    when it lies above 1, slower when below. Two or three pairs give a wide interval (Student's t
    with one degree of freedom is 12.7): when it holds 1 but every pair alone is beyond the one-pair
    margin in the same direction, that direction stands. Else no clear difference.
    """
    ratios = [r for r in ratios if r > 0]
    if not ratios:
        return PairVerdict(None, None, None, "")
    median = statistics.median(ratios)
    if len(ratios) == 1:
        margin = limit("precision_study.pair_ratio")
        direction = "faster" if median > margin else "slower" if median < 1 / margin else None
        return PairVerdict(direction, median, None, f"1 like-for-like pair: {median:.2f}x")
    low, centre, high = ratio_interval(ratios)
    direction = "faster" if low > 1 else "slower" if high < 1 else None
    faster = sum(r > 1 for r in ratios)
    summary = (
        f"{len(ratios)} like-for-like pairs: {faster} faster, {len(ratios) - faster} slower; median "
        f"{median:.2f}x, geometric mean {centre:.2f}x (95% interval {low:.2f}x to {high:.2f}x)"
    )
    margin = limit("precision_study.pair_ratio")
    if direction is None and all(r > margin for r in ratios):
        direction = "faster"
        summary += f"; every pair alone is above {format_number(margin, 6)}x, the one-pair margin"
    elif direction is None and all(r < 1 / margin for r in ratios):
        direction = "slower"
        summary += f"; every pair alone is below {1 / margin:.2f}x, the one-pair margin"
    return PairVerdict(direction, median, (low, high), summary)


def precision_study(run: RunData) -> Recommendation | None:
    """What the study's bf16/fp16 trials say: diverged ones against, ok ones (loss checked) for.

    An ok trial passed the tuner's loss check when the baseline ran in fp32/tf32 (the check
    compares each reduced-precision trial's loss path with the baseline's). Its speed is compared
    with the fp32/tf32 trial of the same other parameters, when the study ran one.
    """
    study = run.study
    if study is None:
        return None
    ran = (TrialStatus.OK, TrialStatus.DIVERGED)
    trials = [t for t in run.trials if _precision(t) in REDUCED and t.status in ran]
    if not trials:
        return None
    base_precision = _precision(study.baseline) if study.baseline is not None else None
    stored = study.loss_tolerance  # the study's --loss-tolerance (a fraction)
    tolerance_pct = stored * 100 if stored is not None else limit("precision_study.tolerance")
    if tolerance_pct == 0:
        check = "ran ok (the study's loss check was off: --loss-tolerance 0)"
    elif base_precision in FULL:
        check = f"kept its loss within {format_number(tolerance_pct, 6)}% of the {base_precision} baseline's"
    else:
        check = "ran ok (no loss check: the baseline is not fp32/tf32)"
    checked = tolerance_pct != 0 and base_precision in FULL
    like = "trained like fp32" if checked else "ran, its loss not checked against fp32,"
    safe = f"{prec_of(trials)} is safe for this model's loss" if checked else (
        f"{prec_of(trials)}'s loss was not checked against an fp32 baseline"
    )
    evidence: list[str] = []
    ratios: list[float] = []
    for t in trials:
        what = f"trial {t.id} ({_label(t.params)}, {_precision(t)})"
        if t.status == TrialStatus.DIVERGED:
            evidence.append(f"{what} diverged: {t.error}")
            continue
        twin, rate = _twin(t, run), t.samples_per_s or 0.0
        line = f"{what} {check}: {rate:,.1f} samples/s"
        if twin is not None and twin.samples_per_s:
            ratios.append(rate / twin.samples_per_s)
            line += f", {ratios[-1]:.2f}x trial {twin.id} in {_precision(twin) or 'fp32'}"
        evidence.append(line)
    verdict = pair_verdict(ratios)
    if verdict.summary:
        evidence.append(verdict.summary)
    diverged = sum(t.status == TrialStatus.DIVERGED for t in trials)
    ok = len(trials) - diverged
    prec = prec_of(trials)
    if diverged:
        title = f"Reduced precision diverged in {diverged} of {len(trials)} trial(s)"
        actions: tuple[str, ...] = (
            "keep fp32/tf32 for this model, or stabilise reduced precision: bf16 rather than fp16, a "
            "GradScaler with fp16 (autotune.prepare adds it), the loss in fp32, a lower learning rate",
        )
    elif verdict.direction == "slower":
        title = f"{prec} {'trains like fp32 here' if checked else 'ran'} but runs slower"
        actions = (f"keep fp32/tf32 on this device: its {prec} kernels are slower than its fp32 ones",)
    elif verdict.direction == "faster":
        title = f"Reduced precision {like} in {ok} trial(s), and faster"
        actions = (f"train in {prec}: autotune.prepare(model, optimizer, precision='{prec}')",)
    elif ratios:
        title = f"Reduced precision {like} in {ok} trial(s), at no clear difference in speed"
        actions = (
            f"{safe}, but its like-for-like trials are within the noise of "
            "fp32's: keep the precision you have, or tune precision alone at the best settings with more "
            "steps per trial (--stable-within 0.02)",
        )
    else:
        title = f"Reduced precision {like} in {ok} trial(s)"
        actions = (
            f"{safe}; no trial ran the same settings in fp32, so compare the "
            "study's best trial, or tune precision alone at the best settings",
        )
    figures = {
        "precision": prec,
        "trials": len(trials),
        "diverged": diverged,
        "speed_ratios_vs_fp32": ratios,
        "direction": verdict.direction,
        "loss_tolerance_pct": tolerance_pct,
    }
    severity = "medium" if diverged else "low"
    return Recommendation("precision_study", severity, title, tuple(evidence), actions, figures=figures)


def prec_of(trials: Sequence[TrialEntry]) -> str:
    """The reduced precision the study's ok trials ran in (the first's), bf16 when none did."""
    return next((p for t in trials if t.status == TrialStatus.OK and (p := _precision(t))), "bf16")


def oom_boundary(run: RunData) -> Recommendation | None:
    """Trials that ran out of memory: the largest batch that fit next to the smallest that did not."""
    if run.kind != "tune":
        return None
    ooms = [t for t in run.trials if t.status == TrialStatus.OOM]
    if len(ooms) <= limit("oom_boundary.trials"):
        return None
    batch = study_batch_param(run.study.space if run.study is not None else {})
    evidence = []
    groups: dict[str, list[TrialEntry]] = {}
    for t in run.trials:
        params = dict(t.params)
        if batch is None or batch not in params:
            continue
        key = _label({k: v for k, v in params.items() if k != batch})
        groups.setdefault(key, []).append(t)
    fits = []
    for key, rows in groups.items():
        assert batch is not None  # groups are made only when the study has a batch parameter
        sized = [(t, v) for t in rows if isinstance(v := t.params[batch], int | float)]  # a batch: a number
        bad = [v for t, v in sized if t.status == TrialStatus.OOM]
        if not bad:
            continue
        good = [(t, v) for t, v in sized if t.status == TrialStatus.OK and v < min(bad)]
        largest = max(good, key=lambda tv: tv[1], default=(None, None))[0]
        where = "" if key == "the script's own defaults" else f" with {key}"
        if largest is None:
            evidence.append(f"{batch} {min(bad)} ran out of memory{where}; no smaller one ran ok")
        else:
            fits.append(f"{batch} ≤ {largest.params[batch]}{where}")
            evidence.append(
                f"{batch} {largest.params[batch]} fit{where} (peak "
                f"{gib(largest.peak_memory_bytes)}); {min(bad)} ran out of memory"
            )
    for t in ooms:
        if batch is None or batch not in t.params:
            evidence.append(
                f"trial {t.id} ({_label(t.params)}) ran out of memory: {t.error}"
            )
    budget = run.study.memory_budget_bytes if run.study is not None else None
    if budget:
        evidence.append(
            f"the study's memory budget: {gib(budget)} (a trial above it counts as out of memory)"
        )
    actions = [f"keep {', '.join(fits)}"] if fits else []
    actions.append(
        "for a larger batch: activation checkpointing, FSDP, bf16 (autotune.prepare), gradient accumulation"
    )
    figures = {"oom_trials": [t.id for t in ooms], "batch_param": batch, "memory_budget_bytes": budget}
    title = f"Out of memory in {len(ooms)} trial(s)"
    return Recommendation("oom_boundary", "low", title, tuple(evidence), tuple(actions), figures=figures)
