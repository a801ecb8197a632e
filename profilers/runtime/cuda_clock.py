"""Timing steps on a CUDA stream within a fixed budget of calls on the training thread.

A step's boundaries are marked with CUDA events recorded on the model GPU's current stream, taken
from a pool of events made once and given back after they are read: no event is created per step
once the pool has grown to what is in flight. Which boundaries are marked is the step tracker's
choice (``profilers.runtime.tracker``: the step's end in every step, the phase boundaries in the
steps that sample phases); when they are read is the session's (in batches: nothing is queried,
read or waited on per step).

A mark is a handle (slot, generation), not the event: a handle kept past its slot's return to the
pool (a step merged after it was read) reads as unknown (None), never as another step's time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

#: Steps whose GPU times are read together (queries, elapsed times): a step's times reach the
#: run store up to this many steps after it ended ...
READ_EVERY_STEPS = 16
#: ... or this long after the last read, whichever comes first (slow steps are read every step:
#: the dashboard and a study's progress see them as they end).
READ_EVERY_S = 1.0
#: The same under an early step budget (``--stop-below``, ``--stable-within``, a non-finite loss
#: stop): the budget judges GPU times, so they are read more often (see the session's pacing).
READ_EVERY_STEPS_UNDER_BUDGETS = 4
#: Phase boundaries are timed on the GPU in the first this many measured steps (as many as the
#: straggler rule pairs: ``autotune.advice.thresholds.MIN_STEPS``) ...
PHASE_STEPS_FIRST = 8
#: ... and in one measured step of every this many after them.
PHASE_STEP_EVERY = 16


class PhaseSchedule:
    """Which steps time their phase boundaries on the GPU, not only their end.

    Every step before the measured ones does (warm-up, FLOP counting, the deep-profile window and
    the step that settles after it: none enters the statistics, and the window's trace wants its
    phases); of the measured steps, the first :data:`PHASE_STEPS_FIRST` and then one in
    :data:`PHASE_STEP_EVERY` (every phase is timed in each of them). ``kind`` maps a step number to
    its kind ("warmup", "flops", "trace", "settle", "measured").
    """

    def __init__(self, kind: Callable[[int], str]) -> None:
        self._kind = kind
        self._first_measured: int | None = None
        self._step = 0
        self._answer = True

    def __call__(self, step: int) -> bool:
        """Whether step ``step`` (1-based) times its phases."""
        if step != self._step:  # asked at every event: worked out once a step
            self._step, self._answer = step, self._times(step)
        return self._answer

    def _times(self, step: int) -> bool:
        if self._kind(step) != "measured":
            return True
        if self._first_measured is None or step < self._first_measured:
            self._first_measured = step
        past = step - self._first_measured  # 0 for the first measured step
        return past < PHASE_STEPS_FIRST or (past - PHASE_STEPS_FIRST + 1) % PHASE_STEP_EVERY == 0


class Mark(NamedTuple):
    """A recorded event's slot in the pool and the slot's generation when it was recorded."""

    slot: int
    generation: int


class CudaClock:
    """Records and reads the events of one GPU's steps; ``cuda`` is ``torch.cuda`` (or a stand-in)."""

    def __init__(self, cuda: Any, device_index: int) -> None:
        self._cuda = cuda
        self.device_index = device_index
        self._events: list[Any] = []  # by slot
        self._generations: list[int] = []  # by slot: bumped when the slot returns to the pool
        self._free: list[int] = []
        self._in_use: set[int] = set()

    @property
    def events_made(self) -> int:
        """Events created so far (the pool's size)."""
        return len(self._events)

    def mark(self) -> Mark | None:
        """Record an event on the model GPU's current stream now (None inside a graph capture)."""
        cuda = self._cuda
        if cuda.current_device() == self.device_index:
            return self._record()
        with cuda.device(self.device_index):  # the model's GPU is not the current device
            return self._record()

    def _record(self) -> Mark | None:
        if self._cuda.is_current_stream_capturing():
            return None  # recording an event would invalidate the user's CUDA graph capture
        if self._free:
            slot = self._free.pop()
        else:
            slot = len(self._events)
            self._events.append(self._cuda.Event(enable_timing=True))
            self._generations.append(0)
        self._events[slot].record()
        self._in_use.add(slot)
        return Mark(slot, self._generations[slot])

    def _event(self, mark: Mark) -> Any:
        """The event behind ``mark``, or None when its slot has been reused since."""
        if mark.slot in self._in_use and self._generations[mark.slot] == mark.generation:
            return self._events[mark.slot]
        return None

    def done(self, mark: Mark) -> bool:
        """Whether the GPU has passed ``mark`` (a stale mark counts as passed)."""
        event = self._event(mark)
        return event is None or bool(event.query())

    def wait(self, mark: Mark) -> None:
        """Block until the GPU has passed ``mark``."""
        event = self._event(mark)
        if event is not None:
            event.synchronize()

    def elapsed_ns(self, start: Mark, end: Mark) -> int | None:
        """GPU nanoseconds from ``start`` to ``end`` (both passed), None when either is stale."""
        a, b = self._event(start), self._event(end)
        if a is None or b is None:
            return None
        return int(a.elapsed_time(b) * 1e6)

    def release(self, marks: Any) -> None:
        """Give the slots of ``marks`` back to the pool (their times have been read)."""
        for mark in marks:
            if mark is not None and self._event(mark) is not None:
                self._in_use.discard(mark.slot)
                self._generations[mark.slot] += 1
                self._free.append(mark.slot)


__all__ = [
    "PHASE_STEPS_FIRST",
    "PHASE_STEP_EVERY",
    "READ_EVERY_S",
    "READ_EVERY_STEPS",
    "READ_EVERY_STEPS_UNDER_BUDGETS",
    "CudaClock",
    "Mark",
    "PhaseSchedule",
]
