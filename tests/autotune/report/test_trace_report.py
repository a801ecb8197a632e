"""``autotune report TRACE``: the report of torch.profiler traces, and the trace rules on real GPU traces.

The A100 (DDP rank 0 of 2), V100 and MI250 traces are real recordings by others
(tests/data/gpu_traces/NOTICE.md). Each rule is shown firing on one trace and not on another where
the real traces allow it; beyond that on traces built from them with one thing changed.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from autotune.advice.rules_trace import advise_trace
from autotune.report.jsonout import report_dict
from autotune.report.make import make_report
from autotune.report.trace_report import trace_report
from profilers.traces.analysis import analyse_traces
from profilers.traces.gpu_time import KIND_COMMUNICATION, kernel_kind
from tests.autotune.report.conftest import autotune

TRACES = Path(__file__).resolve().parents[2] / "data" / "gpu_traces"
A100, V100, MI250 = (TRACES / n / "rank-0.json.gz" for n in ("a100_ddp2", "v100_single", "mi250_single"))


def fired(path: Path) -> dict[str, object]:
    advice = advise_trace(analyse_traces(path))
    return {r.rule: r for r in advice.recommendations}


def checked(path: Path) -> set[str]:
    return {t.rule for t in advise_trace(analyse_traces(path)).rules_checked}


def edited(src: Path, dst: Path, edit) -> Path:
    """A copy of a real trace with ``edit(event)`` applied to every event."""
    with gzip.open(src) as f:
        doc = json.load(f)
    for event in doc["traceEvents"]:
        edit(event)
    with gzip.open(dst, "wt") as f:
        json.dump(doc, f)
    return dst


def test_report_json_has_each_ranks_figures_where_issue_13_says(tmp_path):
    """report.json's gpu_time.ranks[i] carries the named fields, equal to the analysis."""
    out = autotune("report", str(A100), "--format", "json", "-o", "-")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    rank = data["gpu_time"]["ranks"][0]
    for key in ("rank", "device_name", "idle_pct", "compute_pct", "non_compute_pct", "comm_overlap_pct",
                "kernel_time_us", "steps", "step_time_s_median"):  # fmt: skip
        assert key in rank
    analysis = analyse_traces(A100).ranks[0]
    assert rank["idle_pct"] == pytest.approx(analysis.idle_pct)
    assert rank["comm_overlap_pct"] == pytest.approx(analysis.comm_overlap_pct)
    assert rank["device_name"] == "NVIDIA A100-PG509-200" and rank["steps"] == 3
    assert data["overview"]["kind"] == "trace" and data["overview"]["world_size"] == 2
    assert any("1 of 2 ranks" in n for n in data["overview"]["notes"])
    assert [r["rule"] for r in data["advice"]["recommendations"]] == ["host_bound"]


def test_the_default_output_goes_next_to_the_trace_file(tmp_path):
    trace = tmp_path / "worker0.1234.pt.trace.json.gz"
    shutil.copy(V100, trace)
    out = autotune("report", str(trace), "--format", "all", "--quiet")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    for fmt in ("html", "md", "json"):
        assert (tmp_path / f"worker0.1234.pt.trace.report.{fmt}").stat().st_size > 1000
    # a second report of the folder reads the trace, not the reports just written next to it
    again = autotune("report", str(tmp_path), "--format", "json", "-o", "-")
    assert again.returncode == 0, again.stderr
    assert len(json.loads(again.stdout)["gpu_time"]["ranks"]) == 1


def test_host_bound_fires_on_the_idle_a100_not_on_the_busy_v100():
    a100 = fired(A100)
    assert "host_bound" in a100 and "host_bound" not in fired(V100)
    assert {"host_bound"} <= checked(V100)
    figures = a100["host_bound"].figures
    assert figures["idle_pct"] > 70 and figures["launch_delay_us_median"] < 50


def test_fp32_gemms_fire_on_the_v100_not_on_the_a100s_tf32_tensor_ops():
    """The V100 runs volta_sgemm/scudnn (fp32, CUDA cores); the A100 runs cutlass tensorop_s1688
    (TF32 on tensor cores)."""
    v100 = fired(V100)["precision_fp32"]
    assert v100.figures["fp32_gemm_share_pct"] > 50
    assert v100.speedup_estimate is not None and 1.5 < v100.speedup_estimate < 8
    assert "precision_fp32" not in fired(A100) and "precision_fp32" in checked(A100)


