"""The CUDA paths of a session, on the CPU: which GPU its events, memory and name come from.

torch's CUDA calls are replaced here by recorders of their arguments (this machine has no GPU;
tests/profilers/test_gpu_session.py runs the same paths on a real one). What is checked is the
device each call is made for: a torchrun script doing ``model.to(f"cuda:{local_rank}")`` without
``torch.cuda.set_device`` leaves the current device at 0 on every rank.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch import nn

import autotune
from profilers.runtime.options import ProfileOptions
from profilers.runtime.session import Session, active_session
from profilers.runtime.tracker import StepTracker


class FakeCuda:
    """Stands for torch.cuda's calls a session makes; the current device stays 0."""

    def __init__(self) -> None:
        self.device_now = 0  # the current device
        self.recorded_on: list[int] = []  # device current when each event was recorded
        self.calls: list[tuple[str, Any]] = []

    @contextlib.contextmanager
    def device(self, index: int) -> Iterator[None]:
        before, self.device_now = self.device_now, index
        try:
            yield
        finally:
            self.device_now = before

    def event(self, enable_timing: bool = False, blocking: bool = False) -> Any:
        fake = self

        class Event:
            def record(self, stream: Any = None) -> None:
                fake.recorded_on.append(fake.device_now)

        return Event()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        cuda = torch.cuda
        monkeypatch.setattr(cuda, "device", self.device)
        monkeypatch.setattr(cuda, "Event", self.event)
        monkeypatch.setattr(cuda, "current_device", lambda: self.device_now)
        monkeypatch.setattr(cuda, "is_current_stream_capturing", lambda: False)
        monkeypatch.setattr(cuda, "device_count", lambda: 2)
        for name, value in [
            ("synchronize", None),
            ("max_memory_allocated", 7 << 30),
            ("max_memory_reserved", 8 << 30),
            ("get_device_name", "NVIDIA H100 80GB HBM3"),
        ]:
            monkeypatch.setattr(cuda, name, self.recorder(name, value))

    def recorder(self, name: str, value: Any) -> Any:
        def call(device: Any = None) -> Any:
            self.calls.append((name, device))
            return value

        return call


def test_a_model_on_cuda_1_is_timed_and_read_on_cuda_1_not_the_current_device(monkeypatch):
    fake = FakeCuda()
    fake.install(monkeypatch)
    session = Session(ProfileOptions(quiet=True))
    session._tracker = StepTracker(lambda closed: False)
    session._use_cuda_clock(torch.device("cuda", 1))  # what the hooks pass: the input's device
    assert session._tracker.gpu_mark is not None
    session._tracker.gpu_mark()
    session._tracker.gpu_mark()
    assert fake.recorded_on == [1, 1]  # on cuda:1's current stream
    assert fake.device_now == 0  # and the user's current device is left as it was
    session.instruments.before_window()  # the deep window starts after cuda:1's queued work
    session._memory([])
    device = session._device()
    assert device.index == 1
    assert ("synchronize", 1) in fake.calls
    assert ("max_memory_allocated", 1) in fake.calls and ("max_memory_reserved", 1) in fake.calls
    assert ("get_device_name", 1) in fake.calls
    assert all(arg == 1 for _, arg in fake.calls)


def test_the_hooks_hand_over_the_first_cuda_inputs_device():
    """The hooks call back with the input tensor's device (a CPU tensor never calls back)."""
    from profilers.runtime.hooks import TorchHooks

    seen: list[Any] = []
    tracker = StepTracker(lambda closed: False)
    hooks = TorchHooks(tracker, lambda part, exc: None, on_first_cuda_input=seen.append)
    model = nn.Linear(4, 4)
    hooks._count(model, (torch.randn(2, 4),), None)
    assert seen == []

    class OnCuda1(torch.Tensor):
        """A CPU tensor that says it lives on cuda:1 (the two attributes the hooks read)."""

        is_cuda = True
        device = torch.device("cuda", 1)

    x = torch.randn(2, 4).as_subclass(OnCuda1)
    hooks._count(model, (x,), None)
    hooks._count(model, (x,), None)
    assert seen == [torch.device("cuda", 1)]  # once


def test_the_deep_window_runs_its_before_window_call_before_the_profiler_starts(tmp_path):
    """Where the session puts the CUDA synchronize: before torch.profiler is on, once."""
    from torch.autograd import profiler as autograd_profiler

    calls: list[bool] = []
    with autotune.profile(run_dir=tmp_path / "run", quiet=True, warmup_steps=2, profile_steps=2) as prof:
        session = active_session()
        assert session is not None
        session.instruments.before_window = lambda: calls.append(autograd_profiler._is_profiler_enabled)
        model = nn.Linear(16, 16)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(8, 16)
        for _ in range(8):
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert calls == [False]
    assert prof.summary["profile_window"] is not None
