"""End to end: step budgets and the per-step loss through the real ``autotune profile`` CLI.

The script (tests/scripts/loop_loss.py) logs the loss of each step it finished, flushed at once,
so a run that a budget stopped still shows what the loop itself computed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from profilers.contract.reader import read_steps

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "scripts" / "loop_loss.py"


def profile(
    tmp: Path, options: list[str], script_args: list[str]
) -> tuple[subprocess.CompletedProcess[str], Path]:
    run_dir = tmp / "run"
    env = dict(os.environ, OMP_NUM_THREADS="1", AUTOTUNE_TEST_LOSSES=str(tmp / "losses.jsonl"))
    cmd = [sys.executable, "-m", "autotune", "profile", "--run-dir", str(run_dir), *options, str(SCRIPT)]
    proc = subprocess.run(
        [*cmd, *script_args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=180, check=False
    )
    return proc, run_dir


def summary_of(run_dir: Path) -> dict[str, Any]:
    def refuse(token: str) -> None:
        raise ValueError(f"summary.json holds {token}")

    return json.loads((run_dir / "summary.json").read_text(), parse_constant=refuse)


def own_losses(tmp: Path) -> list[float | None]:
    return [json.loads(line)["loss"] for line in (tmp / "losses.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_stable_within_stops_a_steady_script_early(tmp_path):
    # A ~0.5 ms step varies by about 100% on a shared 2-core machine: a loose FRAC stops it in
    # tens of steps; a tight one (0.05) would need over a thousand.
    options = ["--quiet", "--no-deep-profile", "--stable-within", "0.3", "--max-steps", "2000"]
    proc, run_dir = profile(tmp_path, options, ["--steps", "5000"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = summary_of(run_dir)
    assert s["stop_reason"] == "stable"
    assert s["stopped_by_budget"] is True
    assert s["measured_steps"] >= 8
    assert s["steps"] < 2000
    own = own_losses(tmp_path)
    assert len(own) == s["steps"]  # the script finished exactly the steps recorded, then stopped
    assert s["loss"]["per_step"] == pytest.approx(own, rel=1e-6)
    assert [r.loss for r in read_steps(run_dir / "run.db")] == pytest.approx(own, rel=1e-6)


@pytest.mark.slow
def test_a_nan_loss_stops_the_script_at_that_step_with_exit_status_zero(tmp_path):
    options = ["--quiet", "--no-deep-profile", "--no-flops", "--stop-on-non-finite-loss"]
    options += ["--max-steps", "100"]
    proc, run_dir = profile(tmp_path, options, ["--steps", "200", "--nan-at", "12", "--accum", "2"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = summary_of(run_dir)
    assert s["stop_reason"] == "non_finite_loss"
    assert s["steps"] == 12
    assert s["loss"]["first_non_finite_step"] == 12
    assert s["loss"]["non_finite_steps"] == 1
    own = own_losses(tmp_path)
    assert len(own) == 12 and own[-1] is None
    assert s["loss"]["per_step"][-1] is None
    assert s["loss"]["per_step"][:-1] == pytest.approx(own[:-1], rel=1e-6)  # means of 2 micro-batches


@pytest.mark.slow
def test_max_steps_is_a_stop_reason_too(tmp_path):
    options = ["--quiet", "--no-deep-profile", "--no-flops", "--max-steps", "10"]
    proc, run_dir = profile(tmp_path, options, ["--steps", "50"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = summary_of(run_dir)
    assert (s["steps"], s["stop_reason"], s["stopped_by_budget"]) == (10, "max_steps", True)


@pytest.mark.parametrize(
    "option",
    [
        ["--stable-within", "0"],
        ["--stable-within", "1.5"],
        ["--stable-within", "nan"],
        ["--stop-below", "-1"],
        ["--stop-below", "nan"],
        ["--min-measured-steps", "1"],
    ],
)
def test_bad_budget_values_are_one_line_and_status_two(option, tmp_path):
    proc, _ = profile(tmp_path, option, [])
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and option[0] in lines[0], proc.stderr
