"""Markdown and JSON reports: every section present, user strings inert, strict JSON."""

import json
import re
from pathlib import Path

import pytest

from autotune.advice.records import Recommendation, Threshold
from autotune.report.build import build_report
from autotune.report.jsonout import render_json, report_dict
from autotune.report.markdown import md_text, render_markdown
from autotune.report.sections import SECTION_TITLES, AdviceSection
from profilers.contract.rundir import RunData, load_run
from profilers.contract.study.verdict import verdict_of

EVIL = "<script>alert(1)</script>|`x`*_[a](b)"
EVIL_ATTR = '"><img src=x onerror=alert(1)>'


def hostile_study(tmp_path: Path) -> RunData:
    trial = {
        "id": 0,
        "baseline": True,
        "params": {EVIL: EVIL_ATTR},
        "status": "crashed",
        "objective": None,
        "throughput": None,
        "peak_memory_bytes": None,
        "error": f"RuntimeError: {EVIL}\nsecond line",
        "stop_reason": None,
        "world_size": 1,
    }
    ok = dict(
        trial,
        id=1,
        baseline=False,
        status="ok",
        objective=float("nan"),
        throughput=100.0,
        error=None,
        params={"micro_batch": 4, "note": EVIL},
    )
    summary = {
        "schema": 1,
        "kind": "tune",
        "command": [EVIL, EVIL_ATTR],
        "metric": "samples_per_s",
        "direction": "maximize",
        "objective": "throughput",
        "space": {"micro_batch": {"type": "int"}},
        "trials": [trial, ok],
        "best": dict(ok, speedup_vs_baseline=None),
        "baseline": trial,
        "searcher": EVIL,
        "stopped": EVIL,
    }
    return RunData(tmp_path, "tune", summary, trials=(trial, ok))


def hostile_advice() -> AdviceSection:
    rec = Recommendation(
        "input_bound",
        "high",
        f"Input-bound {EVIL}",
        (f"evidence {EVIL_ATTR}",),
        (EVIL,),
        speedup_estimate=1.25,
        params={"workers": EVIL},
    )
    rule = Threshold("input_bound", "Input-bound", f"data {EVIL}", ">", 5.0, "%", EVIL)
    return AdviceSection((rec,), (rule,), (EVIL,))


def test_markdown_escapes_every_user_string(tmp_path):
    md = render_markdown(build_report(hostile_study(tmp_path), hostile_advice()))
    assert "<script>" not in md and "<img" not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    # Every table row keeps its column count: an escaped "|" never splits a cell.
    for table in re.findall(r"(?:^\|.*\|$\n?)+", md, flags=re.M):
        counts = {len(re.findall(r"(?<!\\)\|", row)) for row in table.strip().splitlines()}
        assert len(counts) == 1, table
    assert "RuntimeError: " in md and "second line" in md  # newline folded, not dropped


def test_md_text_escapes_markdown_and_html():
    assert md_text("a|b") == "a\\|b"
    assert md_text("<b>") == "&lt;b&gt;"
    assert md_text("x_y*z") == "x\\_y\\*z"
    assert md_text("l1\nl2") == "l1 l2"


@pytest.mark.slow  # the study_run fixture runs a real study
def test_markdown_of_real_runs_has_every_section(profile_run, study_run):
    for run_dir in (profile_run, study_run):
        md = render_markdown(build_report(load_run(run_dir), AdviceSection((), ())))
        headings = re.findall(r"^## (.+)$", md, flags=re.M)
        assert headings == list(SECTION_TITLES.values())
    study_md = render_markdown(build_report(load_run(study_run), AdviceSection((), ())))
    summary = json.loads((study_run / "summary.json").read_text())
    label = verdict_of(summary).best_label.lower()  # as the verdict names the top trial
    assert f"| {summary['best']['id']} ({label}) |" in study_md
    assert "| 0 (baseline) |" in study_md


def test_json_is_strict_and_complete(tmp_path):
    report = build_report(hostile_study(tmp_path), hostile_advice())
    text = render_json(report)
    data = json.loads(text)  # strict: NaN became null
    assert "NaN" not in text
    assert data["schema"] == 1 and data["kind"] == "report"
    assert set(SECTION_TITLES) <= set(data)
    assert data["trials"]["rows"][1]["objective"] is None
    assert data["advice"]["recommendations"][0]["title"] == f"Input-bound {EVIL}"  # data kept verbatim
    assert data["steps"] is None and data["missing"]["steps"]
    assert report_dict(report)["overview"]["name"] == "tune " + Path(EVIL).name


def test_json_of_a_real_profile_round_trips(profile_run):
    data = json.loads(render_json(build_report(load_run(profile_run), AdviceSection((), ()))))
    assert len(data["steps"]["series_duration_s"]) == 400
    assert data["timelines"] is None and "CPU" in data["missing"]["timelines"]

