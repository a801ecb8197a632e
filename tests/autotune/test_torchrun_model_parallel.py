"""Model parallelism under ``torchrun --nproc-per-node 2`` (gloo, CPU): profiled right, and tuned.

``tests/scripts/mp_train.py`` runs DTensor tensor parallelism and ``torch.distributed.pipelining``
(1F1B) with torchtitan's ``--parallelism.*_degree`` flags. Under pipeline parallelism a stage's
next forward waits for the stage before it: a step budget must stop every rank at its optimizer
step, or the last stage waits for a first stage that has gone. The ranks of one replica train on
the same samples: the job's throughput counts them once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from profilers.contract.reader import read_steps

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "scripts" / "mp_train.py"


def test_a_pipeline_stops_at_its_step_budget_and_counts_each_sample_once(tmp_path):
    run_dir = tmp_path / "run"
    env = dict(os.environ, OMP_NUM_THREADS="1", AUTOTUNE_PARAM_PIPELINE_PARALLEL="2")
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone",
        "-m", "autotune", "profile", "--quiet", "--no-deep-profile", "--no-flops",
        "--run-dir", str(run_dir), "--max-steps", "12", "--stable-within", "0.01",
        str(SCRIPT), "--knobs", "--steps", "1000",
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=240, check=False
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "degrees tp=1 pp=2 dp=1" in proc.stdout
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] in ("max_steps", "stable")
    records = read_steps(run_dir / "run.db")
    assert (
        len([r for r in records if r.rank == 0])
        == len([r for r in records if r.rank == 1])
        == summary["steps"]
    )
    throughput = summary["throughput"]
    assert throughput["ranks_per_replica"] == 2
    # both stages see all 16 samples of a step: the job's rate is their mean, not their sum
    per_rank = throughput["per_rank_samples_per_s"]
    assert throughput["samples_per_s"] == pytest.approx(sum(per_rank) / 2)


def test_the_torchtitan_preset_tunes_tensor_and_pipeline_degrees_over_the_ranks(tmp_path):
    run_dir = tmp_path / "study"
    cmd = [
        sys.executable, "-m", "autotune", "tune", "--preset", "torchtitan", "--nproc-per-node", "2",
        "--searcher", "grid", "--trials", "9", "--trial-steps", "16", "--confirm-rounds", "0",
        "--run-dir", str(run_dir), str(SCRIPT), "--steps", "1000",
    ]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    trials = json.loads((run_dir / "summary.json").read_text())["trials"]
    by_degrees = {}
    for t in trials[1:]:
        p = t["params"]
        by_degrees.setdefault((p["tensor_parallel"], p["pipeline_parallel"]), []).append(t)
    assert set(by_degrees) == {(1, 1), (1, 2), (2, 1), (2, 2)}
    # a mesh of 4 ranks a replica cannot exist on 2 ranks: skipped without running
    for t in by_degrees[(2, 2)]:
        assert t["status"] == "skipped" and "does not divide the 2 rank(s)" in t["error"]
    for degrees in ((1, 2), (2, 1)):
        ran = [t for t in by_degrees[degrees] if t["status"] in ("ok", "diverged")]
        assert ran, by_degrees[degrees]
        for t in ran:
            assert t["world_size"] == 2
            trial_dir = run_dir / t["run_dir"]
            log = (trial_dir / "trial.log").read_text()
            assert f"degrees tp={degrees[0]} pp={degrees[1]} dp=1" in log
            throughput = json.loads((trial_dir / "summary.json").read_text())["throughput"]
            # the preset's degrees reach the profiler: one replica of 2 ranks, counted once
            assert throughput["ranks_per_replica"] == 2
            assert throughput["samples_per_s"] == pytest.approx(sum(throughput["per_rank_samples_per_s"]) / 2)
