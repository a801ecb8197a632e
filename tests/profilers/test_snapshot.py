"""Memory snapshots, constructed in the documented format (torch.cuda.memory._snapshot): the peak,
what held it, fragmentation and an out-of-memory error, through the analysis and the command."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from profilers.contract.lenient import read_records
from profilers.traces.snapshot import (
    NO_PYTHON_FRAME,
    NO_STACKS,
    Frame,
    SnapshotError,
    analyse_snapshot,
    category_of,
    read_snapshot,
)

SNAPSHOTS = Path(__file__).parents[1] / "data" / "memory_snapshots"

MIB = 2**20
ROOT = Path(__file__).resolve().parents[2]
TORCH = "/venv/lib/python3.11/site-packages/torch"
PARAMS = [{"filename": f"{TORCH}/nn/modules/module.py", "line": 1340, "name": "_apply"},
          {"filename": "/home/me/train.py", "line": 10, "name": "main"}]  # fmt: skip
ACTS = [{"filename": f"{TORCH}/nn/modules/linear.py", "line": 125, "name": "forward"},
        {"filename": "/home/me/model.py", "line": 20, "name": "forward"},
        {"filename": f"{TORCH}/nn/modules/module.py", "line": 1750, "name": "_call_impl"}]  # fmt: skip
GRADS = [{"filename": f"{TORCH}/autograd/graph.py", "line": 823, "name": "_engine_run_backward"},
         {"filename": "/home/me/train.py", "line": 30, "name": "main"}]  # fmt: skip
OPT = [{"filename": f"{TORCH}/optim/adam.py", "line": 400, "name": "_single_tensor_adam"},
       {"filename": "/home/me/train.py", "line": 31, "name": "main"}]  # fmt: skip


def alloc(addr: int, mib: int, frames: list) -> dict:
    return {"action": "alloc", "addr": addr, "size": mib * MIB, "stream": 0, "frames": frames}


def free(addr: int, mib: int) -> list[dict]:
    return [{"action": a, "addr": addr, "size": mib * MIB, "stream": 0, "frames": []}
            for a in ("free_requested", "free_completed")]  # fmt: skip


def snapshot(oom: bool = False) -> dict:
    """Params 100 MiB, three activations of 200 MiB (peak 700 MiB), freed after backward's 100 MiB of
    gradients, then Adam's 200 MiB of state; with ``oom``, a 1 GiB request fails at the end."""
    trace = [{"action": "segment_alloc", "addr": 0, "size": 1024 * MIB, "stream": 0, "frames": []},
             alloc(1000, 100, PARAMS)]  # fmt: skip
    trace += [alloc(2000 + i, 200, ACTS) for i in range(3)]
    trace += [alloc(3000, 100, GRADS)]  # 800 MiB: the peak
    for i in range(3):
        trace += free(2000 + i, 200)
    trace += [alloc(4000, 200, OPT)]  # 400 MiB after the step
    if oom:
        trace += [{"action": "oom", "size": 1024 * MIB, "device_free": 50 * MIB, "stream": 0, "frames": ACTS}]
    live = [(1000, 100, PARAMS), (3000, 100, GRADS), (4000, 200, OPT)]
    blocks = [{"address": a, "size": m * MIB, "requested_size": m * MIB, "state": "active_allocated",
               "frames": f} for a, m, f in live]  # fmt: skip
    free_block = {"address": 5000, "size": 624 * MIB, "requested_size": 0, "state": "inactive", "frames": []}
    blocks.append(free_block)
    segment = {"device": 0, "address": 0, "total_size": 1024 * MIB, "stream": 0, "segment_type": "large",
               "allocated_size": 400 * MIB, "active_size": 400 * MIB, "blocks": blocks}  # fmt: skip
    return {"segments": [segment], "device_traces": [trace]}


def test_the_peak_is_found_with_what_held_it():
    a = analyse_snapshot(snapshot())
    assert a.peak_allocated_bytes == 800 * MIB and a.reserved_at_peak_bytes == 1024 * MIB
    assert a.fragmentation_bytes == 224 * MIB and a.largest_free_block_bytes == 624 * MIB
    assert a.live_at_peak == 5 and a.oom is None
    assert a.by_category == {"activations (forward)": 600 * MIB, "parameters (model load)": 100 * MIB,
                             "gradients (backward)": 100 * MIB}  # fmt: skip
    top = a.sites[0]
    assert (top.where, top.bytes, top.allocations) == ("/home/me/model.py:20 in forward", 600 * MIB, 3)


def test_an_oom_says_what_it_lacked_and_which_change_fits():
    a = analyse_snapshot(snapshot(oom=True))
    o = a.oom
    assert o is not None
    # 400 MiB allocated + 1024 requested, against 1024 reserved + 50 free in CUDA: 350 MiB short
    assert (o.allocated_bytes, o.capacity_bytes, o.shortfall_bytes) == (400 * MIB, 1074 * MIB, 350 * MIB)
    # the peak's activations (600 MiB): halving the micro-batch frees 300 (not enough), a quarter 450
    assert o.fixes[0].startswith("micro-batch ÷ 4")
    assert any("checkpointing" in f for f in o.fixes) and o.fixes[-1].startswith("autotune plan")


def test_allocations_older_than_the_recorded_ring_are_counted_from_its_start():
    data = snapshot()
    data["device_traces"][0] = data["device_traces"][0][2:]  # the segment and the parameters fell off
    a = analyse_snapshot(data)
    assert a.peak_allocated_bytes == 800 * MIB  # the 100 MiB of parameters were live all along
    assert any("before the recorded history" in n for n in a.notes)


