"""What a profiled CUDA step costs on the training thread, counted call by call (issue: always-on at
GPU speed).

This machine has no GPU: torch.cuda's calls are replaced by a recorder that stamps each event with
the host clock and logs every call with the step it was made in and the thread that made it. The
loop, the hooks, the step tracker and the session are the real ones; the session is told that the
model's input is on cuda:0, as the hooks tell it on a GPU. tests/profilers/test_gpu_session.py runs
the same paths on a real GPU.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import autotune
from profilers.contract.reader import read_steps
from profilers.contract.schema import STORE_NAME
from profilers.runtime.cuda_clock import (
    PHASE_STEP_EVERY,
    PHASE_STEPS_FIRST,
    READ_EVERY_STEPS,
    READ_EVERY_STEPS_UNDER_BUDGETS,
)
from profilers.runtime.session import GPU_LEAD_STEPS_UNDER_BUDGETS, active_session

WARMUP = 3
GPU_NS_PER_EVENT = 1_000_000


class RecordingCuda:
    """torch.cuda's calls a session makes, logged as (call, step, thread); events stamp host time.

    The GPU runs ``lag_steps`` behind the host: an event is done once the host is that many steps
    past the one that recorded it (or once waited on). Its clock advances ``GPU_NS_PER_EVENT`` at
    each event it records: a time it measures is a whole number of those, which tells it from a
    time the host measured.
    """

    def __init__(self, lag_steps: int = 0) -> None:
        self.calls: list[tuple[str, int, int]] = []
        self.step = lambda: 0  # the open step's number, set once the session exists
        self.lag_steps = lag_steps
        self.made: list[Any] = []
        self.gpu_ns = 0

    def log(self, name: str) -> None:
        self.calls.append((name, self.step(), threading.get_ident()))

    @contextlib.contextmanager
    def device(self, index: int) -> Iterator[None]:
        self.log("device")
        yield

    def event(self, enable_timing: bool = False, blocking: bool = False) -> Any:
        cuda = self
        cuda.log("Event")

        class Event:
            t_ns = 0
            step = 0
            waited = False

            def record(self, stream: Any = None) -> None:
                cuda.log("record")
                cuda.gpu_ns += GPU_NS_PER_EVENT
                self.t_ns, self.step, self.waited = cuda.gpu_ns, cuda.step(), False

            def query(self) -> bool:
                cuda.log("query")
                return self.waited or cuda.step() - self.step >= cuda.lag_steps

            def synchronize(self) -> None:
                cuda.log("synchronize")
                self.waited = True

            def elapsed_time(self, other: Any) -> float:
                cuda.log("elapsed_time")
                return (other.t_ns - self.t_ns) / 1e6

        event = Event()
        self.made.append(event)
        return event

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        cuda = torch.cuda
        monkeypatch.setattr(cuda, "device", self.device)
        monkeypatch.setattr(cuda, "Event", self.event)
        monkeypatch.setattr(cuda, "current_device", lambda: 0)
        monkeypatch.setattr(cuda, "is_current_stream_capturing", lambda: False)
        monkeypatch.setattr(cuda, "device_count", lambda: 1)
        for name, value in [
            ("synchronize", None),
            ("max_memory_allocated", 1 << 30),
            ("max_memory_reserved", 2 << 30),
            ("get_device_name", "NVIDIA H100 80GB HBM3"),
        ]:
            monkeypatch.setattr(cuda, name, lambda *a, _n=name, _v=value, **k: (self.log(_n), _v)[1])

    def per_step(self, name: str, thread: int) -> Counter[int]:
        """How many ``name`` calls ``thread`` made in each step."""
        return Counter(step for call, step, t in self.calls if call == name and t == thread)


def profiled_loop(
    tmp_path: Path, cuda: RecordingCuda, steps: int, closure: bool = False, **options: Any
) -> dict[str, Any]:
    """A real loop, profiled as if on cuda:0; ``closure``: every update is ``opt.step(closure)``."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16, 1)
    prof = autotune.profile(
        run_dir=tmp_path / "run", quiet=True, deep_profile=False, count_flops=False, sample_hz=0,
        warmup_steps=WARMUP, **options,
    )  # fmt: skip

    def update() -> torch.Tensor:
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    with prof:
        session = active_session()
        assert session is not None and session._tracker is not None
        tracker = session._tracker
        cuda.step = lambda: tracker.steps_closed + 1
        session._use_cuda_clock(torch.device("cuda", 0))  # what the hooks do at a CUDA input
        for _ in range(steps):
            if closure:  # Lightning's automatic optimization, LBFGS: the step starts in opt.step
                opt.step(update)
            else:
                update()
                opt.step()
    assert prof.summary is not None
    return prof.summary


