"""Step budgets under ``torchrun --nproc-per-node 2`` (DDP over gloo, CPU): every rank stops at the same step.

A rank that stopped alone would leave the other waiting in DDP's next all-reduce forever; here the
ranks agree every AGREE_EVERY_STEPS steps, so both stop at the same agreed step and the job ends.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from profilers.contract.reader import read_steps
from profilers.runtime.stopping import AGREE_EVERY_STEPS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "scripts" / "loop_loss.py"


def torchrun(tmp: Path, options: list[str], script_args: list[str]) -> tuple[dict, list]:
    run_dir = tmp / "run"
    env = dict(os.environ, OMP_NUM_THREADS="1", AUTOTUNE_TEST_LOSSES=str(tmp / "losses.jsonl"))
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone",
        "-m", "autotune", "profile", "--quiet", "--no-deep-profile", "--no-flops",
        "--run-dir", str(run_dir), *options, str(SCRIPT), *script_args,
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    return summary, read_steps(run_dir / "run.db")


def steps_of(records: list, rank: int) -> list:
    return [r for r in records if r.rank == rank]


def test_ranks_stop_together_once_every_rank_is_stable(tmp_path):
    options = ["--stable-within", "0.9", "--min-measured-steps", "4", "--max-steps", "400"]
    s, records = torchrun(tmp_path, options, ["--steps", "1000"])
    assert s["stop_reason"] == "stable"
    assert s["steps"] % AGREE_EVERY_STEPS == 0
    assert s["steps"] < 400
    assert len(steps_of(records, 0)) == len(steps_of(records, 1)) == s["steps"]
    assert [r["steps"] for r in s["ranks"]] == [s["steps"]] * 2


def test_a_nan_on_one_rank_stops_every_rank_at_the_next_agreement(tmp_path):
    nan_at = 6  # rank 1 only; its NaN gradients reach rank 0's weights through the all-reduce
    options = ["--stop-on-non-finite-loss", "--max-steps", "100"]
    s, records = torchrun(tmp_path, options, ["--steps", "200", "--nan-at", str(nan_at), "--nan-rank", "1"])
    stop = AGREE_EVERY_STEPS * math.ceil(nan_at / AGREE_EVERY_STEPS)
    assert s["stop_reason"] == "non_finite_loss"
    assert s["steps"] == stop
    rank0, rank1 = steps_of(records, 0), steps_of(records, 1)
    assert len(rank0) == len(rank1) == stop
    assert math.isnan(rank1[nan_at - 1].loss) and math.isfinite(rank1[nan_at - 2].loss)
    assert s["loss"]["first_non_finite_step"] == nan_at + 1  # rank 0's own loss, one step later
    own = [json.loads(line) for line in (tmp_path / "losses.jsonl").read_text().splitlines()]
    # the stop comes inside the last step's optimizer.step(): the script logs every step before it
    assert sorted((o["rank"], o["step"]) for o in own) == [(r, k) for r in (0, 1) for k in range(1, stop)]
