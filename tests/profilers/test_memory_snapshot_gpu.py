"""``autotune profile --memory-snapshot`` on a real GPU: the snapshot's peak, its sites, and an OOM explained.

Runs wherever a CUDA device is present (skipped otherwise; AUTOTUNE_REQUIRE_GPU=1 makes a missing
GPU a failure). The CPU tests of the same analysis read snapshots recorded this way (tests/data).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from profilers.traces.snapshot import analyse_snapshot, read_snapshot

pytestmark = pytest.mark.gpu

SCRIPT = Path(__file__).parents[1] / "scripts" / "memory_mlp.py"


def _profile(run_dir, *script_args):
    cmd = [sys.executable, "-m", "autotune", "profile", "--run-dir", str(run_dir), "--quiet",
           "--memory-snapshot", str(SCRIPT), *script_args]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return done, json.loads((run_dir / "summary.json").read_text())


def test_snapshot_peak_is_the_allocators_and_names_the_scripts_lines(tmp_path):
    done, summary = _profile(tmp_path / "run", "--width", "2048", "--layers", "4", "--steps", "12")
    assert done.returncode == 0, done.stderr
    assert summary["memory_snapshot_files"] == ["memory/rank0.pickle"]
    a = analyse_snapshot(read_snapshot(tmp_path / "run" / "memory" / "rank0.pickle"))
    assert a.trace_entries > 0
    # the replayed peak is the allocator's own peak over the run (the window holds whole AdamW steps)
    assert a.peak_allocated_bytes == pytest.approx(summary["memory"]["cuda_peak_allocated_bytes"], rel=0.05)
    params = 4 * (2048 * 2048 + 2048)
    assert a.peak_allocated_bytes >= 16 * params * 0.95  # weights, gradients, two AdamW moments
    assert a.reserved_at_peak_bytes >= a.peak_allocated_bytes
    assert any("memory_mlp.py" in s.where for s in a.sites)


def test_oom_snapshot_says_what_was_asked_and_what_fits(tmp_path):
    batch, width = 4 * 2**20, 2048  # one activation is 32 GiB: a few of them pass 141 GiB
    done, summary = _profile(tmp_path / "run", "--batch", str(batch), "--width", str(width), "--steps", "2")
    assert done.returncode != 0
    assert summary["outcome"] == "no_steps"  # the first forward failed: no step was completed
    assert summary["error"]["type"] == "OutOfMemoryError"
    assert summary["error"]["step"] == 1
    assert "memory/rank0-oom.pickle" in summary["memory_snapshot_files"]
    a = analyse_snapshot(read_snapshot(tmp_path / "run" / "memory" / "rank0-oom.pickle"))
    assert a.oom is not None
    assert a.oom.requested_bytes == batch * width * 4
    assert a.oom.shortfall_bytes > 0
    assert a.oom.allocated_bytes + a.oom.requested_bytes > a.oom.capacity_bytes
    assert any("micro-batch" in fix for fix in a.oom.fixes)
