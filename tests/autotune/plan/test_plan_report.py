"""``autotune plan --format md|html``: the plan as a pull-request table and a page with its chart."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.report.plan_report import cost_time_points, plan_html, plan_markdown
from profilers.contract.plan_doc import PlanDocument
from tests.browser import find_chromium, load_in_browser

ROOT = Path(__file__).resolve().parents[3]
LM = str(ROOT / "tests" / "scripts" / "plan_lm.py")


@pytest.fixture(scope="module")
def plan_data() -> dict:
    """A real plan of a script on three GPUs, in bf16 (which a T4 cannot run)."""
    out = subprocess.run(
        [sys.executable, "-m", "autotune", "plan", "--gpu", "H100-SXM", "--gpu", "L4", "--gpu", "T4",
         "--precision", "bf16", "--tokens", "10000000", "--format", "json", LM, "--batch", "8"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    data: dict = json.loads(out.stdout)
    return data


@pytest.mark.slow
def test_markdown_has_every_configuration_cheapest_first_and_why_some_cannot_run(plan_data):
    text = plan_markdown(PlanDocument.parse(plan_data))
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    # 3 GPUs × micro-batches 1, 2, 4, 8 × on the GPU or with its state offloaded to the host
    assert len(rows) == len(plan_data["configs"]) == 3 * 4 * 2
    # bf16 on a T4 cannot run: said in the row, and those rows come last
    t4 = [r for r in rows if r.startswith("| T4 ")]
    assert all("no: T4 has no bf16 tensor cores" in r for r in t4)
    assert rows[-len(t4) :] == t4
    assert "stand-in" in text and "optimised stack" in text  # the calibration says what it was fitted on


@pytest.mark.slow
def test_the_chart_points_are_the_fitting_configurations_with_their_run_cost(plan_data):
    series = cost_time_points(PlanDocument.parse(plan_data))
    assert set(series) == {"H100-SXM", "L4"}  # no T4 point: nothing fits there
    for gpu, points in series.items():
        configs = [c for c in plan_data["configs"] if c["gpu"] == gpu]
        assert sorted(u for _, u, _ in points) == sorted(c["usd_total"] for c in configs)
        for hours, usd, _ in points:
            match = next(c for c in configs if c["usd_total"] == usd)
            samples = -(-10_000_000 // 32)  # the run's tokens over 32 tokens per sample
            assert hours == pytest.approx(samples / match["samples_per_s"] / 3600)


@pytest.mark.slow
def test_the_page_draws_its_chart_in_a_browser_and_runs_no_injected_markup(plan_data, tmp_path):
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium-family browser on PATH: not loaded in a browser")
    hostile = json.loads(json.dumps(plan_data))
    hostile["model"]["script"] = '<img src=x onerror="alert(1)">.py'
    hostile["notes"] = ["<script>alert(2)</script>"]
    page = plan_html(PlanDocument.parse(hostile))
    path = tmp_path / "plan.html"
    path.write_text(page, encoding="utf-8")
    result = load_in_browser(path, tmp_path / "loaded", window=(1280, 1600), scale=0.5, budget_ms=2000)
    assert result.console_errors == []
    assert result.dialogs == []  # the markup in the names was shown, not run
    assert re.search(r'id="plan-cost-time"[^>]*>.*?class="[^"]*plot-container', result.dom, re.S)
    assert "&lt;img src=x" in page


@pytest.mark.slow
def test_md_and_html_are_written_where_asked(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "autotune", "plan", "--demo", "cnn", "--gpu", "L4", "--precision", "fp32",
         "--format", "html", "-o", str(tmp_path / "plan.html")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "plan.html").read_text().startswith("<!DOCTYPE html>")
    bad = subprocess.run(
        [sys.executable, "-m", "autotune", "plan", "--demo", "cnn", "--gpu", "L4", "--precision", "fp32",
         "--format", "md", "-o", str(tmp_path / "no" / "such" / "dir" / "plan.md")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert bad.returncode == 1 and "cannot write" in bad.stderr and bad.stderr.count("\n") == 1


@pytest.mark.slow
def test_a_plan_saved_in_a_run_directory_is_a_section_of_its_report(plan_data, tmp_path):
    run = tmp_path / "run"
    script = str(ROOT / "tests" / "scripts" / "train_unmodified.py")

    def autotune(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "autotune", *args], capture_output=True, text=True, timeout=300, cwd=ROOT
        )

    assert autotune("profile", "--run-dir", str(run), "--quiet", script, "--steps", "30").returncode == 0
    without = autotune("report", str(run), "--format", "md", "-o", "-")
    assert without.returncode == 0, without.stderr
    assert "no plan.json in the run directory" in without.stdout  # and how to add one
    (run / "plan.json").write_text(json.dumps(plan_data))  # what `autotune plan ... -o RUN/plan.json` writes
    md = autotune("report", str(run), "--format", "md", "-o", "-").stdout
    section = md.split("## Plan: every GPU, before renting", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == len(plan_data["configs"]) == 24
    assert "no: T4 has no bf16 tensor cores" in section
    report = json.loads(autotune("report", str(run), "--format", "json", "-o", "-").stdout)
    assert len(report["plan"]["configs"]) == 24 and "plan" not in report["missing"]
    # the section's keys of every earlier version are still there (later versions add, never rename)
    kept = {"configs", "model", "trace_s", "notes", "suggestion_text", "calibration_note", "cpu"}
    kept.add("cpu_memory")
    assert kept <= set(report["plan"]) and report["plan"]["suggestion_text"]
    html = autotune("report", str(run), "--format", "html", "-o", "-").stdout
    assert '<section id="plan">' in html and "plan-cost-time" in html  # the $-against-time chart
    (run / "plan.json").write_text("{")  # half-written: the report still comes, and says why
    broken = autotune("report", str(run), "--format", "md", "-o", "-")
    assert broken.returncode == 0 and "plan.json cannot be read" in broken.stdout
    (run / "plan.json").write_text(json.dumps({"configs": [{"gpu": "L4"}]}))  # not a plan's JSON
    wrong = autotune("report", str(run), "--format", "md", "-o", "-")
    assert wrong.returncode == 0
    assert "plan.json cannot be read: configuration 0: 'gpus' must be int" in wrong.stdout


def test_md_keeps_top_rows_and_the_suggestion_prices_as_the_table_does():
    out = subprocess.run(
        [sys.executable, "-m", "autotune", "plan", "--demo", "cnn", "--gpu", "L4", "--gpu", "H100-SXM",
         "--precision", "fp32", "--format", "md", "--top", "3"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    table = lines[lines.index("## Configurations, cheapest first") :]
    rows = [line for line in table if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 3
    # the suggestion's $ per million samples is the table's cell for the same configuration
    suggestion = next(line for line in lines if line.startswith("- Suggestion:"))
    cell = rows[0].split(" | ")[11]
    assert f"{cell} per million samples" in suggestion, (suggestion, rows[0])