def test_a_snapshot_without_history_reports_its_own_moment():
    data = snapshot()
    data["device_traces"] = [[]]
    a = analyse_snapshot(data)
    assert a.peak_allocated_bytes == 400 * MIB and a.trace_entries == 0
    assert {s.category for s in a.sites} == {"optimizer state and update", "parameters (model load)",
                                             "gradients (backward)"}  # fmt: skip


def test_a_snapshot_of_only_the_allocator_history_is_analysed_from_it():
    data = snapshot()
    del data["segments"]  # analyse_snapshot takes a snapshot's dict as torch gives it, or a part of one
    a = analyse_snapshot(data)
    assert a.peak_allocated_bytes == 800 * MIB and a.trace_entries > 0


def test_categories_come_from_the_stack():
    def stack(frames):
        return read_records(Frame, frames)

    assert category_of(stack(OPT)) == "optimizer state and update"
    assert category_of(stack(ACTS)) == "activations (forward)"
    assert category_of(stack([{"filename": "/home/me/x.py", "line": 1, "name": "main"}])) == "other"
    assert category_of(()) == "other" and category_of((), stacks_recorded=True) == "gradients (backward)"


def test_a_pickle_that_names_a_class_is_refused_without_running_it(tmp_path):
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps(os.system))
    with pytest.raises(SnapshotError, match="plain data"):
        read_snapshot(path)
    path.write_bytes(b"\x80\x04 not a pickle")
    with pytest.raises(SnapshotError, match="not a memory snapshot"):
        read_snapshot(path)


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autotune", "report", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip


def test_autotune_report_reads_a_snapshot_in_every_format(tmp_path):
    path = tmp_path / "oom.pickle"
    path.write_bytes(pickle.dumps(snapshot(oom=True)))
    md = run(str(path), "--format", "md", "-o", "-", cwd=tmp_path)
    assert md.returncode == 0, md.stderr
    assert "Out of memory on device 0" in md.stdout and "/home/me/model.py:20 in forward" in md.stdout
    assert "350.0 MiB short" in md.stdout or "short by | 350.0 MiB" in md.stdout
    out = run(str(path), "--format", "all", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "oom.report.json").read_text())
    assert doc["kind"] == "memory_snapshot" and doc["oom"]["shortfall_bytes"] == 350 * MIB
    assert (tmp_path / "oom.report.html").read_text().startswith("<!DOCTYPE html>")
    bad = tmp_path / "bad.pickle"
    bad.write_bytes(b"nonsense")
    fails = run(str(bad), cwd=tmp_path)
    assert fails.returncode == 2 and fails.stderr.count("\n") == 1 and "not a memory snapshot" in fails.stderr


# -- snapshots recorded on a real GPU (an H200, by scripts/gpu_check.sh; tests/data/memory_snapshots) --

H200_RUN = SNAPSHOTS / "h200_memory_mlp.pickle.gz"
H200_OOM_STATE = SNAPSHOTS / "h200_oom_no_history.pickle.gz"
#: torch.cuda.max_memory_allocated() of the run that recorded H200_RUN (its summary.json's
#: memory.cuda_peak_allocated_bytes): tests/scripts/memory_mlp.py --width 2048 --layers 4, AdamW.
H200_RUN_PEAK_BYTES = 405_968_896
MLP_PARAM_BYTES = 4 * (2048 * 2048 + 2048) * 4  # four Linear(2048, 2048) in fp32


def test_a_real_snapshots_replayed_peak_is_the_allocators_own():
    a = analyse_snapshot(read_snapshot(H200_RUN))
    assert a.trace_entries == 849
    # the allocator's peak counter and the replay of its history agree to 0.001%
    assert a.peak_allocated_bytes == pytest.approx(H200_RUN_PEAK_BYTES, rel=1e-5)
    # what held the peak adds up to it exactly: allocations made before the history began and freed
    # during it are taken off the "before the recorded history" share
    assert sum(a.by_category.values()) == a.peak_allocated_bytes
    assert sum(s.bytes for s in a.sites) == a.peak_allocated_bytes
    # AdamW's foreach step: two moments and one temporary per parameter, allocated at opt.step()
    assert a.by_category["optimizer state and update"] == 3 * MLP_PARAM_BYTES
    top = a.sites[0]
    assert (top.where, top.category, top.allocations) == (
        "tests/scripts/memory_mlp.py:34 in main", "optimizer state and update", 24)  # fmt: skip
    # the backward's allocations have no Python frame (autograd's C++ thread): gradients, not "other"
    backward = next(s for s in a.sites if s.where == NO_PYTHON_FRAME)
    assert backward.category == "gradients (backward)" and backward.bytes >= MLP_PARAM_BYTES
    # the profiler's own hook frames are not the user's code
    assert not any("profilers/runtime" in s.where for s in a.sites)
    assert a.reserved_at_peak_bytes >= a.peak_allocated_bytes
    assert a.oom is None


def test_a_real_snapshot_without_history_reports_its_moment():
    a = analyse_snapshot(read_snapshot(H200_OOM_STATE))
    assert a.trace_entries == 0 and a.oom is None
    # four 32 GiB activations of a batch of 4,194,304 × 2048 floats, plus the weights: what the
    # CUDA error message said ("128.09 GiB is allocated by PyTorch")
    assert a.peak_allocated_bytes == pytest.approx(128.09 * 2**30, rel=1e-3)
    assert a.live_at_peak == 14
    assert any("no allocator history" in n for n in a.notes)
    assert a.sites[0].where == NO_STACKS
