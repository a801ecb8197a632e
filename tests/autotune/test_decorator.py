"""In-process: ``@autotune.profile``, ``with autotune.profile(...)`` and ``autotune.step()``.

Small real training loops in this process; the hooks the session installs must be gone after
each profiled region, whatever happened inside it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn.modules import module as nn_module
from torch.optim import optimizer as optim_module
from torch.utils.data import DataLoader, TensorDataset, dataloader

import autotune
from profilers.contract.reader import read_steps
from profilers.runtime.session import active_session

#: Options that keep a profiled region cheap: no sampling thread work, no FLOP or trace steps.
LIGHT: dict[str, Any] = {"quiet": True, "sample_hz": 0, "count_flops": False, "deep_profile": False}


def torch_entry_points() -> dict[str, Any]:
    """Everything the hooks patch or register into, to compare before and after a region."""
    scaler = getattr(torch.amp, "GradScaler", None)
    return {
        "Tensor.backward": torch.Tensor.__dict__["backward"],
        "autograd.backward": torch.autograd.backward,
        "DataLoader next": dataloader._BaseDataLoaderIter.__dict__["__next__"],
        "GradScaler.step": None if scaler is None else scaler.__dict__.get("step"),
        "optimizer pre hooks": dict(optim_module._global_optimizer_pre_hooks),
        "optimizer post hooks": dict(optim_module._global_optimizer_post_hooks),
        "forward pre hooks": dict(nn_module._global_forward_pre_hooks),
        "forward hooks": dict(nn_module._global_forward_hooks),
    }


@pytest.fixture(autouse=True)
def _clean_torch() -> Iterator[None]:
    """One thread; no profile active before or after; every torch entry point as it was."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    assert active_session() is None
    before = torch_entry_points()
    yield
    leaked = active_session()
    if leaked is not None:  # do not let one broken test poison the others
        leaked.stop()
    torch.set_num_threads(threads)
    assert leaked is None, "a profile session was left active"
    assert torch_entry_points() == before


class Loop:
    """A small model and optimizer; ``run(n)`` trains ``n`` optimizer steps of batch ``batch``."""

    def __init__(self, batch: int = 8) -> None:
        torch.manual_seed(0)
        self.batch = batch
        self.model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)

    def iteration(self, x: torch.Tensor | None = None) -> float:
        x = torch.randn(self.batch, 16) if x is None else x
        loss = self.model(x).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return float(loss.detach())

    def run(self, n: int) -> float:
        loss = 0.0
        for _ in range(n):
            loss = self.iteration()
        return loss

    def backward_only(self, n: int) -> None:
        """``n`` backward passes with a hand-written update (no optimizer)."""
        for _ in range(n):
            loss = self.model(torch.randn(self.batch, 16)).pow(2).mean()
            loss.backward()
            with torch.no_grad():
                for p in self.model.parameters():
                    p -= 0.01 * p.grad
                    p.grad = None


def summary_file(run_dir: Path | None) -> dict[str, Any]:
    assert run_dir is not None
    return json.loads((run_dir / "summary.json").read_text())


# -- the decorator -----------------------------------------------------------------------------
def test_bare_decorator_profiles_each_call_into_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    loop = Loop()

    @autotune.profile
    def train_bare(steps):
        loop.run(steps)
        return "done"

    assert train_bare.__name__ == "train_bare"
    assert isinstance(train_bare.profile, autotune.Profile)
    assert train_bare(10) == "done"
    prof = train_bare.profile
    assert prof.run_dir is not None
    assert prof.run_dir.parent.resolve() == (tmp_path / "runs").resolve()
    assert prof.run_dir.name.endswith("-train_bare")
    s = summary_file(prof.run_dir)
    assert s == json.loads(json.dumps(prof.summary, default=str))
    assert s["name"] == "train_bare"
    # defaults: 3 warm-up, 1 FLOP-counting, 3 trace steps and 1 settle step
    assert s["steps"] == 10
    assert s["measured_steps"] == 2
    assert s["flops_per_step"] > 0
    assert s["trace_files"]
    assert s["step_mode"] == "optimizer"
    assert s["throughput"]["samples_per_s"] > 0
    assert sum(s["phases"].values()) == pytest.approx(1.0, abs=1e-6)
    assert len(read_steps(prof.run_dir / "run.db")) == 10


