"""The run directory's contract: one reader (snapshots, types, errors) and one summarizer.

The profiler's summary and the report's summary of a killed run come from the same records through
the same code, so they cannot differ; and the summary covers every sample in run.db, not the
recorder's in-memory tail.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time

import pytest
import torch
from torch import nn

import autotune
from profilers.contract.reader import RunStoreError, Snapshot, read_sample_records, read_steps
from profilers.contract.records import DeviceSample, StepRecord
from profilers.contract.rundir import load_run
from profilers.contract.schema import SCHEMA_VERSION, STORE_NAME, SUMMARY_NAME
from profilers.runtime import recorder as recorder_module
from profilers.runtime.backends import libnvml
from profilers.runtime.store import RunStore
from tests.fake_nvml import make_fake_pynvml


def step(n: int, rank: int = 0) -> StepRecord:
    return StepRecord(n, rank, n * 10**9, 10**7, 1, 2, 3, 4, 10**7 - 10, 8, None, "measured")


def test_a_snapshot_reads_every_table_as_of_one_instant(tmp_path):
    path = tmp_path / STORE_NAME
    writer = RunStore(path)
    writer.add_steps([step(n) for n in range(1, 6)])
    with Snapshot(path) as snap:
        assert len(snap.steps()) == 5
        writer.add_steps([step(n) for n in range(6, 9)])  # the writer goes on meanwhile
        writer.add_samples([DeviceSample(t_ns=1, device_index=0, kind="host", rss_bytes=5)])
        assert len(snap.steps()) == 5 and snap.samples()[2] == []  # still the same instant
        assert snap.last_step(0) == 5
    with Snapshot(path) as later:
        assert len(later.steps()) == 8 and len(later.samples()[2]) == 1
        assert [s.step for s in later.steps(0, after=5)] == [6, 7, 8]
        assert [s.step for s in later.steps(0, last=2)] == [7, 8]
    writer.close()


def test_samples_read_back_with_their_types(tmp_path):
    """The samples table stores numbers as REAL: integers (indexes, bit masks) come back as ints."""
    path = tmp_path / STORE_NAME
    writer = RunStore(path)
    sample = DeviceSample(
        t_ns=1_764_000_000_000_000_000, device_index=3, kind="gpu", gpu_util_pct=87.5, throttle_reasons=4
    )
    writer.add_samples([sample])
    writer.close()
    ranks, (back,) = read_sample_records(path)
    assert ranks == [0]
    assert (back.device_index, back.throttle_reasons, back.gpu_util_pct) == (3, 4, 87.5)
    assert type(back.device_index) is int and type(back.throttle_reasons) is int
    assert back.power_mw is None


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: p.write_bytes(b"not a database" * 100), "corrupt or unreadable run store"),
        (lambda p: _set_schema(p, SCHEMA_VERSION + 1), rf"newer gpu-autotune \(schema {SCHEMA_VERSION + 1};"),
        (lambda p: None, "no run store here"),
    ],
)
def test_what_cannot_be_read_is_one_line(tmp_path, damage, message):
    path = tmp_path / STORE_NAME
    damage(path)
    with pytest.raises(RunStoreError, match=message) as info:
        read_steps(path)
    assert "\n" not in str(info.value)


def _set_schema(path, schema):
    RunStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (json.dumps(schema),))
    conn.commit()
    conn.close()


def train(steps: int, min_seconds: float = 0.0) -> None:
    """``steps`` steps, and more until ``min_seconds`` have passed."""
    torch.manual_seed(0)
    model = nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64)
    end = time.monotonic() + min_seconds
    done = 0
    while done < steps or time.monotonic() < end:
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        done += 1


@pytest.fixture
def fake_gpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml(n_devices=1, names=["NVIDIA H100 80GB HBM3"]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    libnvml.reset()


def test_the_summary_covers_every_sample_in_run_db_not_the_in_memory_tail(tmp_path, monkeypatch, fake_gpu):
    """The recorder keeps only its last N samples in memory (200,000 in real runs, 4 here, GPU and
    host rows together): the summary's GPU energy and host figures come from every row in run.db.
    The fake GPU's energy counter rises 25 J per reading, so the run's energy is 25 J x (readings -
    1), exactly."""
    in_memory = 4
    monkeypatch.setattr(recorder_module, "MAX_SAMPLES_IN_MEMORY", in_memory)
    with autotune.profile(run_dir=tmp_path / "run", backend="nvml", quiet=True, sample_hz=100) as prof:
        train(60, min_seconds=1.5)  # ~150 readings at 100 Hz; 18 seen beside a busy test suite
    _, samples = read_sample_records(tmp_path / "run" / STORE_NAME)
    readings = [s for s in samples if s.kind == "gpu"]
    assert len(readings) > 2 * in_memory  # far more than the memory holds
    gpu = prof.summary["gpu"][0]
    assert gpu["run_energy_j"] == pytest.approx(25.0 * (len(readings) - 1))
    host = [s for s in samples if s.kind == "host"]
    assert prof.summary["host"]["rss_peak_bytes"] == max(s.rss_bytes for s in host)


def test_a_killed_runs_summary_is_the_profilers_own_for_the_same_records(tmp_path, fake_gpu):
    """summary.json deleted (as if the run were killed before writing it): the report rebuilds it
    from run.db with the profiler's own summarizer, so every figure the records give is equal."""
    with autotune.profile(run_dir=tmp_path / "run", backend="nvml", quiet=True, sample_hz=50) as prof:
        train(40)
    written = prof.summary
    (tmp_path / "run" / SUMMARY_NAME).unlink()
    rebuilt = load_run(tmp_path / "run").summary
    assert rebuilt["stop_reason"] == "killed"
    assert written["load"] is not None and written["load"]["samples"] >= 1
    keys = ("steps", "measured_steps", "step_time_s", "throughput", "phases", "gpu", "host", "load", "loss")
    for key in keys:
        assert rebuilt[key] == written[key], key


