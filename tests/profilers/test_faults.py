"""Every profiler part may fail; the user's training must go on and return its own result."""

import json
import sqlite3

import pytest
import torch
from torch import nn
from torch.optim import optimizer as optim_module

import autotune
from profilers.contract.reader import read_steps
from profilers.runtime import deep, hooks, nvtx_ranges, recorder, store, tracker
from profilers.runtime.backends import host


def train(steps=12):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))
    losses = []
    for _ in range(steps):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


REFERENCE = train()


def boom(*args, **kwargs):
    raise RuntimeError("injected fault")


def disk_full(*args, **kwargs):
    raise sqlite3.OperationalError("database or disk is full")


FAULTS = {
    "sampling backend": (host.HostBackend, "sample", boom),
    "run store": (store.RunStore, "add_steps", disk_full),
    "NVTX ranges": (nvtx_ranges.NvtxRanges, "step_begin", boom),
    "trace export": (deep, "export_trace", boom),
    "deep-profile window": (deep.DeepProfiler, "start", boom),
    "step hooks": (tracker.StepTracker, "begin", boom),
    "recorder thread": (recorder.Recorder, "flush", boom),
}


@pytest.mark.parametrize("part", sorted(FAULTS))
def test_a_faulty_part_is_reported_once_and_training_goes_on(part, tmp_path, monkeypatch, capsys):
    owner, attr, replacement = FAULTS[part]
    monkeypatch.setattr(owner, attr, replacement)
    with autotune.profile(run_dir=tmp_path / "run") as prof:
        losses = train()
    assert losses == REFERENCE  # the training itself is untouched
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("autotune: warning:")]
    assert len(warnings) >= 1
    assert len(warnings) == len(set(warnings))  # each part reported once
    assert prof.summary is not None
    assert any("injected fault" in w or "disk is full" in w for w in prof.summary["warnings"])
    # hooks are gone afterwards whatever happened
    assert not optim_module._global_optimizer_pre_hooks
    assert torch.Tensor.backward.__module__ == "torch._tensor"


def test_hook_fault_stands_the_hooks_down_but_keeps_earlier_steps(tmp_path, monkeypatch, capsys):
    calls = {"n": 0}
    original = tracker.StepTracker.end

    def fail_late(self, code, *more):
        calls["n"] += 1
        if calls["n"] > 20:
            raise RuntimeError("injected fault")
        return original(self, code, *more)

    monkeypatch.setattr(tracker.StepTracker, "end", fail_late)
    with autotune.profile(run_dir=tmp_path / "run") as prof:
        assert train() == REFERENCE
    assert 1 <= prof.summary["steps"] < 12
    assert capsys.readouterr().err.count("step hooks failed") == 1


def test_disk_full_keeps_summary_json(tmp_path, monkeypatch):
    monkeypatch.setattr(store.RunStore, "add_samples", disk_full)
    with autotune.profile(run_dir=tmp_path / "run", quiet=True) as prof:
        train()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 12
    assert prof.summary["steps"] == 12


def test_a_fault_writing_the_ranks_summary_at_the_end_is_in_summary_json_too(tmp_path, monkeypatch):
    """The last write to run.db fails after the summary was built: its warning is still in it."""
    monkeypatch.setattr(store.RunStore, "set_rank", disk_full)
    with autotune.profile(run_dir=tmp_path / "run", quiet=True) as prof:
        assert train() == REFERENCE
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert any(w.startswith("run store failed") for w in summary["warnings"]), summary["warnings"]
    assert prof.summary["warnings"] == summary["warnings"]
    assert prof.figures.warnings == tuple(summary["warnings"])


def test_unwritable_run_directory_still_measures_in_memory(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with autotune.profile(run_dir=blocker / "run") as prof:
        assert train() == REFERENCE
    assert prof.run_dir is None
    assert prof.summary["steps"] == 12
    assert "run directory failed" in capsys.readouterr().err


def test_flop_counter_fault_leaves_flops_null(tmp_path, monkeypatch, capsys):
    from torch.utils import flop_counter

    monkeypatch.setattr(flop_counter.FlopCounterMode, "get_total_flops", boom)
    with autotune.profile(run_dir=tmp_path / "run") as prof:
        assert train() == REFERENCE
    assert prof.summary["flops_per_step"] is None
    assert "FLOP counting failed" in capsys.readouterr().err


def test_summary_fault_is_reported(tmp_path, monkeypatch, capsys):
    from profilers.runtime import session

    monkeypatch.setattr(session, "run_statistics", boom)
    with autotune.profile(run_dir=tmp_path / "run"):
        assert train() == REFERENCE
    assert "summary failed" in capsys.readouterr().err


def test_user_exception_passes_through_and_data_is_saved(tmp_path):
    class UserError(Exception):
        pass

    err = UserError("mine")

    @autotune.profile(run_dir=tmp_path / "run", quiet=True)
    def broken():
        train(10)
        raise err

    with pytest.raises(UserError) as info:
        broken()
    assert info.value is err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 10
    assert len(read_steps(tmp_path / "run" / "run.db")) == 10


def test_keyboard_interrupt_passes_through(tmp_path):
    def interrupted():
        with autotune.profile(run_dir=tmp_path / "run", quiet=True):
            train(8)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted()
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 8


def test_hooks_module_restores_patched_functions(tmp_path):
    before = (torch.Tensor.backward, torch.autograd.backward)
    with autotune.profile(run_dir=tmp_path / "run", quiet=True):
        assert torch.Tensor.backward is not before[0]
    assert (torch.Tensor.backward, torch.autograd.backward) == before
    assert hooks is not None


def test_without_the_recorder_thread_steps_are_built_inline_and_cuda_losses_are_not_read(
    tmp_path, monkeypatch, capsys
):
    """No recorder thread: steps are built on the training thread, where reading a CUDA loss would
    be a host sync each step, so only CPU losses are read there."""
    from types import SimpleNamespace

    from profilers.runtime.session import active_session
    from profilers.runtime.timeline import BWD_B, OPT_E, ClosedStep, Event

    monkeypatch.setattr(recorder.Recorder, "__init__", boom)
    with autotune.profile(run_dir=tmp_path / "run") as prof:
        assert train() == REFERENCE
        session = active_session()
        assert session is not None
    assert "sampling backend failed" in capsys.readouterr().err
    assert prof.summary["steps"] == 12
    assert prof.summary["loss"]["last"] == pytest.approx(REFERENCE[-1], rel=1e-6)  # CPU losses: read
    on_gpu = SimpleNamespace(is_cuda=True, device=SimpleNamespace(type="cuda"))
    monkeypatch.setattr(hooks, "read_losses", boom)  # a read would fail the test
    closed = ClosedStep(13, Event(OPT_E, 0), Event(OPT_E, 1000), [Event(BWD_B, 10, loss=on_gpu)], "optimizer")
    record = session._step_record(closed, None, "measured", cuda_losses=False)
    assert record.loss is None and record.duration_ns == 1000
