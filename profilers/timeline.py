"""Phase events of a training step and how a step's time splits into phases.

The step tracker records a flat list of :class:`Event` (a phase beginning or ending, with the host
time and, on CUDA, an event recorded on the stream). This module turns the events of one step into
the five phase durations. It is pure and imports nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from profilers.records import StepRecord

if TYPE_CHECKING:
    from profilers.tracker import ClosedStep

DATA_B, DATA_E, FWD_B, FWD_E, BWD_B, BWD_E, OPT_B, OPT_E = range(8)

#: Begin code -> (end code, phase name).
_PAIRS = {
    DATA_B: (DATA_E, "data"),
    FWD_B: (FWD_E, "forward"),
    BWD_B: (BWD_E, "backward"),
    OPT_B: (OPT_E, "optimizer"),
}
_END_TO_BEGIN = {end: begin for begin, (end, _) in _PAIRS.items()}
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
}


class Event(NamedTuple):
    """One phase boundary. ``t_ns`` is ``time.perf_counter_ns()``; ``gpu`` a CUDA event or None."""

    code: int
    t_ns: int
    gpu: Any = None
    samples: int | None = None  # FWD_B of the step's model only: leading dim of its first tensor
    tokens: int | None = None  # FWD_B only: element count when that tensor held integer token ids
    #: BWD_B only: the detached scalar loss being backpropagated (a tensor, read lazily), or None.
    loss: Any = None


def phase_durations(
    times: list[tuple[int, int]], start_ns: int, end_ns: int, trailing: str | None = None
) -> dict[str, int]:
    """Split ``[start_ns, end_ns]`` into data, forward, backward, optimizer and other.

    ``times`` holds ``(code, t_ns)`` in time order. Forward, backward and optimizer are the summed
    intervals of their begin/end pairs (an interval still open at ``end_ns`` runs to it). Data is
    the time from the step's start to its first model activity plus DataLoader waits after it.
    ``trailing`` names the phase that gets the time after the last backward (the weight update of
    scripts without an optimizer); otherwise that time is "other", like everything unaccounted.
    The five values are non-negative and sum to ``end_ns - start_ns`` exactly.
    """
    total = max(0, end_ns - start_ns)
    sums = {"data": 0, "forward": 0, "backward": 0, "optimizer": 0}
    opened: dict[int, int] = {}
    first_activity: int | None = None
    last_bwd_end: int | None = None
    for code, t in times:
        t = min(max(t, start_ns), end_ns)
        if code in _PAIRS:
            if code in ACTIVITY_BEGINS and first_activity is None:
                first_activity = t
            opened.setdefault(code, t)
        elif code in _END_TO_BEGIN:
            begin = _END_TO_BEGIN[code]
            if code == BWD_E:
                last_bwd_end = t
            if begin in opened:
                t0 = opened.pop(begin)
                name = _PAIRS[begin][1]
                if name == "data" and (first_activity is None or t0 < first_activity):
                    continue  # DataLoader waits before the first activity are in the lead-in below
                sums[name] += t - t0
    for begin, t0 in opened.items():
        name = _PAIRS[begin][1]
        if name != "data" or (first_activity is not None and t0 >= first_activity):
            sums[name] += end_ns - t0
    sums["data"] += (first_activity if first_activity is not None else end_ns) - start_ns
    if trailing is not None and last_bwd_end is not None and not opened:
        sums[trailing] += end_ns - last_bwd_end
    accounted = sum(sums.values())
    if accounted > total > 0:  # overlapping intervals (clock skew): scale down to fit
        scale = total / accounted
        sums = {k: int(v * scale) for k, v in sums.items()}
        accounted = sum(sums.values())
    out = dict(sums)
    out["other"] = total - accounted
    if out["other"] < 0:  # rounding
        out["data"] += out["other"]
        out["other"] = 0
    return out


def step_record(
    closed: ClosedStep,
    times: list[int] | None,
    kind: str,
    rank: int,
    wall_offset_ns: int,
    samples_per_step: int | None,
    loss: float | None = None,
) -> StepRecord:
    """The StepRecord of a closed step, from host times or from resolved GPU times.

    ``times`` (GPU) holds the step's start, its end, then one time per event, all in ns on one
    clock; without it the events' host times are used. ``loss`` is the step's loss, already read.
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
        samples, tokens = samples_per_step, None
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
        samples=samples,
        tokens=tokens,
        kind=kind,
        loss=loss,
    )
