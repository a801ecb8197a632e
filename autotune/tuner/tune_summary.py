"""``summary.json`` of a tuning study: the best configuration against the baseline, every trial.

Keys are stable and documented in the README ("Tuning summary").
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from autotune.cost.prices import PriceQuote, PriceTableError, load_prices, resolve_price
from autotune.search.records import Trial
from autotune.tuner.confirm import ANCHOR, Confirmation, anchors, verdict
from autotune.tuner.early_stop import best_result, reference_trials
from autotune.tuner.host_load import machine_cores
from autotune.tuner.trial_facts import TrialMetrics, facts, metrics
from profilers.contract.json_checks import JsonObject, record_json
from profilers.contract.load import too_busy
from profilers.contract.schema import TUNE_SUMMARY_SCHEMA, TrialStatus
from profilers.contract.study.bill import device_hours
from profilers.contract.study.cost import study_bill
from profilers.contract.study.spread import AnchorRun, SearchRatio, midpoint, process_spread, search_ratio
from profilers.contract.study.summary import BestEntry, SearchPrior, StudyThreads, TrialEntry, TuningSummary
from profilers.contract.study.trials import pareto_front
from profilers.contract.study.verdict import study_verdict

if TYPE_CHECKING:
    from autotune.search.study import Study
    from autotune.tuner.config import TuneConfig


def anchor_runs(baseline: Trial | None, stored: Sequence[Confirmation], parallel: int = 1) -> list[AnchorRun]:
    """The baseline's processes: the baseline trial (anchor 0), then each stored anchor.

    With trials at once (``parallel`` > 1) the baseline trial ran alone: it counts in the spread but
    is no reference for the search's ratios while an anchor (run in a trial's slot) is. A baseline
    measured on a machine too busy for it (the study keeps it: it cannot go on without one) is
    neither, while an anchor measured calmer is (contract.study.spread); busy anchors have no figure.
    """
    out = []
    if baseline is not None and baseline.baseline:
        f = facts(baseline)
        rate = metrics(baseline).samples_per_s if baseline.ok else None
        load, busy = f.other_load_cores, too_busy(f.starved_share)
        reference = parallel <= 1 and not busy
        out.append(AnchorRun(0, rate, f.throughput_ci95, f.started_at, f.ended_at, load, reference, busy))
    for run in stored:
        ci = run.samples_per_s_ci95
        own = (ci[0], ci[1]) if ci and len(ci) == 2 else None
        load = run.other_load_cores
        out.append(AnchorRun(run.round, run.samples_per_s, own, run.started_at, run.ended_at, load))
    return out


def anchor_line(run: Confirmation) -> str:
    """What the terminal says of one anchor as it ends."""
    what = f"anchor {run.round}: the baseline's configuration again"
    where = f" (in trial {run.best_id}'s slot)"
    if run.status == TrialStatus.OK and run.samples_per_s:
        return f"{what}: {run.samples_per_s:,.0f} samples/s{where}"
    return f"{what}: {run.status}: {run.error}{where}"


def trial_ratio(trial: Trial, anchor_list: Sequence[AnchorRun]) -> SearchRatio:
    """A trial's throughput over its anchor's, with the spread between processes (every view's figure)."""
    f = facts(trial)
    rate = metrics(trial).samples_per_s if trial.ok else None
    return search_ratio(rate, f.throughput_ci95, midpoint(f.started_at, f.ended_at), anchor_list, f.anchor)


def trial_entry(
    trial: Trial, anchor_list: Sequence[AnchorRun] = (), price_per_gpu_hour: float | None = None
) -> TrialEntry:
    """One trial as ``summary.json`` lists it (``anchor_list``: the baseline's processes).

    What the study stored of it, read as a summary reads a stored trial
    (:meth:`TrialEntry.from_stored`), with what the summary works out: its ratio to its anchor, and
    what its device-hours cost at ``price_per_gpu_hour`` (the study's bill, contract.study.bill).
    """
    entry = TrialEntry.from_stored(trial.to_dict(), "the study's store")
    ratio = trial_ratio(trial, anchor_list)
    held = device_hours(trial.duration_s, entry.world_size) if trial.status != TrialStatus.SKIPPED else 0.0
    written = replace(
        entry,
        device_hours=held,
        cost_usd=None if held is None or price_per_gpu_hour is None else held * price_per_gpu_hour,
        speedup_vs_baseline=ratio.ratio,
        speedup_vs_baseline_ci95=ratio.ci95,
        anchor=ratio.anchor,
    )
    return replace(written, raw=record_json(written))  # its document: what the summary lists


def study_summary(
    study: Study,
    config: TuneConfig,
    run_dir: Path,
    stopped: str | None,
    confirmations: Sequence[Confirmation] = (),
    no_effect: bool = False,
    search_prior: SearchPrior | None = None,
) -> TuningSummary:
    """The summary of ``study`` as it stands: the record summary.json is written from.

    ``confirmations``: the study's re-measurements and anchors; ``no_effect``: the study stopped
    because what it tunes changes nothing (no best is named); ``search_prior``: how the plan
    ordered the search, when it did.
    """
    trials = study.trials
    baseline = trials[0] if trials and trials[0].baseline else None
    ok = [t for t in trials if t.ok]
    best = best_result(trials, study.direction == "maximize") if not no_effect else None
    anchor_list = anchor_runs(baseline, anchors(confirmations), config.parallel)
    quote = study_price(config, baseline)
    price = quote.usd_per_gpu_hour if quote is not None else None
    settings = config.settings
    record = TuningSummary(
        schema=TUNE_SUMMARY_SCHEMA,
        run_dir=str(run_dir),
        command=(settings.script, *settings.script_args),
        objective=config.scoring.objective,
        metric=config.scoring.metric,
        direction=study.direction,
        price_per_gpu_hour=config.scoring.price_per_gpu_hour,
        memory_budget_bytes=settings.memory_budget_bytes,
        loss_tolerance=config.loss_tolerance,
        searcher=study.searcher.name,
        seed=study.searcher.seed,
        space=study.space.to_dict(),
        n_trials=config.n_trials,
        trials_run=study.n_run,
        status_counts={s: n for s in _statuses(trials) if (n := sum(t.status == s for t in trials))},
        baseline=None if baseline is None else trial_entry(baseline, anchor_list, price),
        best=None if best is None else _best_entry(best, baseline, anchor_list, confirmations, price),
        pareto=tuple(_pareto(ok)) if config.multi_objective else None,
        stopped=stopped,
        # the study found that what it tunes changes nothing (a knob never read): no best, no advice
        no_effect=no_effect,
        trials=tuple(trial_entry(t, anchor_list, price) for t in trials),
        anchor_every=config.anchor_every,
        parallel=config.parallel,
        executor=config.executor,
        anchors=tuple(c for c in confirmations if c.role == ANCHOR),
        process_spread=process_spread(anchor_list),
        confirm_rounds=config.confirm_rounds,
        preset=settings.preset,
        preset_per_rank=settings.preset_per_rank,
        confirmations=tuple(
            c for c in confirmations if best is not None and c.best_id == best.id and c.role != ANCHOR
        ),
        machine_cores=machine_cores(),
        threads=StudyThreads(
            settings.threads_per_rank, None if baseline is None else facts(baseline).device_kind
        ),
        usage_hours_per_day=config.usage_hours_per_day,
        search_prior=search_prior,
        raw={},
    )
    decided = study_verdict(record)
    source = quote.describe() if quote is not None else None
    bill = study_bill(record, price, source, config.usage_hours_per_day, decided)
    return replace(record, verdict=decided.to_dict(), bill=bill)


def study_price(config: TuneConfig, baseline: Trial | None) -> PriceQuote | None:
    """The price of the study's device-hours (None on a CPU or an unknown GPU).

    ``--price-per-gpu-hour``, else the built-in table's for the GPU the baseline ran on.
    """
    explicit = config.scoring.price_per_gpu_hour
    f = facts(baseline) if baseline is not None else None
    name = f.device_name if f is not None and f.device_kind == "cuda" else None
    if explicit is None and name is None:
        return None
    try:
        return resolve_price(name, explicit=explicit, table=load_prices())
    except (PriceTableError, ValueError):  # an unreadable table prices nothing: the hours still count
        return None


def _best_entry(
    best: Trial,
    baseline: Trial | None,
    anchor_list: Sequence[AnchorRun],
    confirmations: Sequence[Confirmation],
    price_per_gpu_hour: float | None,
) -> BestEntry:
    """The best trial's entry, with its cost against the baseline's and its re-measured speedup."""
    entry = trial_entry(best, anchor_list, price_per_gpu_hour)
    mine, base = metrics(best), TrialMetrics() if baseline is None else metrics(baseline)
    cost, base_cost = mine.usd_per_million_samples, base.usd_per_million_samples
    again = verdict(confirmations, best.id)
    written = BestEntry(
        **{f.name: getattr(entry, f.name) for f in fields(TrialEntry)},
        cost_saving_vs_baseline=1 - cost / base_cost if cost is not None and base_cost else None,
        speedup_confirmation_rounds=again.rounds,
        speedup_ratios=again.ratios,
        speedup_geomean=again.speedup,
        speedup_ci95=again.speedup_ci95,
        confirmed=again.confirmed,
    )
    return replace(written, raw=record_json(written))


def _pareto(ok: list[Trial]) -> list[int]:
    """Ids of the trials on the front of throughput (max), peak memory (min) and cost (min)."""
    points: dict[int, tuple[float, ...]] = {}
    for t in reference_trials(ok):  # a trial stopped early as losing is never a result
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


def write_json(path: Path, data: JsonObject) -> None:
    """Write ``data`` to ``path`` atomically (a reader never sees half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)