def test_decorator_with_options(tmp_path):
    loop = Loop(batch=6)

    @autotune.profile(run_dir=tmp_path / "opts", name="my-run", warmup_steps=1, **LIGHT)
    def train(steps):
        loop.run(steps)

    assert train(5) is None
    s = summary_file(tmp_path / "opts")
    assert s["name"] == "my-run"
    assert s["steps"] == 5
    assert s["measured_steps"] == 4
    assert [r.kind for r in read_steps(tmp_path / "opts" / "run.db")] == ["warmup"] + ["measured"] * 4
    assert s["flops_per_step"] is None
    assert s["trace_files"] == []
    assert s["throughput"]["samples_per_s"] == pytest.approx(6 / s["step_time_s"]["mean"], rel=1e-6)


def test_decorated_functions_return_value_and_arguments_pass_through(tmp_path):
    loop = Loop()
    marker = object()

    @autotune.profile(run_dir=tmp_path / "ret", **LIGHT)
    def train(steps, *, tag):
        loop.run(steps)
        return tag, steps

    tag, steps = train(2, tag=marker)
    assert tag is marker
    assert steps == 2


def test_each_call_of_a_decorated_function_is_its_own_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    loop = Loop()

    @autotune.profile(**LIGHT)
    def train(steps):
        loop.run(steps)

    train(2)
    first = train.profile.run_dir
    train(4)
    second = train.profile.run_dir
    assert first != second
    assert summary_file(first)["steps"] == 2
    assert summary_file(second)["steps"] == 4


def test_bad_options_fail_at_decoration():
    with pytest.raises(TypeError, match=r"autotune\.profile"):
        autotune.profile(no_such_option=1)
    with pytest.raises(ValueError, match="warmup_steps"):
        autotune.profile(warmup_steps=-1)
    with pytest.raises(ValueError, match="sample_hz"):
        autotune.profile(sample_hz=-1)


# -- the context manager -----------------------------------------------------------------------
def test_context_manager(tmp_path):
    loop = Loop(batch=4)
    with autotune.profile(run_dir=tmp_path / "ctx", name="ctx", warmup_steps=0, **LIGHT) as prof:
        assert isinstance(prof, autotune.Profile)
        assert active_session() is not None
        loop.run(4)
        assert prof.summary is None  # written when the region ends
    assert active_session() is None
    assert prof.run_dir == tmp_path / "ctx"
    assert prof.summary is not None
    assert prof.summary["steps"] == 4
    assert prof.summary["measured_steps"] == 4
    assert summary_file(prof.run_dir)["steps"] == 4


def test_dataloader_phase_and_samples(tmp_path):
    loop = Loop()
    data = TensorDataset(torch.randn(40, 16))
    with autotune.profile(run_dir=tmp_path / "dl", warmup_steps=0, **LIGHT) as prof:
        for (x,) in DataLoader(data, batch_size=10):
            loop.iteration(x)
    s = prof.summary
    assert s is not None
    assert s["steps"] == 4
    assert [r.samples for r in read_steps(tmp_path / "dl" / "run.db")] == [10] * 4
    assert s["phases"]["data"] > 0


# -- autotune.step() ---------------------------------------------------------------------------
def test_explicit_steps_with_an_optimizer(tmp_path):
    loop = Loop()
    with autotune.profile(run_dir=tmp_path / "x", warmup_steps=0, **LIGHT) as prof:
        for _ in range(5):
            loop.iteration()
            autotune.step()
    assert prof.summary is not None
    assert prof.summary["steps"] == 5
    assert prof.summary["step_mode"] == "explicit"


def test_explicit_steps_group_several_optimizer_steps(tmp_path):
    loop = Loop(batch=3)
    with autotune.profile(run_dir=tmp_path / "x", warmup_steps=0, **LIGHT) as prof:
        autotune.step()  # the first call only opens step 1
        for _ in range(4):
            loop.iteration()
            loop.iteration()
            autotune.step()
    assert prof.summary is not None
    assert prof.summary["steps"] == 4
    steps = read_steps(tmp_path / "x" / "run.db")
    assert [r.samples for r in steps] == [6] * 4


