"""Kineto traces read into the window analysis: real GPU traces (A100, V100, MI250) and a live one.

The GPU traces are real recordings by others (tests/data/gpu_traces/NOTICE.md). Expected figures
are counted here from the raw JSON, independently of the reader.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch
from torch import nn

from profilers.deep import window_stats
from profilers.kineto import TraceError, device_properties, profiler_steps, read_trace, trace_events

TRACES = Path(__file__).resolve().parent.parent / "data" / "gpu_traces"


def raw_events(name: str) -> list[dict]:
    with gzip.open(TRACES / name / "rank-0.json.gz") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def window(name: str) -> dict:
    events = trace_events(read_trace(TRACES / name / "rank-0.json.gz"))
    return window_stats(events, max(1, len(profiler_steps(events))), cuda=True)


@pytest.mark.parametrize(
    ("name", "annotations"), [("a100_ddp2", 30), ("v100_single", 15), ("mi250_single", 2)]
)
def test_gpu_user_annotations_of_real_traces_are_not_counted_as_kernels(name, annotations):
    """record_function ranges projected on the GPU span whole phases: as kernels they would inflate
    kernel time and busy share (issue 11, defect 3). Counted on real traces, not constructed ones."""
    raw = raw_events(name)
    assert sum(e["cat"] == "gpu_user_annotation" for e in raw) == annotations
    kernels = [e for e in raw if e["cat"] == "kernel" and not e["name"].startswith("ncclKernel")]
    stats = window(name)
    assert stats["kernels"] == len(kernels)
    assert stats["kernel_time_us"] == pytest.approx(sum(e["dur"] for e in kernels), rel=1e-9)
    # the busy time is the union of the kernels: never more than their sum, nor than the window
    assert stats["kernel_busy_us"] <= stats["kernel_time_us"] * (1 + 1e-12)
    assert stats["kernel_busy_us"] <= stats["wall_us"]


def test_the_a100_ddp_trace_exposes_most_of_its_nccl_time_and_idles():
    """HTA's own description of this trace: DDP over NCCL, a mostly idle GPU."""
    raw = raw_events("a100_ddp2")
    nccl = [e for e in raw if e["cat"] == "kernel" and e["name"].startswith("ncclKernel")]
    stats = window("a100_ddp2")
    assert stats["collective_source"] == "device_kernels"
    assert stats["collective_calls"] == len(nccl) == 21
    assert (
        0
        < stats["collective_exposed_us"]
        <= stats["collective_time_us"]
        <= sum(e["dur"] for e in nccl) + 1e-6
    )
    assert stats["kernel_busy_us"] / stats["wall_us"] < 0.25  # mostly idle
    assert stats["steps"] == 3


def test_the_v100_trace_is_a_busy_gpu():
    stats = window("v100_single")
    assert stats["steps"] == 5
    assert stats["kernel_busy_us"] / stats["wall_us"] > 0.9


def test_device_properties_name_the_gpu():
    names = {
        n: device_properties(read_trace(TRACES / n / "rank-0.json.gz"))[0]["name"]
        for n in ("a100_ddp2", "v100_single")
    }
    assert names == {"a100_ddp2": "NVIDIA A100-PG509-200", "v100_single": "Tesla V100-SXM2-32GB"}


def test_a_live_trace_reads_back_as_torch_s_own_events(tmp_path):
    """Self times from the trace's nesting equal torch's self_cpu_time_total, wall time too."""
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 64)
    path = tmp_path / "trace.json"
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=3, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for _ in range(5):
            loss = model(x).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
    live = window_stats(prof.events(), 3, cuda=False)
    events = trace_events(read_trace(path))
    from_file = window_stats(events, len(profiler_steps(events)), cuda=False)
    assert from_file["steps"] == 3
    assert from_file["wall_us"] == pytest.approx(live["wall_us"], rel=1e-6)
    assert from_file["cpu_op_self_us"] == pytest.approx(live["cpu_op_self_us"], rel=1e-3)


def test_nested_self_times_on_a_constructed_trace(tmp_path):
    trace = {
        "traceEvents": [
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "ProfilerStep#1",
                "pid": 1,
                "tid": 1,
                "ts": 0,
                "dur": 100,
            },
            {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 10, "dur": 50},
            {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 20, "dur": 30},
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": 40,
                "dur": 5,
            },
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::relu",
                "pid": 1,
                "tid": 2,
                "ts": 20,
                "dur": 40,
            },  # other thread
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 45, "dur": 20},
            {"ph": "i", "cat": "cpu_instant_event", "name": "x", "pid": 1, "tid": 1, "ts": 5},
        ]
    }
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    events = {e.name: e for e in trace_events(read_trace(path))}
    assert set(events) == {
        "ProfilerStep#1",
        "aten::linear",
        "aten::addmm",
        "cudaLaunchKernel",
        "aten::relu",
        "gemm",
    }
    assert events["ProfilerStep#1"].self_cpu_time_total == 50
    assert events["aten::linear"].self_cpu_time_total == 20
    assert events["aten::addmm"].self_cpu_time_total == 25
    assert events["aten::relu"].self_cpu_time_total == 40
    assert events["gemm"].device_type.name == "CUDA" and events["gemm"].self_cpu_time_total == 0
    assert events["ProfilerStep#1"].is_user_annotation and not events["aten::linear"].is_user_annotation


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read it"),
        (b"\x1f\x8b\x08\x00truncated", "damaged or truncated gzip"),
        (b"<html>", "not JSON"),
        (b'{"schemaVersion": 1}', "without traceEvents"),
        (b"[1, 2]", "without traceEvents"),
    ],
)
def test_what_is_not_a_trace_is_one_clear_error(tmp_path, content, message):
    path = tmp_path / "trace.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(TraceError, match=message) as info:
        read_trace(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)
