"""``--memory-snapshot``'s wiring: when recording starts and when the snapshot is written.

Without a GPU, torch's three CUDA memory-history entry points are replaced by recorders (the real
path runs in tests/profilers/test_memory_snapshot_gpu.py on a GPU). What is checked is ours: the
recording starts when CUDA initialises, before the model's first allocation (on the first real GPU
it started after an out-of-memory error in the first forward, and the snapshot held no history); an
out-of-memory error leaving the region writes ``rank0-oom.pickle``; the profiler window's end
writes ``rank0.pickle``; nothing is recorded once the run is over.
"""

import pickle

import pytest
import torch
from torch import nn

import autotune


@pytest.fixture
def fake_cuda(monkeypatch):
    calls = {"queued": [], "record": [], "dumps": []}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "_lazy_call", lambda fn, **_: calls["queued"].append(fn))

    def record(enabled="all", **kwargs):
        calls["record"].append((enabled, kwargs.get("stacks")))

    def dump(path):
        calls["dumps"].append(path)
        with open(path, "wb") as f:
            pickle.dump({"segments": [], "device_traces": [[]]}, f)

    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", record)
    monkeypatch.setattr(torch.cuda.memory, "_dump_snapshot", dump)
    return calls


def _steps(n):
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(n):
        loss = model(torch.randn(4, 8)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_an_oom_in_the_first_forward_is_recorded_from_cudas_start(tmp_path, fake_cuda):
    run = tmp_path / "run"

    def first_forward_runs_out_of_memory():
        assert len(fake_cuda["queued"]) == 1 and fake_cuda["record"] == []  # CUDA not started by us
        fake_cuda["queued"][0]()  # the script's first CUDA call initialises CUDA
        assert fake_cuda["record"] == [("all", "python")]
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 32.00 GiB")

    prof = autotune.profile(run_dir=run, quiet=True, memory_snapshot=True, count_flops=False)
    with pytest.raises(torch.OutOfMemoryError, match="Tried to allocate"):  # the user's error, unchanged
        prof(first_forward_runs_out_of_memory)()
    assert [p.rsplit("/", 2)[-2:] for p in fake_cuda["dumps"]] == [["memory", "rank0-oom.pickle"]]
    assert fake_cuda["record"][-1] == (None, None)  # recording stopped after the dump
    assert prof.summary["memory_snapshot_files"] == ["memory/rank0-oom.pickle"]
    assert prof.summary["error"]["type"] == "OutOfMemoryError"
    fake_cuda["queued"][0]()  # a later CUDA start in the same process records nothing
    assert len(fake_cuda["record"]) == 2


def test_the_window_end_writes_the_snapshot_and_stops_recording(tmp_path, fake_cuda):
    run = tmp_path / "run"
    with autotune.profile(run_dir=run, quiet=True, memory_snapshot=True, count_flops=False,
                          warmup_steps=1, profile_steps=2) as prof:  # fmt: skip
        fake_cuda["queued"][0]()
        _steps(8)
    assert prof.summary["memory_snapshot_files"] == ["memory/rank0.pickle"]
    assert (run / "memory" / "rank0.pickle").is_file()
    assert fake_cuda["record"] == [("all", "python"), (None, None)]
    assert prof.summary["warnings"] == []


def test_without_cuda_the_run_says_once_that_no_snapshot_was_taken(tmp_path):
    options = {"quiet": True, "memory_snapshot": True, "count_flops": False}
    with autotune.profile(run_dir=tmp_path / "run", **options) as prof:
        _steps(6)
    assert prof.summary["memory_snapshot_files"] == []
    assert [w for w in prof.summary["warnings"] if "--memory-snapshot" in w] == [
        "--memory-snapshot records CUDA memory; this run used no CUDA device, none was saved"
    ]
    assert prof.summary["steps"] == 6