def test_explicit_steps_with_two_optimizers_count_the_calls(tmp_path):
    loop_d, loop_g = Loop(), Loop()
    with autotune.profile(run_dir=tmp_path / "gan", warmup_steps=0, **LIGHT) as prof:
        for _ in range(5):
            loop_d.iteration()
            loop_g.iteration()
            autotune.step()
    assert prof.summary is not None
    assert prof.summary["steps"] == 5


def test_explicit_steps_without_an_optimizer(tmp_path):
    loop = Loop()
    with autotune.profile(run_dir=tmp_path / "x", warmup_steps=0, **LIGHT) as prof:
        for _ in range(6):
            loop.backward_only(1)
            autotune.step()
    assert prof.summary is not None
    assert prof.summary["steps"] == 6
    assert prof.summary["step_mode"] == "explicit"


def test_step_outside_a_profile_is_a_no_op():
    autotune.step()
    assert active_session() is None


def test_backward_passes_are_steps_when_no_optimizer_steps(tmp_path):
    """Fewer backward passes than the tracker's decision threshold: decided at the end."""
    loop = Loop()
    with autotune.profile(run_dir=tmp_path / "b", warmup_steps=1, **LIGHT) as prof:
        loop.backward_only(7)
    assert prof.summary is not None
    assert prof.summary["steps"] == 7
    assert prof.summary["measured_steps"] == 6
    assert prof.summary["step_mode"] == "backward"
    assert len(read_steps(tmp_path / "b" / "run.db")) == 7


# -- errors and interrupts ---------------------------------------------------------------------
class UserError(Exception):
    pass


def test_user_exception_propagates_unchanged_and_the_run_is_saved(tmp_path):
    loop = Loop()
    error = UserError("user bug 42")

    @autotune.profile(run_dir=tmp_path / "err", warmup_steps=1, **LIGHT)
    def train():
        loop.run(3)
        raise error

    with pytest.raises(UserError) as info:
        train()
    assert info.value is error
    assert info.value.__cause__ is None and info.value.__context__ is None
    s = summary_file(tmp_path / "err")
    assert s["steps"] == 3
    assert len(read_steps(tmp_path / "err" / "run.db")) == 3


def test_exception_in_context_manager_propagates(tmp_path):
    loop = Loop()
    error = ZeroDivisionError("inside")
    prof = autotune.profile(run_dir=tmp_path / "c", **LIGHT)

    def region():
        with prof:
            loop.run(2)
            raise error

    with pytest.raises(ZeroDivisionError) as info:
        region()
    assert info.value is error
    assert prof.summary is not None
    assert prof.summary["steps"] == 2


def test_keyboard_interrupt_passes_through_with_data_saved(tmp_path):
    loop = Loop()

    @autotune.profile(run_dir=tmp_path / "ki", warmup_steps=0, **LIGHT)
    def train():
        loop.run(4)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train()
    assert summary_file(tmp_path / "ki")["steps"] == 4
    assert len(read_steps(tmp_path / "ki" / "run.db")) == 4


# -- hooks are removed -------------------------------------------------------------------------
def test_hooks_are_removed_after_the_call_and_later_training_is_not_recorded(tmp_path):
    original_backward = torch.Tensor.backward
    loop = Loop()

    @autotune.profile(run_dir=tmp_path / "h", warmup_steps=0, **LIGHT)
    def train():
        assert torch.Tensor.backward is not original_backward  # installed inside
        assert optim_module._global_optimizer_pre_hooks
        loop.run(3)

    train()
    assert torch.Tensor.backward is original_backward
    assert not optim_module._global_optimizer_pre_hooks
    assert not optim_module._global_optimizer_post_hooks
    assert active_session() is None
    for module in loop.model.modules():  # the root-module hooks of narrowing are gone too
        assert not module._forward_pre_hooks
        assert not module._forward_hooks
    db_before = read_steps(tmp_path / "h" / "run.db")
    summary_before = summary_file(tmp_path / "h")
    loop.run(5)
    loop.backward_only(3)
    autotune.step()
    assert read_steps(tmp_path / "h" / "run.db") == db_before
    assert summary_file(tmp_path / "h") == summary_before
    assert summary_before["steps"] == 3


