"""A real loop accumulating 20 micro-batches per optimizer step, profiled without autotune.step()."""

import json
from pathlib import Path

import pytest

from tests.profile_run import profile_script

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "loop_accumulate.py"


@pytest.mark.slow
@pytest.mark.parametrize("accum", [20, 40])
def test_each_optimizer_step_is_one_step_with_every_micro_batch(tmp_path, accum):
    args = ("--steps", "12", "--accum", str(accum), "--micro", "4")
    run_dir = profile_script(tmp_path / "run", SCRIPT, *args, timeout=180)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["step_mode"] == "optimizer"
    assert summary["steps"] == 12  # one per optimizer step, not one per backward pass
    rate = summary["throughput"]["samples_per_s"]
    assert rate * summary["step_time_s"]["mean"] == pytest.approx(accum * 4, rel=0.02)  # samples/step
    # FLOPs of a whole step, every micro-batch of 4 through Linear(32, 64) -> Linear(64, 4): the
    # forward, the weight gradients of both layers (as much again) and the second layer's input
    # gradient (the first layer's input needs none)
    forward = 2 * (32 * 64 + 64 * 4)
    per_sample = forward + forward + 2 * 64 * 4
    assert summary["flops_per_step"] == 4 * accum * per_sample
