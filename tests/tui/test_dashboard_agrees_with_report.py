"""The dashboard and the report agree: the same advice (the report's own JSON), the same convergence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune.report.build import build_report
from autotune.report.jsonout import render_json
from tests.autotune.report.test_markdown_json import EVIL, hostile_advice, hostile_study
from tests.tui.recorded import study_info
from tui.report import report_view


def test_the_advice_reads_back_from_report_json_as_it_was(tmp_path: Path) -> None:
    """No pickled report: recommendations, thresholds and reasons come back from report.json equal."""
    advice = hostile_advice()
    data = json.loads(render_json(build_report(hostile_study(tmp_path), advice)))
    view = report_view(data)
    assert view.advice == advice
    assert view.name == "tune " + Path(EVIL).name
    assert view.advice.recommendations[0].gain_parts() == advice.recommendations[0].gain_parts()


def test_the_dashboard_and_the_report_draw_the_same_convergence(tmp_path: Path) -> None:
    """One derivation (profilers.contract.study.trials.convergence): a skipped trial (never ran) is in
    neither; a failed one has no objective and keeps the best so far."""
    from autotune.report.build import convergence_section
    from profilers.contract.rundir import RunData

    trials = [
        {"id": 0, "status": "ok", "objective": 100.0, "baseline": True},
        {"id": 1, "status": "skipped", "objective": None},
        {"id": 2, "status": "oom", "objective": None},
        {"id": 3, "status": "ok", "objective": 140.0},
        {"id": 4, "status": "ok", "objective": 120.0},
    ]
    summary = {"schema": 1, "kind": "tune", "direction": "maximize", "metric": "samples_per_s"}
    summary["trials"] = trials
    report = convergence_section(RunData(tmp_path, "tune", summary, trials=tuple(trials)))
    dashboard = study_info(summary, trials, None)
    assert report.trial_ids == dashboard.convergence_ids == (0, 2, 3, 4)
    assert report.values == dashboard.values == (100.0, None, 140.0, 120.0)
    assert report.best_so_far == dashboard.best_so_far == (100.0, 100.0, 140.0, 140.0)
    assert len(dashboard.rows) == 5  # the table still lists the skipped trial
    # a study before its first summary names no best: the last improvement of the same convergence
    assert [r.id for r in dashboard.rows if r.best] == [3]
    minimize = study_info(
        {**summary, "direction": "minimize"}, [*trials, {"id": 5, "status": "ok", "objective": 100.0}], None
    )
    assert [r.id for r in minimize.rows if r.best] == [0]  # the first of equals


def test_the_pareto_chart_prices_every_trial_at_the_reports_one_price(tmp_path: Path) -> None:
    """A cost stored with a trial (the study's price) is not mixed with the report's price."""
    from autotune.report.build import pareto_section
    from profilers.contract.rundir import RunData

    trials = (
        {"id": 0, "status": "ok", "throughput": 100.0, "world_size": 1, "usd_per_million_samples": 1.0},
        {"id": 1, "status": "ok", "throughput": 150.0, "world_size": 2, "usd_per_million_samples": 99.0},
    )
    section = pareto_section(RunData(tmp_path, "tune", {"schema": 1, "kind": "tune"}, trials=trials), 3.6)
    assert section is not None
    cost = {p.trial_id: p.usd_per_million_samples for p in section.points}
    assert cost[0] == 3.6 / 3600 / 100.0 * 1e6 and cost[1] == 3.6 * 2 / 3600 / 150.0 * 1e6
    assert {p.trial_id for p in section.points if p.on_front} == {0, 1}  # faster but dearer: both


def test_a_trials_parameters_have_one_meaning_for_the_report_the_advice_and_the_dashboard() -> None:
    """What it was given wins over what its code read; the baseline (given none) ran its defaults."""
    from profilers.contract.study.summary import TrialEntry
    from profilers.contract.study.trials import ran_with

    baseline = {"id": 0, "status": "ok", "objective": 1.0, "baseline": True, "params": {},
                "params_used": {"micro_batch": 8, "precision": "fp32", "global_batch": 64}}  # fmt: skip
    tuned = {"id": 1, "status": "ok", "objective": 2.0, "params": {"micro_batch": 16, "precision": "bf16"},
             "params_used": {"micro_batch": 16, "precision": "bf16", "global_batch": 64}}  # fmt: skip
    defaults = {"micro_batch": 8, "precision": "fp32", "global_batch": 64}
    assert ran_with(TrialEntry.parse(baseline, "t")) == defaults  # the sweep and the advice too
    assert ran_with(TrialEntry.parse(tuned, "t"), ["micro_batch"]) == {"micro_batch": 16}
    space = {"micro_batch": {}, "precision": {}}
    rows = study_info({"space": space}, [baseline, tuned], None).rows
    assert [r.params for r in rows] == [
        {"micro_batch": 8, "precision": "fp32"},
        {"micro_batch": 16, "precision": "bf16"},
    ]


def test_the_dashboard_says_a_finished_runs_outcome_and_load_as_the_report_does(tmp_path: Path) -> None:
    """The summary box leads with how the run ended and carries the load line of the report's overview."""
    from autotune.report.build import overview_section
    from profilers.contract.rundir import RunData
    from tui.live import summary_items

    summary = {
        "steps": 14,
        "measured_steps": 9,
        "outcome": "crashed",
        "error": {"type": "RuntimeError", "message": "boom", "step": 13},
        "load": {"machine_cores": 2, "busy_cores": 2.0, "own_cores": 0.4, "other_cores": 1.6},
    }
    run = RunData(tmp_path, "profile", summary)
    report = overview_section(run, ())
    items = summary_items(run.figures)  # the dashboard reads the same parsed record
    assert items[0] == ("outcome", report.outcome)
    assert report.outcome == "crashed in step 13: RuntimeError: boom"
    assert dict(items)["machine load"] == report.load and report.load is not None


def test_the_dashboard_shows_the_studys_bill_as_the_report_prices_it(tmp_path: Path) -> None:
    """One bill (profilers.contract.study.bill): the dashboard's line is the study's summary.json, the
    report's is priced again at the report's options; at the study's own price and usage, the same."""
    from autotune.report.make import CostOptions, report_of
    from profilers.contract.rundir import RunData
    from profilers.contract.study.cost import study_bill
    from profilers.contract.study.summary import TuningSummary
    from tests.profilers.test_bill import study

    raw = study(speedup=2.0).to_json()
    raw.update(kind="tune", schema=1, metric="samples_per_s", price_per_gpu_hour=4.0, usage_hours_per_day=8.0)
    stored = study_bill(TuningSummary.parse(raw, "summary.json"), 4.0, "--price-per-gpu-hour", 8.0)
    raw["bill"] = stored.to_dict()
    report = report_of(RunData(tmp_path, "tune", raw, trials=tuple(raw["trials"])), CostOptions())
    dashboard = study_info(raw, raw["trials"], None)
    assert report.overview.bill == stored
    assert dashboard.bill == stored.sentence()
    # the cost section claims the bill's saving, and its best's cost is the baseline's less it
    cost = report.cost
    assert cost is not None and cost.saving_pct == pytest.approx(100 * stored.saving_share)  # type: ignore[operator]
    assert cost.usd_per_million_samples + cost.saving_usd_per_million_samples == pytest.approx(  # type: ignore[operator]
        cost.baseline_usd_per_million_samples
    )
    from html import escape

    from autotune.report.html import render_html
    from autotune.report.markdown import md_text, render_markdown

    page = render_html(report)  # the overview: a card and the whole line
    assert "Study cost" in page and "pays back after 6.2 h of training" in page
    assert escape(f"Cost of the study: {stored.cost_words()}; {stored.payback_words()}") in page
    assert md_text(stored.payback_words()) in render_markdown(report)
    assert "pays back after 6.2 h of training (0.775 days at 8 h a day)" in stored.sentence()
    # the report at another usage says its own payback, from the same study
    other = report_of(
        RunData(tmp_path, "tune", raw, trials=tuple(raw["trials"])), CostOptions(usage_hours_per_day=2)
    )
    assert (
        other.overview.bill is not None
        and other.overview.bill.payback_days == stored.payback_training_hours / 2
    )  # type: ignore[operator]
