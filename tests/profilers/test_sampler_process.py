"""Sampling in a process of its own: the training process keeps one thread of ours, which samples
nothing once the sampler process has taken over; a sampler process that dies hands sampling back.

Real loops, a real spawned process, a real run store; the host backend is what this machine samples.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import autotune
from profilers.runtime.backends.replay import ReplayBackend
from profilers.runtime.session import active_session

HZ = 20
RECORDING = Path(__file__).resolve().parents[1] / "data" / "nvml_recording.jsonl.gz"


def train_for(seconds: float, each_step: Any = None) -> int:
    """A small real training loop for ``seconds``; ``each_step()`` runs after every step."""
    model = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 128), torch.randn(32, 1)
    steps, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
        if each_step is not None:
            each_step()
    return steps


def wait_for_handover(timeout_s: float = 30.0) -> Any:
    """The active session's recorder once its sampler process samples (training meanwhile)."""
    session = active_session()
    assert session is not None and session._recorder is not None
    recorder = session._recorder
    end = time.monotonic() + timeout_s
    while not recorder._in_child and time.monotonic() < end:
        train_for(0.05)
    assert recorder._in_child, recorder.sampling_notes + recorder.sampling_faults
    return recorder


def samples_of(run_dir: Path, kind: str) -> list[tuple[int, float | None]]:
    with sqlite3.connect(run_dir / "run.db") as conn:
        query = "SELECT t_ns, process_cpu_pct FROM samples WHERE kind = ? ORDER BY t_ns"
        return conn.execute(query, (kind,)).fetchall()


def test_the_sampler_process_samples_the_training_process_which_keeps_one_quiet_thread(tmp_path):
    run_dir = tmp_path / "run"
    threads_seen: set[str] = set()
    before = {t.name for t in threading.enumerate()}  # others' (a tqdm monitor of an earlier test)
    with autotune.profile(run_dir=run_dir, quiet=True, sample_hz=HZ, deep_profile=False) as prof:
        recorder = wait_for_handover()
        handed_ns = time.time_ns()
        here: list[int] = []  # when this process sampled
        for backend in recorder.backends:  # any sampling left in this process would call these
            original = backend.sample
            backend.sample = lambda original=original: (here.append(time.time_ns()), original())[1]
        child_pid = recorder.child.pid
        train_for(2.0, lambda: threads_seen.update(t.name for t in threading.enumerate()))
    summary = prof.summary
    assert threads_seen - before == {"autotune-recorder"}  # nothing else of ours runs beside training
    assert here == []  # the training process sampled nothing once the child had taken over
    assert child_pid != os.getpid()
    assert summary["sampling"] == {"where": {"host": "sampler process"}, "notes": []}
    assert summary["warnings"] == []
    rows = [r for r in samples_of(run_dir, "host") if r[0] > handed_ns]
    # 2 s at 20 Hz: 40 readings on a quiet machine; a busy one may delay some, never double them
    assert 20 <= len(rows) <= 2 * HZ + 4, len(rows)
    # The child reads the training process's CPU time, not its own: a busy loop uses most of a core
    cpu = [pct for _, pct in rows if pct is not None]
    assert cpu and max(cpu) > 30, cpu
    assert summary["host"]["samples"] >= 10  # the measured steps' share of them


def test_a_sampler_process_that_dies_hands_sampling_back_and_the_summary_says_so(tmp_path):
    run_dir = tmp_path / "run"
    with autotune.profile(run_dir=run_dir, quiet=True, sample_hz=HZ, deep_profile=False) as prof:
        recorder = wait_for_handover()
        os.kill(recorder.child.pid, signal.SIGKILL)
        killed_ns = time.time_ns()
        steps = train_for(2.0)
    summary = prof.summary
    assert steps > 0 and summary["outcome"] == "finished"
    assert summary["sampling"]["where"] == {"host": "training process"}
    died = [w for w in summary["warnings"] if "sampler process ended (exit code -9)" in w]
    assert len(died) == 1, summary["warnings"]
    assert died[0] in summary["sampling"]["notes"]
    # Sampled in the training process from then on: the recorder thread's readings after the kill
    # (a loaded machine leaves the recorder thread few turns at the interpreter: a CI run saw 2 a
    # second at 20 Hz, where the sampler process kept its rate)
    after = [t for t, _ in samples_of(run_dir, "host") if t > killed_ns + 200_000_000]
    assert len(after) >= 2, len(after)


def test_a_backend_the_sampler_process_cannot_rebuild_is_sampled_where_it_was_made(tmp_path, monkeypatch):
    """A backend object made in the training process without a spec (a library's own, a test's) is
    sampled there; the host backend still goes to the sampler process."""
    replay = ReplayBackend(str(RECORDING))  # made here, not by get_backend: it has no spec
    monkeypatch.setattr("profilers.runtime.session.get_backend", lambda spec=None: replay)
    run_dir = tmp_path / "run"
    with autotune.profile(run_dir=run_dir, quiet=True, sample_hz=HZ, deep_profile=False) as prof:
        wait_for_handover()
        train_for(1.0)
    where = prof.summary["sampling"]["where"]
    assert where == {"replay": "training process", "host": "sampler process"}
    assert len(samples_of(run_dir, "gpu")) >= 2  # its GPU, from here (the recorder thread's turns)
    assert len(samples_of(run_dir, "host")) >= 10  # 1 s and more at 20 Hz, from the sampler process


