"""The step state machine: turns phase events from the hooks into closed steps.

Steps end at ``optimizer.step()`` (several optimizers stepping back to back end one step, unless
the later one runs a closure: then each ``step(closure)`` is a step of its own), at
``autotune.step()`` once the user calls it, or, in scripts that never call an optimizer, at the
start of the next iteration after each backward pass. Until the first optimizer step or
``UNKNOWN_MODE_MAX_BACKWARDS`` backward passes the tracker cannot tell the last two apart, so it
keeps the events and splits them retroactively; an optimizer step that comes later still (gradient
accumulation over that many micro-batches) takes the split steps back into one.

An optimizer step ends its step at the next phase that begins (a second optimizer right after it
belongs to the same step). Under several ranks that is too late for a stop: a pipeline stage's next
phase waits for the stage before it, which may have stopped already, and a rank agreement would
wait for a rank that cannot reach it. So a tracker made with ``eager_after=N`` closes a step at
its optimizer step's end once N steps in a row each had exactly one optimizer step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from profilers.runtime.nvtx_ranges import NvtxRanges
from profilers.runtime.timeline import BWD_B, BWD_E, DATA_B, EVAL_B, FWD_B, OPT_B, OPT_E, ClosedStep, Event

#: Backward passes without any optimizer step after which a script counts as "updates by hand".
UNKNOWN_MODE_MAX_BACKWARDS = 16
#: Steps closed before the first ``autotune.step()`` that it may still merge into step 1.
MAX_MERGED_STEPS = 64
#: In scripts that update by hand, these open the next step once a backward pass has finished.
_STEP_OPENERS = frozenset({DATA_B, FWD_B, EVAL_B})


class StepTracker:
    """Collects events on the training thread and emits :class:`ClosedStep` through ``on_step``.

    ``on_step`` is called synchronously on the training thread at each live step boundary, after
    the step closed and before the next step's first event is recorded, so the caller can start or
    stop per-step instrumentation there; it returns True when it did slow work, and the next step
    then starts after it. ``gpu_mark`` (set once the model runs on CUDA) records a CUDA event
    without synchronizing: at every event that can end or start a step (an optimizer step's end,
    a second optimizer's start, a backward-mode step's opener and its backward's end,
    ``autotune.step()``, a restart after slow work), and at every other
    phase boundary only in the steps for which ``phase_steps(number)`` is true (always while the
    step mode is unknown). A step thus records one or two events, a phase-timing step all of them.
    """

    def __init__(
        self,
        on_step: Callable[[ClosedStep], bool],
        nvtx: NvtxRanges | None = None,
        eager_after: int | None = None,
    ) -> None:
        self.on_step = on_step
        #: Steps in a row with exactly one optimizer step after which steps close at its end.
        self.eager_after = eager_after
        self._single_optimizer_steps = 0
        self.nvtx = nvtx
        self.mode = "unknown"
        self.gpu_mark: Callable[[], Any] | None = None
        #: Step number -> whether the step times its phase boundaries on the GPU (None: every step).
        self.phase_steps: Callable[[int], bool] | None = None
        self.steps_closed = 0
        self._events: list[Event] = []
        self._start: Event | None = None
        self._pending: Event | None = None  # OPT_E that will end the step unless another optimizer steps
        #: (OPT_E, OPT_B) of two optimizer steps back to back, taken for one step until the second
        #: runs a forward or backward (a closure: LBFGS, Lightning), which makes it a step of its own.
        self._merged_opt: tuple[Event, Event] | None = None
        self._after_backward = False  # backward mode: a backward finished in the current step
        self._backwards_unknown = 0
        # Steps closed before the first autotune.step(): merged into step 1 when it comes.
        self._pre_explicit: list[ClosedStep] | None = []
        self.on_retract: Callable[[int], None] | None = None

    # -- events ---------------------------------------------------------------------------------
    def _event(
        self,
        code: int,
        samples: int | None = None,
        tokens: int | None = None,
        loss: Any = None,
        boundary: bool = True,
    ) -> Event:
        """An event now; marked on the GPU if it can end a step (``boundary``) or the step times phases."""
        gpu = None
        if self.gpu_mark is not None and (boundary or self._times_phases()):
            gpu = self.gpu_mark()
        return Event(code, time.perf_counter_ns(), gpu, samples, tokens, loss)

    def _times_phases(self) -> bool:
        """Whether the open step marks its phase boundaries on the GPU."""
        if self.phase_steps is None or self.mode == "unknown":
            return True  # an unknown mode may still split the events into steps after the fact
        return self.phase_steps(self.steps_closed + 1)

    def _can_end_step(self, end_code: int) -> bool:
        """Whether a phase ending with ``end_code`` can be where the open step ends."""
        if end_code == OPT_E:
            return self.mode != "explicit"
        return end_code == BWD_E and self.mode == "backward"

    def begin(
        self, code: int, samples: int | None = None, tokens: int | None = None, loss: Any = None
    ) -> None:
        """A data wait, forward, backward or optimizer phase begins (``loss``: see Event.loss)."""
        if self._merged_opt is not None and code in (FWD_B, BWD_B, EVAL_B):
            ended, started = self._merged_opt  # the second optimizer step runs a closure
            self._merged_opt = None
            self._close(ended, started)
        if self._start is None:
            self._start = self._event(code)
            self._boundary(self.steps_closed + 1)
        elif code == OPT_B and self._pending is not None:
            pass  # a second optimizer in the same step (unless it runs a closure: see below)
        elif self._pending is not None:
            self._close(self._pending, self._pending)
        elif self.mode == "backward" and self._after_backward and code in _STEP_OPENERS:
            boundary = self._event(code)
            self._close(boundary, boundary)
        # A second optimizer's start begins a step of its own if it runs a closure: a boundary
        ev = self._event(code, samples, tokens, loss, boundary=code == OPT_B and self._pending is not None)
        if code == OPT_B and self._pending is not None:
            self._merged_opt = (self._pending, ev)
            self._pending = None
        self._events.append(ev)
        if self.nvtx is not None:
            self.nvtx.phase_begin(code)

    def end(self, code: int, samples: int | None = None, tokens: int | None = None) -> None:
        """A phase ends (``code`` is its end code; a forward's end carries its samples and tokens)."""
        if self._start is None:
            return
        ev = self._event(code, samples, tokens, boundary=self._can_end_step(code))
        self._events.append(ev)
        if self.nvtx is not None:
            self.nvtx.phase_end(code)
        if code == OPT_E:
            self._merged_opt = None
            if self.mode == "backward":
                self._merge_into_first_step()  # gradient accumulation over many micro-batches
            elif self.mode == "unknown":
                self.mode = "optimizer"
            if self.mode == "optimizer":
                self._pending = ev
                if self.eager_after is not None and self._single_optimizer_steps >= self.eager_after:
                    self._close(ev, ev)
        elif code == BWD_E:
            if self.mode == "backward":
                self._after_backward = True
            elif self.mode == "unknown":
                self._backwards_unknown += 1
                if self._backwards_unknown >= UNKNOWN_MODE_MAX_BACKWARDS:
                    self._commit_backward_mode()

    def explicit_step(self) -> None:
        """``autotune.step()``: the step ends now; from here on only explicit calls end steps.

        Steps that optimizer steps or backward passes closed before the first call (two
        optimizers in a GAN loop, say) are taken back and merged into step 1.
        """
        ev = self._event(OPT_E)  # code unused as a phase: only its time matters
        first_call = self.mode != "explicit"
        self.mode = "explicit"
        self._pending = None
        if self._start is None:
            self._start = ev
            self._boundary(self.steps_closed + 1)
            return
        earlier, self._pre_explicit = self._pre_explicit, None
        if first_call and earlier:
            if self.on_retract is not None:
                self.on_retract(len(earlier))
            self._events = [e for s in earlier for e in s.events] + self._events
            self._start = earlier[0].start
            self.steps_closed = 0
        self._close(ev, ev)

    def _merge_into_first_step(self) -> None:
        """An optimizer steps after the tracker took the script for one that updates by hand.

        It was accumulating gradients over ``UNKNOWN_MODE_MAX_BACKWARDS`` or more micro-batches:
        the steps closed so far (one per backward pass) are taken back and merged, with what is
        open, into step 1, which this optimizer step ends; optimizer steps end steps from here on.
        Past ``MAX_MERGED_STEPS`` closed steps history is kept as it is (too late to rewrite).
        """
        self.mode = "optimizer"
        earlier, self._pre_explicit = self._pre_explicit, []
        if not earlier:
            return
        if self.on_retract is not None:
            self.on_retract(len(earlier))
        self._events = [e for s in earlier for e in s.events] + self._events
        self._start = earlier[0].start
        self.steps_closed = 0

    def finish(self) -> None:
        """The profiled region ends: close what is complete, drop a partial step."""
        if self._start is None:
            return
        if self.mode == "unknown":
            self._commit_backward_mode(final=True)
        elif self._pending is not None:
            self._close(self._pending, None)
        elif self.mode == "backward" and self._after_backward:
            last_bwd = next(e for e in reversed(self._events) if e.code == BWD_E)
            self._close(last_bwd, None)
        self._start = None

    # -- closing --------------------------------------------------------------------------------
    def _close(self, end: Event, next_start: Event | None) -> None:
        assert self._start is not None
        n_inside = sum(1 for e in self._events if e.t_ns <= end.t_ns)
        inside, rest = self._events[:n_inside], self._events[n_inside:]
        self.steps_closed += 1
        step = ClosedStep(self.steps_closed, self._start, end, inside, self.mode)
        one_optimizer = self.mode == "optimizer" and sum(e.code == OPT_B for e in inside) == 1
        self._single_optimizer_steps = self._single_optimizer_steps + 1 if one_optimizer else 0
        self._keep_for_merge(step)
        self._events = rest
        self._start = next_start
        self._pending = None
        self._merged_opt = None
        self._after_backward = False
        restart = self.on_step(step)
        if next_start is not None:
            if restart:  # the callback did slow work: the next step starts after it
                self._start = self._event(OPT_E)
            self._boundary(self.steps_closed + 1)
        elif self.nvtx is not None:
            self.nvtx.close()

    def _keep_for_merge(self, step: ClosedStep) -> None:
        if self._pre_explicit is None or self.mode == "explicit":
            return
        if len(self._pre_explicit) >= MAX_MERGED_STEPS:
            self._pre_explicit = None  # autotune.step() came too late to rewrite history
        else:
            self._pre_explicit.append(step)

    def _boundary(self, next_index: int) -> None:
        if self.nvtx is not None:
            self.nvtx.step_begin(next_index)

    def _commit_backward_mode(self, final: bool = False) -> None:
        """No optimizer has stepped: split the kept events into one step per backward pass."""
        self.mode = "backward"
        events, self._events = self._events, []
        seg_start = self._start
        seg: list[Event] = []
        after_bwd = False
        for ev in events:
            if after_bwd and ev.code in _STEP_OPENERS:
                self.steps_closed += 1
                assert seg_start is not None
                retro = ClosedStep(self.steps_closed, seg_start, ev, seg, "backward", live=False)
                self._keep_for_merge(retro)
                self.on_step(retro)
                seg_start, seg, after_bwd = ev, [], False
            seg.append(ev)
            if ev.code == BWD_E:
                after_bwd = True
        self._start, self._events, self._after_backward = seg_start, seg, after_bwd
        if final and after_bwd:
            last_bwd = next(e for e in reversed(seg) if e.code == BWD_E)
            self._close(last_bwd, None)
