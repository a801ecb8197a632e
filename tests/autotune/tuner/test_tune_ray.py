"""``autotune tune --executor ray``: trials as Ray tasks, on a local cluster and on one started apart.

A cluster of this machine stands in for a real one: ``ray start --head`` with custom resources in
place of GPUs. Trials overlap as the cluster's resources allow, their directories come back to the
study (shipped as archives, or written to the storage every node sees), and the study finds the
same best as one that runs its trials one at a time (``test_tune_cli.py``).
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
UNMODIFIED = str(ROOT / "tests" / "scripts" / "train_unmodified.py")
# batch sizes far apart: the best (128, about 4x the samples/s of 12 here) stands out of the noise
# of trials sharing two cores
SPACE = """
[space.batch_size]
type = "choice"
choices = [8, 12, 128]
arg = "--batch-size={value}"
"""
FAST = ["--trial-steps", "12", "--warmup-steps", "2", "--min-measured-steps", "5", "--trial-timeout", "120",
        "--confirm-rounds", "0", "--searcher", "grid"]  # fmt: skip
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def tune(tmp_path: Path, *args: str, env: dict[str, str] = ENV) -> list[dict]:
    (tmp_path / "space.toml").write_text(SPACE)
    run_dir = tmp_path / "study"
    cmd = [sys.executable, "-m", "autotune", "tune", "--space", str(tmp_path / "space.toml"),
           "--run-dir", str(run_dir), *FAST, *args, UNMODIFIED]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["best"]["params"] == {"batch_size": 128}  # as with one trial at a time
    return summary["trials"]


def overlaps(trials: list[dict]) -> int:
    spans = sorted((t["started_at"], t["ended_at"]) for t in trials)
    return sum(1 for a, b in itertools.pairwise(spans) if b[0] < a[1])


def test_trials_run_as_tasks_of_a_local_cluster_and_their_directories_come_back(tmp_path):
    # no OMP_NUM_THREADS: the study fits each trial's threads to the CPUs its Ray task asks for
    env = {k: v for k, v in ENV.items() if k != "OMP_NUM_THREADS"}
    trials = tune(tmp_path, "--trials", "4", "--executor", "ray", env=env)
    searched = [t for t in trials if not t["baseline"]]
    assert len(searched) == 3 and all(t["status"] == "ok" and t["executor"] == "ray" for t in searched)
    assert overlaps(searched) >= 1  # the 2 CPUs of the local cluster: two trials at a time
    # each trial one of the cluster's CPUs and one thread (before: every trial both cores' threads,
    # two at once on 2 cores, and the study slowed 10-60x); the baseline ran on Ray too
    assert {t["threads_per_rank"] for t in trials} == {1}
    assert trials[0]["executor"] == "ray"
    for t in searched:  # shipped back: the trial's own profile, read where the study keeps it
        trial_dir = tmp_path / "study" / t["run_dir"]
        assert json.loads((trial_dir / "summary.json").read_text())["measured_steps"] >= 5
        assert (trial_dir / "run.db").exists() and (trial_dir / "trial.log").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_cluster_started_apart_places_trials_by_a_custom_resource_and_writes_to_shared_storage(tmp_path):
    port = _free_port()
    ray = [sys.executable, "-m", "ray.scripts.scripts"]
    start = [*ray, "start", "--head", "--port", str(port), "--node-ip-address", "127.0.0.1"]
    start += ["--num-cpus", "2", "--resources", json.dumps({"fake_gpu": 2})]
    start += ["--include-dashboard=false", "--disable-usage-stats"]
    subprocess.run(start, capture_output=True, text=True, env=ENV, timeout=120, check=True)
    try:
        trials = tune(
            tmp_path, "--trials", "4", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}",
            "--ray-resource", "fake_gpu", "--ray-storage", "shared",
        )  # fmt: skip
    finally:
        subprocess.run([*ray, "stop", "--force"], capture_output=True, env=ENV, timeout=120, check=False)
    searched = [t for t in trials if not t["baseline"]]
    assert all(t["status"] == "ok" and t["devices"] == "fake_gpu:1" for t in searched)
    assert overlaps(searched) >= 1  # 2 fake GPUs: two of the three at once
    assert all((tmp_path / "study" / t["run_dir"] / "run.db").exists() for t in searched)


def test_an_address_where_no_cluster_answers_is_one_line_and_exit_2(tmp_path):
    cmd = [sys.executable, "-m", "autotune", "tune", "--executor", "ray", "--ray-address",
           f"127.0.0.1:{_free_port()}", "--run-dir", str(tmp_path / "s"), UNMODIFIED]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=60, check=False)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "no Ray cluster answers at 127.0.0.1:" in out.stderr.strip().splitlines()[-1]


def test_kill_9_with_ray_tasks_in_flight_then_resume_runs_them_again_under_their_ids(tmp_path):
    import signal
    import sqlite3
    import time

    (tmp_path / "space.toml").write_text(SPACE)
    run_dir = tmp_path / "study"
    slow = ["--trial-steps", "300", "--warmup-steps", "2", "--stable-within", "0", "--trial-timeout", "120",
            "--confirm-rounds", "0", "--searcher", "grid"]  # fmt: skip
    cmd = [sys.executable, "-m", "autotune", "tune", "--space", str(tmp_path / "space.toml")]
    cmd += ["--trials", "4", "--executor", "ray", "--run-dir", str(run_dir), *slow, UNMODIFIED]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def claims() -> dict[int, dict]:
        with sqlite3.connect(run_dir / "run.db") as conn:
            rows = conn.execute("SELECT id, record FROM claims").fetchall()
            ended = {i for (i,) in conn.execute("SELECT id FROM trials").fetchall()}
        return {i: json.loads(r) for i, r in rows if i not in ended}

    try:
        end = time.monotonic() + 180
        while time.monotonic() < end:  # two trials claimed and running as Ray tasks
            try:
                if len(claims()) >= 2:
                    break
            except sqlite3.Error:
                pass  # not created yet
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        time.sleep(3)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    in_flight = claims()
    assert len(in_flight) == 2 and all(c["executor"] == "ray" for c in in_flight.values())
    resume = [sys.executable, "-m", "autotune", "tune", "--resume", "--run-dir", str(run_dir)]
    out = subprocess.run(
        [*resume, "--trial-steps", "12"], capture_output=True, text=True, env=ENV, timeout=600, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    trials = json.loads((run_dir / "summary.json").read_text())["trials"]
    assert [t["id"] for t in trials] == [0, 1, 2, 3]  # none lost, none twice
    for trial_id, claim in in_flight.items():  # run again under their ids, to their end
        # ok, or "busy" when other processes held the cores it needed (measured, not compared)
        assert trials[trial_id]["params"] == claim["params"] and trials[trial_id]["status"] in ("ok", "busy")
