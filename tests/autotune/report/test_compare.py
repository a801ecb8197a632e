"""``autotune compare``: two traces, two runs, a study's baseline and best; injected changes found."""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from autotune.compare import compare, side_of, study_sides, trace_side
from profilers.traces.analysis import analyse_traces
from tests.autotune.report.conftest import UNMODIFIED, autotune

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


@pytest.mark.slow
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
    per profiled step, and the verdict says the interval of B / A holds 1 (the loads are the same
    readings, so alike unless the machine had no idle CPU: then the load is named)."""
    copy = tmp_path / "copy"
    shutil.copytree(profile_run, copy)
    a, b = side_of(profile_run), side_of(copy)
    summary = json.loads((profile_run / "summary.json").read_text())
    assert a.step_time_s == summary["step_time_s"]["median"]
    assert a.op_steps == summary["profile_window"]["steps"]
    c = compare(a, b)
    assert all(d.ratio == pytest.approx(1.0) for d in c.figures if d.ratio is not None)
    assert c.ops and all(o.delta_us_per_step == 0 for o in c.ops)
    assert "1.00x faster" in c.verdict
    assert c.evidence is not None and c.evidence.ratio == 1.0 and c.evidence.same_run is None
    if c.evidence.problem is None:
        assert "(1.00x" not in c.verdict and "holds 1, so this may be noise" in c.verdict
    else:
        assert c.evidence.load_problem and "no claim is made beyond the noise" in c.verdict
    out = autotune("compare", str(profile_run), str(copy))
    assert out.returncode == 0, out.stderr
    assert "What changed" in out.stdout and "Operators that changed most" in out.stdout


def test_a_profile_s_own_trace_marks_its_steps_and_compares_per_step(profile_run):
    """The deep window marks each of its steps as torch.profiler's schedule does (ProfilerStep#N, N
    the training's step numbers, which the trace's file name carries): the trace alone gives the
    steps, their times and per-step figures: 3 aten::addmm a step, the script's 3 Linear layers."""
    trace = next((profile_run / "traces").glob("*.json.gz"))
    first, last = map(int, re.search(r"steps(\d+)-(\d+)", trace.name).groups())
    with gzip.open(trace) as f:
        names = {e.get("name", "") for e in json.load(f)["traceEvents"]}
    assert sorted(n for n in names if n.startswith("ProfilerStep")) == sorted(
        f"ProfilerStep#{n}" for n in range(first, last + 1)
    )
    window = json.loads((profile_run / "summary.json").read_text())["profile_window"]
    side = trace_side(profile_run / "traces")
    assert side.steps == side.op_steps == last - first + 1 == window["steps"]
    assert side.step_low_s <= side.step_time_s <= side.step_high_s
    assert side.gpu is not None
    addmm = next(o for o in side.gpu.top_ops if o.name == "aten::addmm")
    assert addmm.count == 3 * side.op_steps
    c = compare(side, side_of(profile_run))
    assert c.per_step and not any("marks no steps" in n for n in c.notes)
    assert next(d for d in c.figures if d.what == "host ops (self time)").unit == "µs/step"


def test_a_trace_without_step_ranges_is_compared_whole_and_says_so(tmp_path):
    """torch.profiler without a schedule writes no ProfilerStep ranges, so a trace's steps are
    unknown: both sides' figures are then over their whole trace (the V100 trace's 530 aten::empty
    a step, times its steps), labelled so, and a note says which trace marks no steps."""
    with gzip.open(V100 / "rank-0.json.gz") as f:
        doc = json.load(f)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name")).startswith("ProfilerStep#")]
    unmarked = tmp_path / "unmarked.json.gz"
    with gzip.open(unmarked, "wt") as f:
        json.dump(doc, f)
    marked = trace_side(V100)
    c = compare(marked, trace_side(unmarked))
    assert not c.per_step
    assert [n for n in c.notes if "marks no steps" in n] == [
        "B's trace marks no steps (no ProfilerStep# ranges: torch.profiler writes them only with a "
        "schedule): its GPU and operator figures are for the whole trace, not per step"
    ]
    assert all(o.a_calls_per_step == o.b_calls_per_step for o in c.ops)
    assert marked.gpu is not None
    empty = next(o for o in marked.gpu.top_ops if o.name == "aten::empty")
    assert empty.count == 530 * marked.gpu.steps
    ops = next(d for d in c.figures if d.what == "host ops (self time)")
    assert ops.unit == "µs/trace" and ops.a == pytest.approx(marked.gpu.cpu_op_self_us)
    out = autotune("compare", str(V100), str(unmarked))
    assert out.returncode == 0, out.stderr
    assert "A per trace" in out.stdout and "/trace" in out.stdout


def test_runs_with_different_batches_are_compared_on_throughput():
    """B's step is longer but holds twice the samples: the verdict goes by samples/s and the 95%
    interval of B / A with the spread between processes (the gate's), not by the step."""
    from autotune.compare import Side
    from profilers.contract.load import load_profile

    quiet = load_profile([0.1] * 10, [1.0] * 10, 2)
    a = Side("a", "profile", 0.10, 0.09, 0.11, 30, samples_per_s=100.0, samples_per_s_ci95=(95.0, 105.0),
             load_profile=quiet)  # fmt: skip
    b = Side("b", "profile", 0.15, 0.14, 0.16, 30, samples_per_s=133.0, samples_per_s_ci95=(128.0, 138.0),
             load_profile=quiet)  # fmt: skip
    c = compare(a, b)
    assert c.verdict.startswith("B trains at 1.33x the throughput of A")
    assert c.evidence is not None and c.evidence.ratio_ci95 is not None
    low, high = c.evidence.ratio_ci95
    assert "1.50x slower" in c.verdict and f"({low:.2f}–{high:.2f}x) lies wholly above 1" in c.verdict
    assert 1 < low < 1.33 < high  # the between-process spread: wider than the two runs' intervals say
    close = Side("c", "profile", 0.15, 0.14, 0.16, 30, samples_per_s=104.0, samples_per_s_ci95=(99.0, 109.0),
                 load_profile=quiet)  # fmt: skip
    assert "holds 1, so this may be noise" in compare(a, close).verdict
    unrecorded = compare(dataclasses.replace(a, load_profile=None), b).verdict
    assert "the machine's load during A was not recorded reading by reading, so no claim" in unrecorded


