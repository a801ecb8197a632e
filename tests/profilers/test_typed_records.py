"""The run directory's typed records: each parses what its writer writes, gives it back, and refuses
(or, for the project's own stores, leniently drops) what it cannot read, in one line."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.search.records import Trial
from autotune.tuner.config import TuneConfig
from autotune.tuner.trial_facts import TrialFacts, TrialMetrics, facts, metrics
from profilers.contract.json_checks import SummaryError
from profilers.contract.plan_doc import PlanDocument
from profilers.contract.records import DeviceInfo, RankDevice, RankRow
from profilers.contract.run_meta import RunMeta
from profilers.contract.study.summary import TrialEntry, TuningSummary
from profilers.contract.study.verdict import study_verdict, verdict_of
from profilers.contract.trace_report import TraceReportView

FACTS = TrialFacts(
    run_dir="trials/trial-0003", world_size=2, params_used={"micro_batch": 8, "precision": "bf16"},
    stop_reason="max_steps", measured_steps=40, precision="bf16", samples_per_step=64,
    flops_per_step=1.5e12, loss_per_step=(2.5, None, 2.1), device_memory_bytes=80 * 2**30,
    throughput_ci95=(110.0, None), stable=False, other_load_cores=0.4, threads_per_rank=1,
    device_kind="cuda", device_name="NVIDIA H200", executor="local", node="n1", devices="cuda:0",
    started_at=1.0, ended_at=9.5, refused_precision=None, plan_predicted=130.0,
)  # fmt: skip


def test_a_trials_facts_survive_the_store_and_back():
    attrs = FACTS.to_attrs()
    assert attrs["loss_per_step"] == [2.5, None, 2.1] and attrs["throughput_ci95"] == [110.0, None]
    stored = Trial(3, {"micro_batch": 8}, "ok", 120.0, {"samples_per_s": 120.0}, 9.0, None, attrs).to_dict()
    trial = Trial.from_dict(stored)
    assert facts(trial) == FACTS
    assert facts(trial).run_precision == "bf16" and facts(trial).global_batch == 64


def test_facts_of_an_older_study_read_missing_and_mistyped_values_as_defaults():
    old = {"world_size": "2", "params_used": None, "stable": "yes", "throughput_ci95": [1.0], "impossible": 1}
    read = TrialFacts.of(old)
    assert read == TrialFacts()  # every value of the wrong type reads as missing
    read_metrics = TrialMetrics.of({"samples_per_s": 10, "peak_memory_bytes": 2.0e9, "step_time_s": True})
    assert read_metrics == TrialMetrics(samples_per_s=10.0, peak_memory_bytes=2_000_000_000)
    assert metrics(Trial(1, {}, "crashed", None, {}, 1.0)) == TrialMetrics()


def test_a_stored_study_keeps_its_settings_and_an_older_one_gets_that_versions_defaults():
    meta = {"searcher": "random", "seed": 7, "info": {"settings": {"script": "t.py", "script_args": ["-x"]},
            "objective": "cost", "price_per_gpu_hour": 2, "n_trials": 6, "parallel": 2}}  # fmt: skip
    stored = TuneConfig.from_stored(meta)
    assert (stored.settings.script, stored.settings.script_args) == ("t.py", ("-x",))
    assert (stored.searcher, stored.seed, stored.scoring.objective) == ("random", 7, "cost")
    assert stored.scoring.price_per_gpu_hour == 2.0
    assert (stored.n_trials, stored.parallel, stored.plan_prior, stored.confirm_rounds) == (6, 2, False, 3)
    with pytest.raises(ValueError, match="the stored study's settings are unreadable"):
        TuneConfig.from_stored({"info": {"settings": {"script": "t.py", "no_such_setting": 1}}})


def test_a_study_stored_is_the_study_read_back():
    # one record both ways: what to_info stores, from_stored gives back (the space, device kind and
    # layouts are the resumed run's, not stored)
    from autotune.tuner.objectives import Scoring
    from autotune.tuner.trials import TrialSettings

    config = TuneConfig(
        TrialSettings("train.py", ("--epochs", "1"), max_steps=30), n_trials=9, searcher="structured",
        seed=4, scoring=Scoring("cost", 2.5), multi_objective=True, early_stop_ratio=0.3,
        loss_tolerance=0.2, confirm_rounds=5, plan_prior=False, parallel=2, executor="ray",
        ray_address="auto", ray_resource="GPU", ray_storage="shared", anchor_every=3,
        usage_hours_per_day=8.0,
    )  # fmt: skip
    meta = {"searcher": config.searcher, "seed": config.seed, "info": config.to_info()}
    assert TuneConfig.from_stored(meta) == config


def test_a_tuning_summary_gives_back_what_it_read_and_the_verdict_reads_the_record():
    base = {"id": 0, "status": "ok", "baseline": True, "params": {}, "throughput": 100.0, "world_size": 1}
    best = {"id": 2, "status": "ok", "params": {"b": 8}, "throughput": 150.0, "speedup_vs_baseline": 1.5,
            "speedup_confirmation_rounds": 3, "speedup_geomean": 1.4, "speedup_ci95": [1.2, 1.6],
            "other_load_cores": 0.1, "future_key": "kept"}  # fmt: skip
    data = {"trials": [base, best], "best": best, "baseline": base, "machine_cores": 2,
            "confirmations": [{"round": 0, "role": "best", "status": "ok", "other_load_cores": 0.2}],
            "threads": {"threads_per_rank": 1, "device_kind": "cpu"}, "run_dir": "s"}  # fmt: skip
    study = TuningSummary.parse(data, "summary.json")
    assert study.to_json() == data and study.best is not None and study.best.to_json()["future_key"] == "kept"
    assert study.best.speedup_ci95 == (1.2, 1.6) and study.confirmations[0].other_load_cores == 0.2
    verdict = study_verdict(study)
    assert verdict.status == "confirmed" and verdict.speedup == 1.4 and verdict == study_verdict(data)
    with pytest.raises(SummaryError, match=r"best, trial 2: 'speedup_ci95' must be \[low, high\]"):
        TuningSummary.parse({**data, "best": {**best, "speedup_ci95": [1.2]}}, "summary.json")
    # the verdict summary.json stores is the one read back (a null figure stays None) ...
    stored = {**verdict.to_dict(), "headline": "stored headline", "search_load_cores": None}
    read = verdict_of({**data, "verdict": stored})
    assert read.headline == "stored headline" and read.speedup_ci95 == verdict.speedup_ci95
    assert read.search_load_cores is None
    # ... unless another version wrote it: a figure missing or of another type derives it again
    for older in ({k: v for k, v in stored.items() if k != "rounds"}, {**stored, "rounds": "one"}):
        assert verdict_of({**data, "verdict": older}) == verdict


def test_a_stored_trial_record_is_a_summary_entry():
    record = Trial(4, {"b": 16}, "oom", None, {"samples_per_s": None}, 3.0, "out of memory",
                   TrialFacts(world_size=2, run_dir="trials/trial-0004").to_attrs()).to_dict()  # fmt: skip
    entry = TrialEntry.from_stored(record, "run.db")
    assert (entry.id, entry.status, entry.world_size, entry.run_dir, entry.error) == (
        4, "oom", 2, "trials/trial-0004", "out of memory"
    )
    with pytest.raises(SummaryError, match=r"run\.db, trial 4: unknown status 'lost'"):
        TrialEntry.from_stored({**record, "status": "lost"}, "run.db")


PLAN_CONFIG = {"gpu": "L4", "gpus": 2, "nodes": 1, "fits": False, "why_not": "24 GiB < 31 GiB",
               "params": {"micro_batch": 4, "grad_accum": 2, "precision": "bf16",
                          "activation_checkpointing": True, "layout": "fsdp"},
               "step_time_s_interval": [0.4, 0.6], "usd_total": 12.5}  # fmt: skip


def test_a_saved_plan_is_typed_and_what_it_lacks_is_one_line():
    doc = PlanDocument.parse({"configs": [PLAN_CONFIG], "trace_s": 2, "suggestion": {"text": "2 × L4"},
                              "calibration": {"note": "fitted", "cpu": {"fitted_on": ["a", "b"],
                              "held_out": [{"config": "c", "predicted_s": 1.1, "measured_s": 1.0}],
                              "held_out_median_error": 0.1}}})  # fmt: skip
    config = doc.configs[0]
    assert (config.gpu_label, config.params.label, config.step_time_s_interval) == (
        "L4 × 2", "4×2 bf16 ckpt fsdp", (0.4, 0.6)
    )
    assert doc.cpu is not None and doc.cpu.held_out[0].predicted == 1.1 and doc.suggestion_text == "2 × L4"
    lacking = {**PLAN_CONFIG, "params": {"micro_batch": 4}}
    with pytest.raises(SummaryError, match=r"plan\.json: configuration 0: params lacks grad_accum"):
        PlanDocument.parse({"configs": [lacking]}, "plan.json")
    with pytest.raises(SummaryError, match="configuration 0: 'gpus' must be int"):
        PlanDocument.parse({"configs": [{**PLAN_CONFIG, "gpus": "2"}]}, "plan.json")


def test_the_runs_metadata_devices_and_rank_rows():
    meta = RunMeta.parse({"name": "t", "command": "train.py", "started_ns": 5, "world_size": "2", "new": 1})
    assert (meta.command, meta.command_line, meta.world_size, meta.to_json()["new"]) == (
        ("train.py",), "train.py", None, 1
    )
    device = RankDevice.from_json(1, {"index": 0, "kind": "gpu", "name": "H200", "a_newer_key": True})
    assert device == RankDevice(1, DeviceInfo(0, "gpu", "H200")) and (device.kind, device.index) == ("gpu", 0)
    row = RankRow(1, 2, "n1", 42, None, {"load": {"own_cores": 0.75}})
    assert row.own_cores == 0.75 and dataclasses.replace(row, summary=None).own_cores is None


def test_a_trace_report_the_dashboard_cannot_read_is_one_line():
    good = {"gpu_time": {"ranks": [{"rank": 0, "top_ops": [{"name": "aten::mm", "count": 3, "self_us": 1.0,
                                                           "total_us": 2.0}]}]}}  # fmt: skip
    assert TraceReportView.parse(good).ranks[0].top_ops[0].count == 3
    broken = {"gpu_time": {"ranks": [{"rank": 0, "top_ops": [{"name": "aten::mm"}]}]}}
    with pytest.raises(SummaryError, match="a rank's top kernels or operators lack 'count'"):
        TraceReportView.parse(broken)


def test_the_search_priors_checks_are_typed_and_their_median_error_is_one_figure():
    stored = {
        "note": "plan prior: this CPU's probed costs", "used": True,
        "predicted_vs_measured": [
            {"trial": 1, "predicted": 110.0, "measured": 100.0},  # 10% off
            {"trial": 2, "predicted": 50.0, "measured": 100.0},  # 50% off
            {"trial": 3, "predicted": 98.0, "measured": 100.0},  # 2% off
            {"trial": 4, "predicted": None, "measured": 100.0},  # no prediction: not counted
        ],
        "predicted": [{"params": {"micro_batch": 8}, "predicted": 110.0}],
    }  # fmt: skip
    summary = TuningSummary.parse({"trials": [], "search_prior": stored}, "summary.json")
    prior = summary.search_prior
    assert prior is not None and prior.used and [c.trial for c in prior.checks] == [1, 2, 3, 4]
    median, counted = prior.median_error()  # type: ignore[misc]
    assert counted == 3 and median == pytest.approx(0.10)
    from autotune.tuner.progress import prior_line

    assert prior_line(prior) == (
        "Search: plan prior: this CPU's probed costs; predictions within 10% of 3 trials (median)"
    )
    assert TuningSummary.parse({"trials": []}, "s").search_prior is None
    with pytest.raises(SummaryError, match=r"search_prior.predicted_vs_measured\[0\] must be an object"):
        TuningSummary.parse({"trials": [], "search_prior": {"predicted_vs_measured": [3]}}, "s")


def test_a_trials_status_is_its_enum_in_code_and_its_string_in_json():
    import json

    from profilers.contract.schema import STATUSES, TrialStatus

    trial = Trial(4, {"micro_batch": 8}, TrialStatus.BUSY, None, {}, 2.0, "too busy")
    stored = json.loads(json.dumps(trial.to_dict()))
    assert stored["status"] == "busy"
    back = Trial.from_dict(stored)
    assert back.status is TrialStatus.BUSY and back == trial
    with pytest.raises(ValueError, match="malformed trial record"):
        Trial.from_dict({**stored, "status": "exploded"})
    entry = TrialEntry.parse({"id": 4, "status": "oom"}, "summary.json")
    assert entry.status is TrialStatus.OOM and not entry.ok
    with pytest.raises(SummaryError, match="unknown status 'exploded'"):
        TrialEntry.parse({"id": 4, "status": "exploded"}, "summary.json")
    assert tuple(s.value for s in TrialStatus) == STATUSES and len(STATUSES) == 8


def test_a_re_measurements_and_a_verdicts_status_read_as_members_or_refused():
    from profilers.contract.schema import TrialStatus
    from profilers.contract.study.summary import Confirmation
    from profilers.contract.study.verdict import VerdictStatus

    summary = TuningSummary.parse(
        {"trials": [], "best": None, "baseline": None, "stopped": None,
         "confirmations": [{"round": 0, "role": "best", "status": "busy", "samples_per_s": None}]},
        "summary.json",
    )  # fmt: skip
    assert summary.confirmations == (Confirmation(round=0, role="best", status=TrialStatus.BUSY),)
    with pytest.raises(SummaryError, match="'status' is 'lost', none of ok, infeasible"):
        TuningSummary.parse(
            {"trials": [], "best": None, "baseline": None, "stopped": None,
             "confirmations": [{"round": 0, "role": "best", "status": "lost"}]},
            "summary.json",
        )  # fmt: skip
    blank = study_verdict(summary)
    assert blank.status is VerdictStatus.NO_RESULT and blank.to_dict()["status"] == "no_result"


def test_every_trial_status_has_its_colour_in_the_report():
    from autotune.report.style import STATUS_COLOURS
    from profilers.contract.schema import TrialStatus

    assert set(TrialStatus) <= set(STATUS_COLOURS)
    assert len(set(STATUS_COLOURS.values())) == len(STATUS_COLOURS)  # no two statuses look alike


def test_a_stored_study_of_odd_values_reads_as_its_version_behaved_and_takes_the_scoring_given_now():
    # a cost study stored without a usable price resumes with the price given now; values of another
    # type read as the older version's behaviour (no prior, trials one at a time); 0 trials: the default
    meta = {"searcher": "bayes", "seed": 1, "info": {"settings": {"script": "t.py"}, "objective": "cost",
            "price_per_gpu_hour": "x", "parallel": "2", "plan_prior": "yes", "n_trials": 0}}  # fmt: skip
    with pytest.raises(ValueError, match="needs --price-per-gpu-hour"):
        TuneConfig.from_stored(meta)
    stored = TuneConfig.from_stored(meta, price_per_gpu_hour=3.0)
    assert (stored.scoring.objective, stored.scoring.price_per_gpu_hour) == ("cost", 3.0)
    assert (stored.parallel, stored.plan_prior, stored.n_trials) == (0, False, TuneConfig.n_trials)
    assert TuneConfig.from_stored(meta, objective="throughput").scoring.objective == "throughput"


def test_a_damaged_re_measurement_record_is_refused_in_one_line(tmp_path):
    import json
    import sqlite3

    from autotune.tuner import confirm
    from profilers.contract.schema import TrialStatus
    from profilers.contract.study.summary import Confirmation

    store = tmp_path / "run.db"
    run = Confirmation(3, 0, "best", TrialStatus.OK, 120.0, (110.0, 130.0), 0.1, 2.0, "trials/c")
    confirm.store(store, run)
    [read] = confirm.stored(store)
    assert read.samples_per_s_ci95 == (110.0, 130.0) and read.status is TrialStatus.OK
    with sqlite3.connect(store) as conn:
        conn.execute("INSERT INTO confirmations (record) VALUES (?)", (json.dumps({"status": "ok"}),))
    with pytest.raises(ValueError, match="a damaged re-measurement record"):
        confirm.stored(store)


def test_a_configuration_holds_numbers_strings_and_booleans_or_is_refused_in_one_line():
    params = {"micro_batch": 8, "precision": "bf16"}
    assert TrialEntry.parse({"id": 3, "status": "ok", "params": params}, "s").params == params
    nested = {"id": 3, "status": "ok", "params": {"micro_batch": [8, 16]}}
    with pytest.raises(SummaryError, match=r"s, trial 3: 'params' must be an object of numbers, strings and"):
        TrialEntry.parse(nested, "s")
    # the stores are read leniently: a damaged value is left out, never raised, the rest kept
    damaged = {"lr": {"nested": 1}, "micro_batch": 8}
    assert RunMeta.parse({"params_used": damaged}).params_used == {"micro_batch": 8}
    assert RunMeta.parse({"command": 5, "name": "t"}).command == ()
    record = {"id": 2, "status": "ok", "params": {"x": None, "micro_batch": 8}}
    stored = TrialEntry.from_stored(record, "run.db")
    assert stored.params == {"micro_batch": 8} and not stored.baseline
    used = {"lr": 0.1, "compile": True}
    assert RunMeta.parse({"params_used": used}).params_used == used
