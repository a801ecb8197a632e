"""``autotune compare``: two traces, two runs, a study's baseline and best; injected changes found."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from autotune.compare import compare, side_of, study_sides, trace_side
from profilers.trace_analysis import analyse_traces
from tests.autotune.report.conftest import autotune

TRACES = Path(__file__).resolve().parents[2] / "data" / "gpu_traces"
A100, V100 = TRACES / "a100_ddp2", TRACES / "v100_single"
SGEMM = "volta_sgemm_64x64_nt"


def test_two_real_traces_as_json(tmp_path):
    """The A100 and V100 traces run the same ResNet: every op has the same calls per step on both
    (530 aten::empty), and the A100's NCCL all-reduce is gone on the single V100."""
    out = autotune("compare", str(A100), str(V100), "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    a, b = (analyse_traces(p).ranks[0] for p in (A100, V100))
    step = data["figures"][0]
    assert step["what"] == "step time (median)"
    assert (step["a"], step["b"]) == (a.step_time_s_median, b.step_time_s_median)
    assert step["ratio"] == pytest.approx(b.step_time_s_median / a.step_time_s_median)
    ops = {o["name"]: o for o in data["ops"]}
    assert ops["aten::empty"]["a_calls_per_step"] == ops["aten::empty"]["b_calls_per_step"] == 530
    nccl = next(k for k in data["kernels"] if k["name"].startswith("ncclKernel"))
    row = next(k for k in a.top_kernels if k.name == nccl["name"])
    assert nccl["b_us_per_step"] == 0 and nccl["a_us_per_step"] == pytest.approx(row.total_us / (a.steps - 1))
    assert any("different devices" in n for n in data["notes"])


def test_an_injected_slower_kernel_is_what_changed_most(tmp_path):
    """The V100 trace against a copy whose volta_sgemm_64x64_nt kernels take 3x as long: that kernel
    is the largest change, by exactly twice its time per step; no other kernel changed."""
    with gzip.open(V100 / "rank-0.json.gz") as f:
        doc = json.load(f)
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e["name"] == SGEMM:
            e["dur"] *= 3
    slower = tmp_path / "slower.json.gz"
    with gzip.open(slower, "wt") as f:
        json.dump(doc, f)
    c = compare(trace_side(V100), trace_side(slower))
    top = c.kernels[0]
    assert top.name == SGEMM
    assert top.delta_us_per_step == pytest.approx(2 * top.a_us_per_step, rel=1e-6)
    assert all(abs(k.delta_us_per_step) < 1e-6 for k in c.kernels[1:])
    busy = next(d for d in c.figures if d.what == "GPU busy")
    assert busy.b > busy.a
    ops = next(d for d in c.figures if d.what == "host ops (self time)")
    assert ops.ratio == pytest.approx(1.0)


def test_a_run_against_itself_changes_nothing(profile_run, tmp_path):
    """Two copies of one CPU profile run: every figure's ratio is 1, the ops come from its trace,
    per profiled step, and the verdict says the spreads overlap."""
    copy = tmp_path / "copy"
    shutil.copytree(profile_run, copy)
    a, b = side_of(profile_run), side_of(copy)
    summary = json.loads((profile_run / "summary.json").read_text())
    assert a.step_time_s == summary["step_time_s"]["median"]
    assert a.op_steps == summary["profile_window"]["steps"]
    c = compare(a, b)
    assert all(d.ratio == pytest.approx(1.0) for d in c.figures if d.ratio is not None)
    assert c.ops and all(o.delta_us_per_step == 0 for o in c.ops)
    assert "1.00x faster" in c.verdict and "overlap" in c.verdict
    out = autotune("compare", str(profile_run), str(copy))
    assert out.returncode == 0, out.stderr
    assert "What changed" in out.stdout and "Operators that changed most" in out.stdout


def test_runs_with_different_batches_are_compared_on_throughput():
    """B's step is longer but holds twice the samples: the verdict goes by samples/s and their
    95% intervals, not by the step."""
    from autotune.compare import Side

    a = Side("a", "profile", 0.10, 0.09, 0.11, 30, samples_per_s=100.0, samples_per_s_ci95=(95.0, 105.0))
    b = Side("b", "profile", 0.15, 0.14, 0.16, 30, samples_per_s=133.0, samples_per_s_ci95=(128.0, 138.0))
    verdict = compare(a, b).verdict
    assert verdict.startswith("B trains at 1.33x the throughput of A")
    assert "1.50x slower" in verdict and "95% intervals do not overlap" in verdict
    close = Side("c", "profile", 0.15, 0.14, 0.16, 30, samples_per_s=104.0, samples_per_s_ci95=(99.0, 109.0))
    assert "may be noise" in compare(a, close).verdict


def test_a_study_alone_compares_its_baseline_with_its_best_trial(study_run):
    summary = json.loads((study_run / "summary.json").read_text())
    base, best = study_sides(study_run)
    ids = (summary["baseline"]["id"], summary["best"]["id"])
    assert (base.label, best.label) == (f"trial {ids[0]}", f"trial {ids[1]}")
    assert base.params == summary["baseline"]["params"] and best.params == summary["best"]["params"]
    assert base.kind == best.kind == "trial"
    out = autotune("compare", str(study_run), "--format", "md")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("# Comparison: trial")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no/such/run", "no/such/other"], "no such file or directory"),
        (["{profile}"], "a profile run, not a study"),
        (["{bad}", "{profile}"], "not a torch.profiler trace"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(profile_run, tmp_path, args, message):
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    argv = [a.format(profile=profile_run, bad=bad) for a in args]
    out = autotune("compare", *argv)
    assert out.returncode == 2
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1
