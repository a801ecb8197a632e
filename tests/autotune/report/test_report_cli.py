"""``autotune report`` as users run it: real runs in, files out, one-line errors for bad input."""

import json
import os
import shutil
import stat
import threading
from pathlib import Path

import pytest

from tests.autotune.report.conftest import autotune


def one_line_error(out) -> str:
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


def test_all_three_formats_of_a_profile(profile_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(profile_run, run)
    out = autotune("report", str(run), "--format", "all")
    assert out.returncode == 0, out.stderr
    for name in ("report.html", "report.md", "report.json"):
        assert (run / name).stat().st_size > 0
        assert f"wrote {run / name}" in out.stderr
    assert (run / "report.html").read_text().lstrip().lower().startswith("<!doctype html")
    assert (run / "report.md").read_text().startswith("# gpu-autotune report: train\\_unmodified")
    data = json.loads((run / "report.json").read_text())
    assert (
        data["overview"]["samples_per_s"]
        == json.loads((run / "summary.json").read_text())["throughput"]["samples_per_s"]
    )
    assert not list(run.glob(".*.tmp")), "no temporary file is left behind"


def test_a_device_or_pipe_as_output_is_written_to_never_replaced(profile_run, tmp_path):
    # `-o /dev/null` once replaced /dev/null with a file (the atomic write's rename); a FIFO stands in
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    out = autotune("report", str(profile_run), "--format", "json", "-o", str(fifo))
    reader.join(timeout=60)
    assert out.returncode == 0, out.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # still a pipe
    assert json.loads(received[0])["kind"] == "report"
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.slow  # the study_run fixture runs a real study
def test_markdown_to_stdout_and_json_to_a_file(study_run, tmp_path):
    out = autotune("report", str(study_run), "--format", "md", "-o", "-", "--quiet")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("# gpu-autotune report: tune train\\_unmodified.py")
    assert "## Trials" in out.stdout and out.stderr == ""
    target = tmp_path / "deep" / "r.json"
    out = autotune("report", str(study_run), "--format", "json", "-o", str(target))
    assert out.returncode == 0, out.stderr
    data = json.loads(target.read_text())
    assert data["overview"]["kind"] == "tune"
    assert data["cost"]["price_per_gpu_hour"] == 2.5  # the study's own price


def test_cost_of_a_cpu_profile_at_a_given_price(profile_run):
    out = autotune(
        "report",
        str(profile_run),
        "--format",
        "json",
        "-o",
        "-",
        "--price-per-gpu-hour",
        "3",
        "--duty-cycle",
        "0.5",
        "--dataset-samples",
        "1000000",
    )
    assert out.returncode == 0, out.stderr
    cost = json.loads(out.stdout)["cost"]
    rate = json.loads((profile_run / "summary.json").read_text())["throughput"]["samples_per_s"]
    per_million = 3 / 3600 / rate * 1e6  # $/h over samples/h, per million samples
    assert cost["usd_per_million_samples"] == pytest.approx(per_million, rel=1e-9)
    assert cost["usd_per_epoch"] == pytest.approx(per_million, rel=1e-9)  # one epoch = 1M samples
    assert cost["usd_per_month"] == pytest.approx(3 * 730 * 0.5)
    assert cost["price_source"] == "--price-per-gpu-hour"


def test_a_cpu_profile_without_a_price_says_why_there_is_no_cost(profile_run):
    out = autotune("report", str(profile_run), "--format", "json", "-o", "-")
    data = json.loads(out.stdout)
    assert data["cost"] is None and "--price-per-gpu-hour" in data["missing"]["cost"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["{tmp}/absent"], "no such directory"),
        (["{tmp}"], "not a run directory"),
        (["{half}"], "half-written"),
        (["{run}", "--prices", "{tmp}/absent.toml"], "no such file"),
        (["{run}", "--prices", "{bad_toml}"], "bad.toml"),
        (["{run}", "--price-per-gpu-hour", "0"], "price"),
        (["{run}", "--duty-cycle", "1.5"], "fraction"),
        (["{run}", "--format", "all", "-o", "{tmp}/x"], "leave out -o"),
        (["{run}", "--format", "pdf"], "invalid choice"),
        (["{run}", "-o", "/proc/no/such/report.html"], "cannot write"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(profile_run, tmp_path, args, expected):
    half = tmp_path / "half"
    half.mkdir()
    (half / "summary.json").write_text('{"schema": 1, "na')
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("[[price]\ngpu = ")
    values = {"tmp": tmp_path, "half": half, "run": profile_run, "bad_toml": bad_toml}
    before = sorted(p.name for p in Path(profile_run).iterdir())
    out = autotune("report", *(a.format(**values) for a in args))
    assert expected in one_line_error(out)
    assert sorted(p.name for p in Path(profile_run).iterdir()) == before, "nothing written"


@pytest.mark.slow  # the study_run fixture runs a real study
def test_the_tuned_configurations_saving_is_the_studys_own(study_run):
    out = autotune("report", str(study_run), "--format", "json", "-o", "-", "--duty-cycle", "0.25")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    cost = data["cost"]
    summary = json.loads((study_run / "summary.json").read_text())
    best, base = summary["best"], summary["baseline"]
    # one device each, at the study's $2.50: each side's $ per million samples from its throughput
    assert cost["baseline_usd_per_million_samples"] == pytest.approx(2.5 / 3600 / base["throughput"] * 1e6)
    assert cost["usd_per_million_samples"] == pytest.approx(2.5 / 3600 / best["throughput"] * 1e6)
    # measured again in one round only: the verdict is to measure again, so no saving is claimed
    # anywhere and nothing is to be applied (the saving's arithmetic: tests/autotune/cost)
    assert summary["verdict"]["action"] == "measure again"
    assert cost["saving_pct"] is None and cost["saving_usd_per_month"] is None
    (rec,) = [r for r in data["advice"]["recommendations"] if r["rule"] == "apply_tuned"]
    assert rec["title"].startswith(f"Measure again before applying trial {best['id']}")
    assert rec["params"] == {}
    assert rec["saving_pct"] is None and rec["saving_usd_per_month"] is None


def test_a_malformed_study_is_one_line_never_a_traceback(tmp_path):
    run = tmp_path / "study"
    run.mkdir()
    summary = {"schema": 1, "kind": "tune", "trials": [{"id": "not-a-number", "status": "ok"}]}
    (run / "summary.json").write_text(json.dumps(summary))
    out = autotune("report", str(run), "--format", "md", "-o", "-")
    # checked where it is read: bad input, exit 2, the line names the file and the field
    assert out.returncode == 2 and out.stdout == ""
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "summary.json: trials: a trial entry has no id" in lines[0]
    assert "'not-a-number'" in lines[0]
    assert sorted(p.name for p in run.iterdir()) == ["summary.json"]