def phase_steps(steps: int) -> set[int]:
    """The steps that time their phases: the warm-up, the first measured ones, then 1 in 16."""
    first = WARMUP + 1  # no FLOP counting, no deep-profile window here
    later = range(first + PHASE_STEPS_FIRST - 1 + PHASE_STEP_EVERY, steps + 1, PHASE_STEP_EVERY)
    return set(range(1, first + PHASE_STEPS_FIRST)) | set(later)


def host_timed(recorded: list[Any]) -> list[int]:
    """Steps whose duration the host's clock measured: not a whole number of GPU_NS_PER_EVENT."""
    return [s.step for s in recorded if s.duration_ns % GPU_NS_PER_EVENT != 0]


def test_a_cuda_step_records_one_event_from_a_pool_and_reads_nothing_between_batches(tmp_path, monkeypatch):
    cuda = RecordingCuda()
    cuda.install(monkeypatch)
    monkeypatch.setattr("profilers.runtime.session.READ_EVERY_S", 3600.0)  # batches by count alone
    steps = 100
    summary = profiled_loop(tmp_path, cuda, steps)
    me = threading.get_ident()
    records = cuda.per_step("record", me)
    timed = phase_steps(steps)
    assert len(timed) == WARMUP + PHASE_STEPS_FIRST + 5
    # One event a step (its optimizer step's end, which starts the next); six in a step timing its
    # phases (forward, backward, optimizer: begin and end); one more in the first step past the
    # warm-up, which starts after the session's one-off work there (a garbage collection)
    for n in range(WARMUP + 1, steps):
        expected = (6 if n in timed else 1) + (n == WARMUP + 1)
        assert records[n] == expected, (n, sorted(records.items()))
    # Events come from a pool: none is made once the steps read in a batch have given theirs back
    made = cuda.per_step("Event", me)
    assert max(made) <= WARMUP + PHASE_STEPS_FIRST + 2 * READ_EVERY_STEPS, made
    assert sum(made.values()) <= 2 * READ_EVERY_STEPS + 6 * (WARMUP + PHASE_STEPS_FIRST), made

    # Nothing is queried, read or waited on per step: only at every READ_EVERY_STEPS-th step's end
    # (counted in the next step, which is open then) and at the end of the run
    reads = {n for call, n, t in cuda.calls if call in ("query", "elapsed_time", "synchronize") and t == me}
    batch_ends = {k * READ_EVERY_STEPS + 1 for k in range(1, steps // READ_EVERY_STEPS + 1)}
    assert reads <= batch_ends | {steps + 1}, sorted(reads - batch_ends)
    assert len(reads) <= steps // READ_EVERY_STEPS + 1
    assert not [c for c in cuda.calls if c[0] == "device"]  # cuda:0 is the current device
    assert not [c for c in cuda.calls if c[0] == "synchronize" and c[1] <= steps]  # waits: at the end only
    # Every step is in the run, its phases flagged as timed on the GPU or split by the host's clock
    recorded = read_steps(tmp_path / "run" / STORE_NAME)
    assert [s.step for s in recorded] == list(range(1, steps + 1))
    for s in recorded:
        assert s.phases_timed == (s.step in timed), s.step
        assert sum(s.phase_ns().values()) == s.duration_ns
        assert s.forward_ns > 0 and s.backward_ns > 0 and s.optimizer_ns > 0
    assert host_timed(recorded) == []  # every step's duration is the GPU's
    assert summary["steps"] == steps and summary["warnings"] == []

    assert sum(summary["phases"].values()) == pytest.approx(1.0)


def test_under_an_early_budget_the_gpu_times_are_read_every_few_steps_not_every_step(tmp_path, monkeypatch):
    """--stop-below and the non-finite-loss stop judge GPU times: the host may run ahead of the GPU
    by the lead and a batch, no more; it waits on an event once a batch, never every step."""
    cuda = RecordingCuda(lag_steps=10)  # a GPU-bound loop: the host runs far ahead
    cuda.install(monkeypatch)
    monkeypatch.setattr("profilers.runtime.session.READ_EVERY_S", 3600.0)  # batches by count alone
    steps = 60
    profiled_loop(tmp_path, cuda, steps, stop_on_non_finite_loss=True)
    me = threading.get_ident()
    waits = cuda.per_step("synchronize", me)
    every = READ_EVERY_STEPS_UNDER_BUDGETS
    batch_ends = {k * every + 1 for k in range(1, steps // every + 1)}
    assert set(waits) <= batch_ends | {steps + 1}, sorted(waits)
    # Each batch waits until the lead is left: at most the batch's own steps at each
    assert all(c <= READ_EVERY_STEPS_UNDER_BUDGETS for n, c in waits.items() if n <= steps), waits
    # ... so the host is never more than the lead and a batch ahead of the GPU's read times
    assert len(waits) >= steps // READ_EVERY_STEPS_UNDER_BUDGETS - 1, waits
    assert sum(waits.values()) >= steps - GPU_LEAD_STEPS_UNDER_BUDGETS - 2 * READ_EVERY_STEPS_UNDER_BUDGETS


def test_slow_steps_are_read_as_they_end_not_a_batch_later(tmp_path, monkeypatch):
    """A step longer than READ_EVERY_S is read at the next step's start (what the dashboard shows)."""
    cuda = RecordingCuda()
    cuda.install(monkeypatch)
    monkeypatch.setattr("profilers.runtime.session.READ_EVERY_S", 0.0)  # every step is "slow"
    steps = 12
    profiled_loop(tmp_path, cuda, steps)
    reads = {n for call, n, _ in cuda.calls if call == "elapsed_time"}
    assert reads == set(range(2, steps + 2)), sorted(reads)  # each step read as the next one opens


def test_steps_that_start_inside_an_optimizer_step_are_timed_on_the_gpu_from_a_bounded_pool(
    tmp_path, monkeypatch
):
    """opt.step(closure) runs the forward and backward inside the optimizer step: each step starts
    at that optimizer's start, which must be marked, and the pool must not grow with the steps."""
    cuda = RecordingCuda()
    cuda.install(monkeypatch)
    monkeypatch.setattr("profilers.runtime.session.READ_EVERY_S", 3600.0)
    steps = 200
    profiled_loop(tmp_path, cuda, steps, closure=True)
    recorded = read_steps(tmp_path / "run" / STORE_NAME)
    assert len(recorded) == steps
    assert host_timed(recorded) == []  # each step's start, inside opt.step, was marked
    made = cuda.per_step("Event", threading.get_ident())
    late = [n for n in made if n > 4 * READ_EVERY_STEPS]
    assert late == [], late  # none made once the pool covers what is in flight
    assert len(cuda.made) < 100, len(cuda.made)


def test_steps_restarted_after_slow_work_give_their_ends_back(tmp_path, monkeypatch):
    """A step that starts after slow work (a rank agreement every few steps under torchrun) leaves
    the previous step's end unused as a start: it goes back to the pool all the same."""
    cuda = RecordingCuda()
    cuda.install(monkeypatch)
    monkeypatch.setattr("profilers.runtime.session.READ_EVERY_S", 3600.0)
    from profilers.runtime.stopping import StepBudgets

    real = StepBudgets.at_step_end

    def every_fourth_is_slow(self: Any, closed: Any, kind: str, steps: Any) -> tuple[Any, bool]:
        reason, _ = real(self, closed, kind, steps)
        return reason, closed.number % 4 == 0

    monkeypatch.setattr(StepBudgets, "at_step_end", every_fourth_is_slow)
    steps = 200
    profiled_loop(tmp_path, cuda, steps)
    recorded = read_steps(tmp_path / "run" / STORE_NAME)
    assert len(recorded) == steps
    assert host_timed(recorded) == []
    made = cuda.per_step("Event", threading.get_ident())
    late = [n for n in made if n > 4 * READ_EVERY_STEPS]
    assert late == [], late  # the ends left behind went back to the pool: none made once it is full
