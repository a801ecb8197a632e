"""``autotune demo`` end to end: profile a demo model, then a short tuning study of real trials."""

import json
import os
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_demo_profiles_then_tunes_and_prints_the_best(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "autotune", "demo", "--model", "gpt", "--steps", "8", "--tune-trials", "3",
         "--confirm-rounds", "1", "--runs-root", str(tmp_path)],
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    [study] = tmp_path.glob("*-demo-tune-gpt")
    summary = json.loads((study / "summary.json").read_text())
    # one decision: "best" only when the verdict says to apply it (one round measures once: never)
    label = "Best" if summary["verdict"]["action"] == "apply" else "Highest in the search"
    assert f"{label} (trial" in out.stderr and f"demo-tune: {label.lower()}" in out.stdout
    assert summary["trials_run"] == 3 and summary["best"] is not None
    # the best (unless it is the baseline) measured again against the baseline once
    assert len(summary["confirmations"]) == (0 if summary["best"]["id"] == 0 else 2)
    baseline = summary["baseline"]
    assert baseline["params"] == {} and baseline["status"] == "ok"
    used = baseline["params_used"]
    split = (used["micro_batch"], used["grad_accum"], used["precision"], used["layout"])
    assert split == (2, 8, "fp32", "single")
    ran = [t for t in summary["trials"] if t["status"] != "skipped"]
    assert len(ran) == 3 and all(t["params_used"]["global_batch"] == 16 for t in ran if t["params_used"])
    [profiled] = tmp_path.glob("*-demo-gpt")
    assert json.loads((profiled / "summary.json").read_text())["steps"] == 8