def test_a_difference_the_load_explains_is_never_called_beyond_the_noise():
    """B's throughput interval lies wholly below A's, but B ran beside 1.4 more cores of other
    processes on a 2-core machine: the verdict names the load and claims nothing beyond the noise.
    With the load the other way round (B slower despite less load) the loads still differ, so, as
    the gate (undecided), the verdict claims nothing either."""
    from autotune.compare import Side
    from profilers.contract.load import RunLoad

    quiet, loaded = RunLoad(0.1, 2), RunLoad(1.5, 2)
    a = Side("a", "profile", 0.10, 0.09, 0.11, 30, samples_per_s=100.0, samples_per_s_ci95=(95.0, 105.0),
             load=quiet)  # fmt: skip
    b = Side("b", "profile", 0.15, 0.14, 0.16, 30, samples_per_s=60.0, samples_per_s_ci95=(57.0, 63.0),
             load=loaded)  # fmt: skip
    c = compare(a, b)
    assert "B ran with other processes busy on 1.5 of 2 cores against 0.1 for A" in c.verdict
    assert "can explain the difference" in c.verdict and "do not overlap" not in c.verdict
    row = next(d for d in c.figures if d.what == "other processes' CPU")
    assert (row.a, row.b, row.unit) == (0.1, 1.5, "cores")
    faster_despite_load = compare(b, a).verdict  # now B is the quiet, faster side: A had the load
    assert "A ran with other processes busy on 1.5" in faster_despite_load
    swapped = Side("s", "profile", 0.15, 0.14, 0.16, 30, samples_per_s=60.0, samples_per_s_ci95=(57.0, 63.0),
                   load=quiet)  # fmt: skip
    held = compare(Side("h", "profile", 0.10, 0.09, 0.11, 30, samples_per_s=100.0,
                        samples_per_s_ci95=(95.0, 105.0), load=loaded), swapped).verdict  # fmt: skip
    assert "but the machine's load during A and B was not recorded reading by reading" in held
    from profilers.contract.load import load_profile

    with_readings = compare(
        Side("h", "profile", 0.10, 0.09, 0.11, 30, samples_per_s=100.0, samples_per_s_ci95=(95.0, 105.0),
             load=loaded, load_profile=load_profile([1.5] * 10, [0.3] * 10, 2)),
        dataclasses.replace(swapped, load_profile=load_profile([0.1] * 10, [1.0] * 10, 2)), 5,
    )  # fmt: skip
    assert (
        "but loads differ: other processes took 1.5 cores on average during A and 0.1"
        in with_readings.verdict
    )
    assert "lies wholly" not in with_readings.verdict
    assert with_readings.gate is not None and with_readings.gate.exit_code == 3


@pytest.mark.slow
def test_the_same_script_run_twice_once_beside_busy_processes(tmp_path):
    """The issue's case: one script profiled twice, the second time beside three busy loops. Each
    run records the load it ran under (the three loops show as other processes' CPU, the run's own
    thread does not), and compare names the load instead of calling the difference significant."""
    from tests.hogs import busy_loops
    from tests.profile_run import profile_script

    args = ("--steps", "300")
    a = profile_script(tmp_path / "a", UNMODIFIED, *args)
    with busy_loops(3):
        b = profile_script(tmp_path / "b", UNMODIFIED, *args)
    loads = [json.loads((run / "summary.json").read_text())["load"] for run in (a, b)]
    # the run trains on one thread (OMP_NUM_THREADS=1): its own CPU is about one core or less.
    # Beside three busy loops the 2 cores are never idle, and fair shares leave the run about half a
    # core (its sampler thread adds a little), so other processes take more than one core during B
    # whatever else the machine runs; A's load is the machine's own (a neighbour's load can come
    # and go between the two runs, so B is not compared with A here: the verdict below is)
    for load in loads:
        assert load["machine_cores"] >= 1 and load["samples"] >= 1
        # above 0 only: beside other sessions' work as well the run got 0.084 of a core once
        assert 0 < load["own_cores"] < 1.3
    assert loads[1]["busy_cores"] > 0.9 * loads[1]["machine_cores"], loads
    assert loads[1]["other_cores"] > 1.0 and loads[1]["own_cores"] < 1.0, loads
    out = autotune("compare", str(a), str(b))
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "other processes' CPU" in text
    c = compare(side_of(a), side_of(b))
    b_slower = (c.b.samples_per_s or 0) < (c.a.samples_per_s or 0)
    from profilers.contract.load import compare_loads

    if compare_loads(c.a.load, c.b.load).explains(b_slower):
        assert "can explain the difference" in c.verdict and "do not overlap" not in c.verdict
    else:  # under a heavy load beside the test, both runs may share it: the loads are then named
        assert "load" in c.verdict


@pytest.mark.slow  # the study_run fixture runs a real study
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
