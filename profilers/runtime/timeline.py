"""Phase events of a training step and how a step's time splits into phases.

The step tracker records a flat list of :class:`Event` (a phase beginning or ending, with the host
time and, on CUDA, an event recorded on the stream). This module turns the events of one step into
the five phase durations. It is pure and imports nothing heavy.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from profilers.contract.records import StepRecord

DATA_B, DATA_E, FWD_B, FWD_E, BWD_B, BWD_E, OPT_B, OPT_E, EVAL_B, EVAL_E = range(10)

#: Begin code -> (end code, phase name).
_PAIRS = {
    DATA_B: (DATA_E, "data"),
    FWD_B: (FWD_E, "forward"),
    BWD_B: (BWD_E, "backward"),
    OPT_B: (OPT_E, "optimizer"),
    EVAL_B: (EVAL_E, "eval"),
}
_END_TO_BEGIN = {end: begin for begin, (end, _) in _PAIRS.items()}
#: Training activity: the "data" lead-in of a step ends at the first of these (evaluation does not end it).
ACTIVITY_BEGINS = frozenset({FWD_B, BWD_B, OPT_B})
CODE_NAMES = {
    DATA_B: "data_begin",
    DATA_E: "data_end",
    FWD_B: "forward_begin",
    FWD_E: "forward_end",
    BWD_B: "backward_begin",
    BWD_E: "backward_end",
    OPT_B: "optimizer_begin",
    OPT_E: "optimizer_end",
    EVAL_B: "eval_begin",
    EVAL_E: "eval_end",
}


class Event(NamedTuple):
    """One phase boundary. ``t_ns`` is ``time.perf_counter_ns()``; ``gpu`` a CUDA event or None."""

    code: int
    t_ns: int
    gpu: Any = None
    #: FWD_E of the step's model only: the batch size of its input (see ``profilers.runtime.hooks``).
    samples: int | None = None
    tokens: int | None = None  # FWD_E only: element count when that input held integer token ids
    #: BWD_B only: the detached scalar loss being backpropagated (a tensor, read lazily), or None.
    loss: Any = None


class ClosedStep(NamedTuple):
    """A finished step's raw timing, before phase resolution."""

    number: int  # 1-based step number
    start: Event  # the boundary the step started at
    end: Event  # the boundary it ended at
    events: list[Event]  # phase events inside it, in order
    mode: str  # "optimizer", "backward" or "explicit"
    live: bool = True  # False when split after the fact (its instrumentation time has passed)


def phase_durations(
    times: list[tuple[int, int]], start_ns: int, end_ns: int, trailing: str | None = None
) -> dict[str, int]:
    """Split ``[start_ns, end_ns]`` into data, forward, backward, optimizer, eval and other.

    ``times`` holds ``(code, t_ns)`` in time order. Each instant goes to the innermost phase open
    then, so phases nest: a forward and a backward run inside ``optimizer.step(closure)`` are
    forward and backward, and the optimizer gets only the rest of its interval. Time with no phase
    open is data before the step's first training activity (a forward, backward or optimizer step;
    evaluation does not end the lead-in), else "other"; ``trailing`` names the phase that gets such
    time after the last backward instead (the weight update of scripts without an optimizer). Time
    with no phase open between two evaluation phases is evaluation (its loop's own work). A phase
    still open at ``end_ns`` runs to it. The six values are non-negative and sum to
    ``end_ns - start_ns`` exactly.
    """
    out = {"data": 0, "forward": 0, "backward": 0, "optimizer": 0, "eval": 0, "other": 0}
    if end_ns <= start_ns:
        return out
    open_phases: list[int] = []  # begin codes, innermost last
    trained = False  # a training activity has begun
    after_backward = False  # the last training activity to end was a backward
    after_eval = False  # nothing but evaluation has run since the last evaluation phase ended
    held = 0  # a gap after an evaluation phase: evaluation's if another one follows
    cursor = start_ns

    def idle() -> str:
        if not trained:
            return "data"
        return trailing if trailing is not None and after_backward else "other"

    def spend(until: int) -> None:
        nonlocal cursor, held
        if until <= cursor:
            return
        if open_phases:
            out[_PAIRS[open_phases[-1]][1]] += until - cursor
        elif after_eval:
            held += until - cursor
        else:
            out[idle()] += until - cursor
        cursor = until

    for code, t in times:
        spend(min(max(t, start_ns), end_ns))
        if code in _PAIRS:
            if held:  # the evaluation loop's own work between two of its phases is evaluation
                out["eval" if code == EVAL_B else idle()] += held
                held = 0
            after_eval = False
            open_phases.append(code)
            if code in ACTIVITY_BEGINS:
                trained = True
                after_backward = False
        elif code in _END_TO_BEGIN:
            begin = _END_TO_BEGIN[code]
            if begin in open_phases:  # close it (and anything left open inside it)
                del open_phases[len(open_phases) - 1 - open_phases[::-1].index(begin) :]
            if code == BWD_E:
                after_backward = True
            after_eval = code == EVAL_E and not open_phases
    spend(end_ns)
    out[idle()] += held
    return out


def step_record(
    closed: ClosedStep,
    times: list[int] | None,
    kind: str,
    rank: int,
    wall_offset_ns: int,
    samples_per_step: int | None,
    loss: float | None = None,
    phases_timed: bool = True,
) -> StepRecord:
    """The StepRecord of a closed step, from host times or from resolved GPU times.

    ``times`` (GPU) holds the step's start, its end, then one time per event, all in ns on one
    clock; without it the events' host times are used. ``loss`` is the step's loss, already read.
    ``phases_timed``: False when ``times`` places the events by their host times (scaled to the
    GPU's duration), the GPU having timed only the step's boundaries.
    """
    if times is None:
        start_t, end_t = closed.start.t_ns, closed.end.t_ns
        pairs = [(e.code, e.t_ns) for e in closed.events]
    else:
        start_t, end_t = times[0], times[1]
        pairs = [(e.code, t) for e, t in zip(closed.events, times[2:], strict=True)]
    phases = phase_durations(
        pairs, start_t, end_t, trailing="optimizer" if closed.mode == "backward" else None
    )
    fwd = [e for e in closed.events if e.samples is not None]
    samples = sum(e.samples or 0 for e in fwd) if fwd else None
    tokens = sum(e.tokens or 0 for e in fwd) if fwd and all(e.tokens is not None for e in fwd) else None
    if samples_per_step is not None:
        samples = samples_per_step  # the tokens seen stay: the override is about the batch dimension
    return StepRecord(
        step=closed.number,
        rank=rank,
        start_ns=closed.start.t_ns + wall_offset_ns,
        duration_ns=max(0, end_t - start_t),
        data_ns=phases["data"],
        forward_ns=phases["forward"],
        backward_ns=phases["backward"],
        optimizer_ns=phases["optimizer"],
        other_ns=phases["other"],
        eval_ns=phases["eval"],
        samples=samples,
        tokens=tokens,
        kind=kind,
        loss=loss,
        phases_timed=phases_timed,
    )