def test_precision_rule_is_not_checked_on_a_gpu_without_known_peaks():
    advice = advise_trace(analyse_traces(MI250))
    assert any(
        line.startswith("precision_fp32:") and "AMD Radeon Graphics" in line for line in advice.not_checked
    )


def test_launch_bound_fires_on_the_tiny_mi250_loop_not_on_the_a100():
    mi250 = fired(MI250)["launch_bound"]
    assert mi250.figures["short_kernels_pct"] > 50
    assert "launch_bound" not in fired(A100) and "launch_bound" in checked(A100)


@pytest.mark.slow
def test_comm_bound_is_checked_on_the_a100_and_fires_when_its_all_reduces_are_5x_longer(tmp_path):
    """The real rank exposes 4.8% of its span in NCCL kernels (under the 10% limit); the same trace
    with every NCCL kernel 5x as long exposes more than 10%."""
    assert "comm_bound" in checked(A100) and "comm_bound" not in fired(A100)

    def slow_nccl(e: dict) -> None:
        if e.get("cat") == "kernel" and kernel_kind(e["name"]) == KIND_COMMUNICATION:
            e["dur"] *= 5

    rec = fired(edited(A100, tmp_path / "slow.json.gz", slow_nccl))["comm_bound"]
    assert rec.figures["exposed_pct"] > 10
    assert "comm_bound" not in checked(V100)  # no communication kernels


@pytest.mark.slow
def test_memcpy_heavy_fires_when_host_copies_fill_the_gpu(tmp_path):
    """The V100 trace's DtoD copies are 0.9% of its span; turned into 40x longer host-to-device
    copies they pass 10%, and the advice is about pinned memory."""
    assert "memcpy_heavy" not in fired(V100)

    def host_copies(e: dict) -> None:
        if e.get("cat") == "gpu_memcpy":
            e["name"] = "Memcpy HtoD (Pageable -> Device)"
            e["dur"] *= 40

    rec = fired(edited(V100, tmp_path / "copies.json.gz", host_copies))["memcpy_heavy"]
    assert rec.figures["memory_share_pct"] > 10
    assert any("pin_memory" in a for a in rec.actions)


