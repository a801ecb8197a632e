"""advise(): order, the thresholds checked, the rules not checked, and never a crash on missing data."""

import dataclasses
import json

import pytest

from autotune.advice.advise import PROFILE_RULES, advise
from autotune.advice.records import SEVERITIES
from autotune.report.sections import AdviceSection
from profilers.contract.rundir import RunData, RunDirError, load_run
from tests.autotune.advice.gpu_runs import GIB, h200_run, healthy_window


def _sick_run():
    return h200_run(
        data_ms=lambda rank, step: 12.0,  # 10%: medium, 1.11x
        precision="fp32",  # high, no estimate
        peak_allocated_bytes=30 * GIB,  # low
        step_ms=lambda rank, step: 1200.0 if step in (20, 30) else 120.0,  # outliers: high, ~1.6x
        window=healthy_window(tensor_core_fraction=0.0),
    )


def test_recommendations_sorted_by_severity_then_expected_gain():
    advice = advise(_sick_run())
    assert isinstance(advice, AdviceSection)
    recs = advice.recommendations
    assert [r.rule for r in recs] == ["step_outliers", "precision_fp32", "input_bound", "memory_low"]
    keys = [(SEVERITIES.index(r.severity), -(r.speedup_estimate or 0)) for r in recs]
    assert keys == sorted(keys)


def test_rules_checked_are_the_thresholds_of_evaluated_rules_only():
    advice = advise(h200_run())
    checked = {t.rule for t in advice.rules_checked}
    assert "straggler" not in checked
    assert advice.not_checked == ("stragglers: a single-rank run",)
    assert len(checked) == len(PROFILE_RULES) - 1


def test_a_cpu_run_says_which_rules_had_no_data():
    run = h200_run()
    summary = dict(
        run.summary, device={"kind": "cpu", "name": "AMD EPYC", "count": 1, "index": None}, gpu=None
    )
    cpu = dataclasses.replace(run, summary=summary, samples=tuple(s for s in run.samples if s.kind == "host"))
    advice = advise(cpu)
    assert "GPU utilization: no GPU samples (CPU run)" in advice.not_checked
    assert "throttling: CPU run (NVML clocks-event reasons are a GPU reading)" in advice.not_checked
    assert {"input_bound", "comm_bound", "step_outliers", "memory_growth"} <= {
        t.rule for t in advice.rules_checked
    }


def test_an_old_run_without_profile_window_and_a_summary_only_run(tmp_path):
    run = h200_run()
    old = dataclasses.replace(run, summary={k: v for k, v in run.summary.items() if k != "profile_window"})
    advice = advise(old)
    assert (
        "host-bound: no deep-profile window statistics (profile_window) in summary.json" in advice.not_checked
    )
    bare = dataclasses.replace(run, steps=(), samples=(), devices=())
    advice = advise(bare)  # summary.json alone (run.db missing)
    assert "input_bound" in {t.rule for t in advice.rules_checked}
    assert any(m.startswith("step-time outliers") for m in advice.not_checked)


@pytest.mark.parametrize(
    "summary",
    [
        {},
        {"device": {"kind": "cuda", "name": None, "count": None}, "gpu": [{"index": 0}], "ranks": [None]},
        {"profile_window": {"steps": 3}, "phases": None, "model": {"class": "Net"}, "memory": None},
        {"kind": "tune", "trials": [], "best": None, "baseline": None},
        {"kind": "tune", "best": {"id": 1, "status": "ok", "params": None}, "baseline": {"id": 0, "status": "ok"}},  # noqa: E501
    ],
)
def test_sparse_or_odd_summaries_never_make_the_advice_raise(tmp_path, summary):
    kind = "tune" if summary.get("kind") == "tune" else "profile"
    run = RunData(run_dir=tmp_path, kind=kind, summary=summary, trials=tuple(summary.get("trials") or ()))
    advice = advise(run)
    assert isinstance(advice, AdviceSection)
    assert not [m for m in advice.not_checked if "the rule failed" in m], advice.not_checked


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        ({"device": "cuda"}, "device must be an object or null, not str"),
        ({"gpu": "x"}, "gpu must be a list or null, not str"),
        ({"gpu": [None, {"index": 0}]}, "gpu: a GPU entry must be an object with its index, not None"),
        ({"profile_window": "x"}, "profile_window must be an object or null, not str"),
        ({"throughput": {"samples_per_s": "fast"}}, "throughput: 'samples_per_s' must be a number or null"),
        ({"model": [1]}, "model must be an object or null, not list"),
        ({"memory": {"heap_live_envelope": [1]}}, "memory.heap_live_envelope: must be {readings"),
    ],
)
def test_a_malformed_profile_summary_is_refused_in_one_line_where_it_is_read(tmp_path, summary, expected):
    """The figures the advice reads are parsed once, when the run is made (as ``load_run`` does)."""
    with pytest.raises(RunDirError) as info:
        RunData(run_dir=tmp_path, kind="profile", summary=summary)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_a_study_without_a_readable_best_run_still_gets_study_advice(tmp_path):
    summary = {"schema": 1, "kind": "tune", "trials": [], "best": None, "baseline": None}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    advice = advise(load_run(tmp_path))
    assert (
        "profile rules: the run of the study cannot be read, so only the study rules ran"
        in advice.not_checked
    )
    assert advice.recommendations == ()
