"""The report's section data, built from real runs and from constructed GPU runs."""

import itertools
import json
import math
from pathlib import Path

import pytest

from autotune.report.build import build_report, downsample, step_section, timeline_section
from autotune.report.sections import AdviceSection
from profilers.contract.records import DeviceSample, StepRecord
from profilers.contract.rundir import RunData, load_run
from profilers.contract.study.verdict import verdict_of

NO_ADVICE = AdviceSection((), ())


@pytest.mark.slow
def test_profile_sections_match_the_runs_own_summary(profile_run):
    run = load_run(profile_run)
    summary = json.loads((profile_run / "summary.json").read_text())
    report = build_report(run, NO_ADVICE)
    steps = report.steps
    assert steps is not None
    assert steps.median_s == pytest.approx(summary["step_time_s"]["median"], rel=1e-12)
    assert sum(steps.phase_fractions.values()) == pytest.approx(1.0, abs=1e-9)
    for phase, share in summary["phases"].items():
        assert steps.phase_fractions[phase] == pytest.approx(share, abs=1e-9)
    assert len(steps.series_step) == 400  # under MAX_POINTS: every step is drawn
    assert report.host is not None and len(report.host.t_s) == summary["host"]["samples"]
    assert report.overview.samples_per_s == summary["throughput"]["samples_per_s"]
    # A CPU run: no GPU timelines and no study sections, each with its sentence.
    assert report.timelines is None and "on the CPU" in report.missing["timelines"]
    for key in ("sweep", "convergence", "pareto", "trials"):
        assert getattr(report, key) is None and "not a tuning study" in report.missing[key]
    labels = dict(report.environment.items)
    assert labels["command"].endswith("train_unmodified.py --steps 400")
    assert labels["sampling backends"] == "host"


@pytest.mark.slow
def test_study_sections_follow_the_trials(study_run):
    run = load_run(study_run)
    summary = json.loads((study_run / "summary.json").read_text())
    report = build_report(run, NO_ADVICE)
    ran = [t for t in summary["trials"] if t["status"] != "skipped"]
    conv = report.convergence
    assert conv is not None and conv.direction == "minimize" and conv.metric == "usd_per_million_samples"
    assert list(conv.trial_ids) == [t["id"] for t in ran]
    best = [v for v in conv.best_so_far if v is not None]
    assert all(b <= a for a, b in itertools.pairwise(best)), "best so far never gets worse"
    assert best[-1] == pytest.approx(summary["best"]["objective"])
    assert report.trials is not None and len(report.trials.rows) == len(summary["trials"])
    assert [r.id for r in report.trials.rows if r.best] == [summary["best"]["id"]]
    assert [r.id for r in report.trials.rows if r.baseline] == [0]
    # One device per trial: $ per sample falls exactly as throughput rises, so the cheapest trial
    # is also the fastest and the front is that one trial.
    pareto = report.pareto
    assert pareto is not None and pareto.price_per_gpu_hour == 2.5
    assert [p.trial_id for p in pareto.points if p.on_front] == [summary["best"]["id"]]
    for p in pareto.points:
        assert p.usd_per_million_samples == pytest.approx(2.5 / 3600 / p.samples_per_s * 1e6, rel=1e-9)
    sweep = report.sweep
    assert sweep is not None and sweep.batch_param == "batch_size"
    batches = sorted(p.batch for s in sweep.series for p in s.points)
    assert batches == sorted(float(t["params"]["batch_size"]) for t in ran if t["params"])
    assert report.overview.best_params == summary["best"]["params"]
    assert report.steps is not None, "the best trial's steps are shown"
    label = verdict_of(summary).best_label.lower()  # measured again once: not a best to apply
    assert any("trial" in note and f"(the {label})" in note for note in report.overview.notes)


def test_downsample_keeps_ends_and_caps_points():
    idx = downsample(100_000)
    assert len(idx) == 2000 and idx[0] == 0 and idx[-1] == 99_999
    assert all(b > a for a, b in itertools.pairwise(idx))
    assert downsample(5) == [0, 1, 2, 3, 4]


def _step(n: int, ms: float, kind: str = "measured") -> StepRecord:
    ns = int(ms * 1e6)
    return StepRecord(n, 0, n * 10**9, ns, 0, ns // 2, ns // 2, 0, 0, 8, None, kind)


def test_step_section_marks_the_spikes_the_outlier_rule_judges(tmp_path):
    durations = [10.0 + 0.1 * (i % 5) for i in range(200)]
    for spike in (50, 120, 180):
        durations[spike] = 40.0
    steps = tuple(_step(i + 1, ms) for i, ms in enumerate(durations))
    section = step_section(RunData(Path(tmp_path), "profile", {"schema": 1}, steps=steps))
    assert section is not None and section.outlier_steps == (51, 121, 181)
    calm = tuple(_step(i + 1, 10.0 + 0.1 * (i % 5)) for i in range(50))
    assert step_section(RunData(Path(tmp_path), "profile", {"schema": 1}, steps=calm)).outlier_steps == ()


def test_gpu_timelines_convert_units_from_the_first_sample():
    t0 = 1_700_000_000 * 10**9
    samples = [
        DeviceSample(
            t0 + i * 10**8,
            g,
            "gpu",
            gpu_util_pct=90.0 + g,
            mem_used_bytes=(40 + i) * 2**30,
            mem_total_bytes=141 * 10**9,
            power_mw=650_000 + i * 1000,
            sm_clock_mhz=1980,
        )
        for i in range(30)
        for g in (0, 1)
    ]
    section = timeline_section(samples)
    assert section is not None and [g.index for g in section.gpus] == [0, 1]
    g0 = section.gpus[0]
    assert g0.t_s[0] == 0 and g0.t_s[-1] == pytest.approx(2.9)
    assert g0.power_w[:2] == (650.0, 651.0)
    assert g0.mem_used_bytes[-1] == 69 * 2**30 and g0.mem_total_bytes == 141 * 10**9
    assert set(section.gpus[1].util_pct) == {91.0}


@pytest.mark.slow
def test_a_study_without_price_has_no_pareto_and_says_why(study_run):
    run = load_run(study_run)
    summary = dict(run.summary, price_per_gpu_hour=None)
    trials = tuple(dict(t, usd_per_million_samples=None) for t in run.trials)
    bare = RunData(run.run_dir, "tune", summary, trials=trials, profile=run.profile)
    report = build_report(bare, NO_ADVICE)
    assert report.pareto is None and "no price" in report.missing["pareto"]
    assert report.cost is None and report.missing["cost"]


def test_an_unfinished_profile_is_flagged(tmp_path):
    steps = tuple(_step(i + 1, 20.0, "warmup" if i < 3 else "measured") for i in range(40))
    run = RunData(
        Path(tmp_path),
        "profile",
        {"name": "x", "schema": 1},
        finished=False,
        steps=steps,
        notes=("the run did not finish",),
    )
    report = build_report(run, NO_ADVICE)
    assert report.overview.finished is False
    assert report.overview.notes == ("the run did not finish",)
    assert report.steps is not None and math.isclose(report.steps.median_s, 0.02)
    assert "no host samples" in report.missing["host"]