@pytest.mark.slow
def test_a_killed_run_still_says_which_parameters_it_ran_with(tmp_path):
    """params_used goes to run.db as the code reads it (not into summary.json afterwards only)."""
    import os
    import subprocess

    script = tmp_path / "killed.py"
    script.write_text(
        "import os, signal, time\n"
        "import torch\n"
        "import autotune\n"
        "lr = autotune.param('lr', 0.05)\n"
        "model = torch.nn.Linear(8, 8)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=lr)\n"
        "end = time.monotonic() + 2.5\n"
        "while time.monotonic() < end:  # past the recorder's 1 s flush\n"
        "    loss = model(torch.randn(4, 8)).sum()\n"
        "    opt.zero_grad(); loss.backward(); opt.step()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    run_dir = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "autotune", "profile", "--run-dir", str(run_dir), "--quiet", str(script)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0  # killed
    assert not (run_dir / SUMMARY_NAME).exists()
    assert load_run(run_dir).summary["params_used"] == {"lr": 0.05}


def test_a_runs_state_has_one_definition():
    from profilers.contract.schema import RUN_STATES, run_state

    within = 30.0
    cases = {
        "finished": run_state(finished=True, alive=False, running_within_s=within),
        "stopped": run_state(finished=False, alive=False, running_within_s=within),
        "waiting": run_state(finished=False, has_data=False, running_within_s=within),
        "running": run_state(finished=False, alive=True, running_within_s=within),
        "unfinished": run_state(finished=False, idle_s=31.0, running_within_s=within),
    }
    assert all(state == name for name, state in cases.items()) and set(cases) == set(RUN_STATES)
    assert run_state(finished=False, idle_s=29.0, running_within_s=within) == "running"  # another host
    assert run_state(finished=True, stopped=True, running_within_s=within) == "stopped"  # study stopped early


def test_a_reader_mid_read_when_the_run_ends_leaves_no_data_in_the_wal(tmp_path):
    # The dashboard polls a running run; if its read transaction is open at the instant the
    # profiler closes the store, SQLite cannot remove the WAL, and no read-only reader ever will:
    # the run's last rows would live in run.db-wal only (a copied run.db would lose them).
    import threading

    from profilers.contract.reader import open_readonly

    path = tmp_path / STORE_NAME
    store = RunStore(path)
    store.add_steps([step(n) for n in range(1, 41)])
    reader = open_readonly(path)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM steps").fetchone() == (40,)
    release = threading.Timer(0.3, reader.close)  # the poll ends a moment after the close began
    release.start()
    store.close()
    release.join()
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    # run.db alone holds every row: opened ignoring any WAL
    alone = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro&immutable=1", uri=True)
    assert alone.execute("SELECT count(*) FROM steps").fetchone() == (40,)
    alone.close()