@pytest.mark.parametrize("setting", ["thread"])
def test_autotune_sampler_thread_keeps_sampling_in_the_training_process(tmp_path, monkeypatch, setting):
    monkeypatch.setenv("AUTOTUNE_SAMPLER", setting)
    with autotune.profile(run_dir=tmp_path / "run", quiet=True, sample_hz=HZ, deep_profile=False) as prof:
        session = active_session()
        assert session is not None and session._recorder is not None
        assert session._recorder.child is None
        train_for(1.0)
    assert prof.summary["sampling"] == {"where": {"host": "training process"}, "notes": []}
    # 1 s at 20 Hz: 20 readings on a quiet machine; on a loaded one the recorder thread waits for
    # the interpreter the training holds (a CI run saw 4): the readings at the start and the end
    assert len(samples_of(tmp_path / "run", "host")) >= 2


def test_the_gpus_kept_at_the_handover_are_the_only_ones_the_sampler_process_writes(tmp_path):
    """A replayed GPU goes to the sampler process like NVML would; the job's GPUs, known before the
    handover (none here), ride with its go-ahead: it never writes another GPU's rows."""
    run_dir = tmp_path / "run"
    with autotune.profile(
        run_dir=run_dir, quiet=True, sample_hz=HZ, deep_profile=False, backend=f"replay:{RECORDING}"
    ) as prof:
        session = active_session()
        assert session is not None and session._recorder is not None
        session._recorder.keep_gpus([], None)  # the job's GPUs: none of the recording's
        recorder = wait_for_handover()
        handed_ns = time.time_ns()
        train_for(1.0)
    assert prof.summary["sampling"]["where"] == {"replay": "sampler process", "host": "sampler process"}
    assert recorder.child is None  # stopped with the session
    # The GPU rows are the training process's readings before the job's GPUs were known: one at
    # the start, one by the recorder thread's first round at most (a replayed reading's time is the
    # recording's, rebased, so no time tells them apart); the sampler process wrote none of them
    assert len(samples_of(run_dir, "gpu")) <= 2
    assert len([t for t, _ in samples_of(run_dir, "host") if t > handed_ns]) >= 10


def test_a_sampler_process_that_exits_before_taking_over_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr("profilers.runtime.sampler_process._CHILD_START", "import sys; sys.exit(3)")
    with autotune.profile(run_dir=tmp_path / "run", quiet=True, sample_hz=HZ, deep_profile=False) as prof:
        train_for(1.0)
    summary = prof.summary
    assert summary["sampling"]["where"] == {"host": "training process"}
    said = [w for w in summary["warnings"] if "exited (exit code 3) before taking over" in w]
    assert len(said) == 1, summary["warnings"]
    assert len(samples_of(tmp_path / "run", "host")) >= 2  # sampled here instead (at least at both ends)


def test_the_training_process_does_not_count_its_sampler_process_as_its_own_cpu(tmp_path):
    with autotune.profile(run_dir=tmp_path / "run", quiet=True, sample_hz=HZ, deep_profile=False):
        recorder = wait_for_handover()
        pid = recorder.child.pid
        hosts = [b for b in recorder.backends if b.name == "host"]
        assert hosts and all(pid in b._children._exclude for b in hosts)


def test_another_process_cpu_time_counts_its_threads_that_ended(tmp_path):
    """What the sampler process reads of the training process: every thread's CPU time, the ended
    threads' too (a DataLoader's pin-memory thread, short helper threads)."""
    import subprocess
    import sys

    from profilers.runtime.backends.host import process_cpu_s

    burner = (
        "import sys, threading, time\n"
        "def burn(s):\n"
        "    t = time.thread_time()\n"
        "    while time.thread_time() - t < s: pass\n"
        "for _ in range(6):\n"
        "    th = threading.Thread(target=burn, args=(0.1,)); th.start(); th.join()\n"
        "print('done', flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", burner], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "done"
        assert process_cpu_s(proc.pid) >= 0.6  # six ended threads of 0.1 s of CPU each
    finally:
        proc.communicate("")


HUNG_CHILD = """
import json, sys, time
print(json.dumps({"ready": {"took": ["host"], "left": {}}}), flush=True)
sys.stdin.readline()  # the go-ahead: then it hangs, as on a stuck driver call, writing nothing
time.sleep(120)
"""


def test_a_sampler_process_that_stops_answering_is_ended_and_sampling_comes_back(tmp_path, monkeypatch):
    monkeypatch.setattr("profilers.runtime.sampler_process._CHILD_START", HUNG_CHILD)
    monkeypatch.setattr("profilers.runtime.recorder.SILENCE_TIMEOUT_S", 1.0)
    run_dir = tmp_path / "run"
    with autotune.profile(run_dir=run_dir, quiet=True, sample_hz=HZ, deep_profile=False) as prof:
        recorder = wait_for_handover()
        pid = recorder.child.pid
        handed_ns = time.time_ns()
        train_for(4.0)  # silent past the timeout: taken back at the recorder's next wake-up
    summary = prof.summary
    assert summary["sampling"]["where"] == {"host": "training process"}
    said = [w for w in summary["warnings"] if "stopped answering" in w]
    assert len(said) == 1, summary["warnings"]
    with pytest.raises(ProcessLookupError):  # ended (and reaped), not left behind
        os.kill(pid, 0)
    assert len([t for t, _ in samples_of(run_dir, "host") if t > handed_ns]) >= 2  # sampled here again