@pytest.mark.slow
def test_straggler_fires_on_a_rank_whose_kernels_are_slower(tmp_path):
    """Two ranks from the real A100 trace; rank 1's compute kernels take 1.5x as long."""
    shutil.copy(A100, tmp_path / "rank0.json.gz")

    def slower(e: dict) -> None:
        if e.get("cat") == "kernel" and kernel_kind(e["name"]) == "compute":
            e["dur"] *= 1.5

    with gzip.open(A100) as f:
        doc = json.load(f)
    doc["distributedInfo"]["rank"] = 1
    with gzip.open(tmp_path / "rank1.json.gz", "wt") as f:
        json.dump(doc, f)
    edited(tmp_path / "rank1.json.gz", tmp_path / "rank1.json.gz", slower)
    rec = fired(tmp_path)["straggler"]
    assert rec.figures["slowest_rank"] == 1 and rec.figures["compute_ratio"] == pytest.approx(1.5, rel=0.02)
    # an even pair does not fire
    shutil.copy(A100, tmp_path / "rank1.json.gz")
    with gzip.open(tmp_path / "rank1.json.gz") as f:
        doc = json.load(f)
    doc["distributedInfo"]["rank"] = 1
    with gzip.open(tmp_path / "rank1.json.gz", "wt") as f:
        json.dump(doc, f)
    assert "straggler" not in fired(tmp_path) and "straggler" in checked(tmp_path)


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"not json at all", "not a torch.profiler trace"), (b'{"traceEvents": 3}', "without traceEvents")],
)
def test_a_file_that_is_no_trace_is_one_line_and_exit_2(tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    out = autotune("report", str(bad), "--format", "json", "-o", "-")
    assert out.returncode == 2
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr


def test_a_truncated_trace_is_reported_with_what_could_not_be_read(tmp_path):
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(V100.read_bytes()[: V100.stat().st_size * 2 // 3])
    data = report_dict(make_report(cut))
    left_out = data["gpu_time"]["ranks"][0]["left_out"]
    assert any("could not be read to its end" in line for line in left_out)
    assert data["gpu_time"]["ranks"][0]["kernels"] > 100


def test_a_live_cpu_trace_of_torch_profiler_reads_its_steps_and_ops(tmp_path):
    """A trace torch.profiler writes here (CPU): its ProfilerStep count and op calls are torch's."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    path = tmp_path / "live.json"
    calls: list[int] = []

    def ready(prof) -> None:
        prof.export_chrome_trace(str(path))
        calls.append(sum(e.count for e in prof.key_averages() if e.key == "aten::addmm"))

    plan = schedule(wait=0, warmup=1, active=4, repeat=1)
    with profile(activities=[ProfilerActivity.CPU], schedule=plan, on_trace_ready=ready) as prof:
        for _ in range(6):
            model(torch.randn(8, 32)).sum().backward()
            prof.step()
    addmm_calls = calls[0]
    report = trace_report(path)
    rank = report.gpu_time.ranks[0] if report.gpu_time else None
    assert rank is not None and rank.kernels == 0 and rank.idle_pct is None
    assert rank.steps == 4
    ops = {o.name: o for o in rank.top_ops}
    assert ops["aten::addmm"].count == addmm_calls == 8
    assert any("no GPU activity" in n for n in report.overview.notes)
    assert report.advice.recommendations == ()


def test_the_trace_this_tool_wrote_reads_as_any_other(profile_run):
    """The deep window's own gzip trace (a CPU run): its ops, as the run's summary lists them."""
    summary = json.loads((profile_run / "summary.json").read_text())
    trace = profile_run / summary["trace_files"][0]
    out = autotune("report", str(trace), "--format", "json", "-o", "-")
    assert out.returncode == 0, out.stderr
    rank = json.loads(out.stdout)["gpu_time"]["ranks"][0]
    assert rank["kernels"] == 0 and rank["top_ops"]
    ops = {o["name"]: o for o in rank["top_ops"]}
    top = summary["top_ops"][0]
    assert ops[top["name"]]["count"] == top["calls"]
    assert ops[top["name"]]["self_us"] == pytest.approx(top["self_time_us"], rel=0.01)


def test_a_profile_runs_report_reads_its_deep_window_trace_through_the_same_analysis(profile_run, tmp_path):
    """A CPU run's own trace has no GPU activity, and says so; with a GPU trace in traces/ (the V100's,
    standing in for a GPU run's window) the run's report shows the same figures as the trace report."""
    cpu = make_report(profile_run)
    assert cpu.gpu_time is None and "no GPU activity" in cpu.missing["gpu_time"]
    run = tmp_path / "run"
    shutil.copytree(profile_run, run)
    for old in (run / "traces").glob("*"):
        old.unlink()
    shutil.copy(V100, run / "traces" / "rank0.json.gz")
    gpu = make_report(run).gpu_time
    assert gpu is not None
    assert gpu.ranks[0].idle_pct == analyse_traces(V100).ranks[0].idle_pct


def _profile_options() -> set[str]:
    """Every option ``autotune profile`` takes."""
    import argparse

    from autotune.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {s for a in sub.choices["profile"]._actions for s in a.option_strings}


def test_a_run_without_a_trace_names_the_option_that_left_it_out(tmp_path):
    """The reason the report gives names an option autotune profile has (it said --no-deep)."""
    import re

    import torch

    import autotune as api
    from autotune.report.trace_report import run_gpu_time

    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with api.profile(run_dir=tmp_path / "run", quiet=True, deep_profile=False):
        for _ in range(6):
            loss = model(torch.randn(4, 8)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    section, why = run_gpu_time(tmp_path / "run")
    assert section is None and why is not None
    named = re.findall(r"(?<![\w-])--[a-z][a-z-]*", why)
    assert named and set(named) <= _profile_options(), why