def test_hooks_are_removed_after_an_error(tmp_path):
    loop = Loop()

    def region():
        with autotune.profile(run_dir=tmp_path / "e", **LIGHT):
            loop.run(1)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        region()
    # the autouse fixture checks every patched entry point; spot-check one here too
    assert not optim_module._global_optimizer_pre_hooks


# -- nesting -----------------------------------------------------------------------------------
def test_nested_profile_is_harmless(tmp_path, capsys):
    loop = Loop()
    with autotune.profile(run_dir=tmp_path / "outer", warmup_steps=0, **LIGHT) as outer:
        loop.run(2)
        with autotune.profile(run_dir=tmp_path / "inner", **LIGHT) as inner:
            loop.run(3)
        assert active_session() is not None  # the outer one goes on
        loop.run(1)
    assert "already active" in capsys.readouterr().err
    assert inner.summary is None
    assert inner.run_dir is None
    assert not (tmp_path / "inner").exists()
    assert outer.summary is not None
    assert outer.summary["steps"] == 6


def test_nested_decorated_function_is_harmless(tmp_path):
    loop = Loop()

    @autotune.profile(run_dir=tmp_path / "inner", **LIGHT)
    def inner():
        loop.run(2)
        return "inner"

    @autotune.profile(run_dir=tmp_path / "outer", warmup_steps=0, **LIGHT)
    def outer():
        loop.run(1)
        return inner()

    assert outer() == "inner"
    assert summary_file(tmp_path / "outer")["steps"] == 3
    assert not (tmp_path / "inner").exists()


def test_recursive_decorated_function_is_harmless(tmp_path):
    loop = Loop()

    @autotune.profile(run_dir=tmp_path / "rec", warmup_steps=0, **LIGHT)
    def train(depth):
        loop.run(2)
        if depth:
            train(depth - 1)

    try:
        train(1)
        assert active_session() is None
        assert summary_file(tmp_path / "rec")["steps"] == 4
    finally:
        leaked = active_session()
        if leaked is not None:  # clean up the leaked session so the autouse check reports only this test
            leaked.stop()


def test_run_dir_used_again_is_kept_unless_overwrite(tmp_path):
    loop = Loop()
    with autotune.profile(run_dir=tmp_path / "again", **LIGHT):
        loop.run(6)
    with autotune.profile(run_dir=tmp_path / "again", **LIGHT) as prof:
        loop.run(2)
    # the earlier run is never lost: this one is measured in memory only, with a warning
    assert prof.summary is not None
    assert prof.summary["steps"] == 2
    assert prof.run_dir is None
    assert any("already holds a run" in w for w in prof.summary["warnings"])
    assert len(read_steps(tmp_path / "again" / "run.db")) == 6
    with autotune.profile(run_dir=tmp_path / "again", overwrite=True, **LIGHT) as prof:
        loop.run(2)
    assert len(read_steps(tmp_path / "again" / "run.db")) == 2
    assert json.loads((tmp_path / "again" / "summary.json").read_text())["steps"] == 2


def test_a_tuning_trial_passes_its_params_as_keyword_arguments(tmp_path, monkeypatch):
    """In a trial, a tuned keyword parameter of the decorated function gets the trial's value."""
    monkeypatch.setenv("AUTOTUNE_PARAM_BATCH_SIZE", "32")
    monkeypatch.setenv("AUTOTUNE_PARAM_LR", "0.5")
    seen: list[tuple[int, float, int]] = []

    @autotune.profile(run_dir=tmp_path / "run", quiet=True, deep_profile=False)
    def train(steps: int, batch_size: int = 8, *, lr: float = 0.1, hidden: int = 16) -> None:
        seen.append((batch_size, lr, hidden))
        model = nn.Linear(4, hidden)
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        for _ in range(steps):
            loss = model(torch.randn(batch_size, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

    train(6)
    assert seen[-1] == (32, 0.5, 16)  # tuned: the trial's values; not tuned: the default
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["params_used"]["batch_size"] == 32 and summary["params_used"]["lr"] == 0.5
    train.profile.options.overwrite = True
    train(6, 4, lr=0.2)  # what the caller passes wins, by position or by keyword
    assert seen[-1] == (4, 0.2, 16)
