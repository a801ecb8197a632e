"""A traced step's memory as a function of the micro-batch: the points that can be its peak.

After every op of a traced step the live bytes split into a part that does not grow with the
micro-batch (parameters, gradients, optimizer state, weight casts, and the optimizer's temporaries)
and one that does (activations, and the forward's and backward's temporaries). At ``r`` times the
traced micro-batch the live bytes after op ``t`` are ``fixed[t] + r × growing[t]``, and the peak is
the largest of these lines: at r = 1 the traced peak, at a larger r an op where more grows (the
start of the backward rather than the optimizer's step). :func:`memory_envelope` keeps the ops
whose line is the highest somewhere, each with its bytes by category, so a step traced at one size
is scaled to any other op by op rather than from its traced peak alone. Two traces of one op
sequence at two micro-batches do better: every op's bytes are a line through its two values
(:class:`MarkedStep` keeps them all).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

#: Memory categories, in report order (as :mod:`autotune.plan.trace` counts them).
CATEGORIES = ("parameters", "gradients", "optimizer_state", "parameter_casts", "activations", "temporaries")
#: Scales of the traced micro-batch the envelope is taken over (1/1024 to 2^20).
_SCALES = tuple(2.0**k for k in range(-10, 21))


def phase_of(key: str) -> str:
    """The phase of an envelope key: ``"backward.2"`` -> ``"backward"``."""
    return key.split(".")[0]


def growing_categories(phase: str) -> tuple[str, ...]:
    """The categories that grow with the micro-batch in ``phase`` (or an envelope key of it)."""
    if phase_of(phase) in ("forward", "backward"):
        return ("activations", "temporaries")
    return ("activations",)  # the optimizer's temporaries are the update's, whatever the batch


def growing_bytes(by_category: dict[str, int], phase: str) -> int:
    """The bytes of ``by_category`` that grow with the micro-batch, in ``phase``."""
    return sum(by_category.get(c, 0) for c in growing_categories(phase))


#: One letter per phase in :class:`MarkedStep`'s ``phases``.
PHASE_LETTERS = {"forward": "f", "backward": "b", "optimizer": "o"}
_PHASES = {letter: phase for phase, letter in PHASE_LETTERS.items()}


@dataclass(frozen=True, slots=True)
class MarkedStep:
    """Live bytes by category after every op (mark) of a traced step, as one micro-batch and as a later one.

    ``phases``: one letter a mark (:data:`PHASE_LETTERS`); ``live``: category -> bytes after each
    mark; ``held``: the same with the gradients of earlier micro-batches held (the forward's and
    backward's marks of a micro-batch after an optimizer step's first); ``later_from``: the mark
    where a traced second micro-batch began (None: one traced). Two traces of the same op sequence
    at two micro-batches give every mark's bytes as a line in the micro-batch
    (:func:`autotune.plan.model.StepModel.fit`).
    """

    phases: str
    live: dict[str, list[int]]
    held: dict[str, list[int]]
    later_from: int | None = None

    def phase(self, t: int) -> str:
        """The phase of mark ``t``."""
        return _PHASES[self.phases[t]]

    def first(self, t: int) -> bool:
        """Whether mark ``t`` is one of a step's first micro-batch or its update."""
        return self.later_from is None or t < self.later_from or self.phases[t] == "o"

    def later(self, t: int) -> bool:
        """Whether mark ``t`` (of :attr:`held`) is the forward or backward of a later micro-batch."""
        return self.phases[t] != "o" and (self.later_from is None or t >= self.later_from)


def marked_step(
    lifetimes: dict[int, list[Any]], final: dict[int, str], phases: list[str], later_from: int | None
) -> MarkedStep:
    """The live bytes after every mark, as traced and as a later micro-batch holds them.

    With gradient accumulation, every micro-batch after an optimizer step's first runs its forward
    and backward with the gradients of the earlier ones held (each new gradient is added to them).
    A step traced with several (``later_from``, the mark where the second began) has them as they
    ran. A step traced with one has its later micro-batch made from its own marks: every gradient
    the step makes live from the start, and the new one live where the trace made it until the op
    after, which adds it in place; gradients freed during the step (the step before's, by
    ``zero_grad``) are not held.
    """
    marks = len(phases)
    live = live_by_mark(lifetimes, final, marks)
    letters = "".join(PHASE_LETTERS[p] for p in phases)
    if later_from is not None:
        return MarkedStep(letters, live, live, later_from)
    held: dict[int, list[Any]] = {}
    for key, (nbytes, category, start, end) in lifetimes.items():
        if final.get(key, category) != "gradients":
            held[key] = [nbytes, category, start, end]
        elif end is None or end >= marks:  # this step's (or zeroed in place): held from the start
            held[key] = [nbytes, "gradients", 0, end]
            if phases[start] == "backward":  # made by this backward: a later one adds a new one
                held[-1 - key] = [nbytes, "gradients", start, min(start + 2, marks)]
    return MarkedStep(letters, live, live_by_mark(held, {}, marks), None)


def live_by_mark(lifetimes: dict[int, list[Any]], final: dict[int, str], marks: int) -> dict[str, list[int]]:
    """Category -> live bytes after each of ``marks`` marks.

    ``lifetimes``: storage key -> [bytes, category, first mark live, mark freed at or None];
    ``final``: categories learned later (a gradient).
    """
    diff = {c: [0] * (marks + 1) for c in CATEGORIES}
    for key, (nbytes, category, start, end) in lifetimes.items():
        stop = marks if end is None else min(end, marks)
        if start < stop:
            column = diff[final.get(key, category)]
            column[start] += nbytes
            column[stop] -= nbytes
    return {c: list(itertools.accumulate(diff[c][:marks])) for c in CATEGORIES}


def memory_envelope(step: MarkedStep, held: bool = False) -> dict[str, dict[str, int]]:
    """Bytes by category at each phase's own peak and at every op that is the peak somewhere.

    Of a step's first micro-batch and update, or (``held``) of a later micro-batch's forward and
    backward. Each phase's peak is keyed by the phase; an op that is the peak at some scale of the
    micro-batch is keyed ``phase.t`` by its mark ``t``.
    """
    live = step.held if held else step.live
    kept = step.later if held else step.first
    chosen_marks = [t for t in range(len(step.phases)) if kept(t)]
    if not chosen_marks:
        return {}

    def at(t: int) -> dict[str, int]:
        return {c: live[c][t] for c in CATEGORIES}

    totals = [sum(live[c][t] for c in CATEGORIES) for t in range(len(step.phases))]
    out: dict[str, dict[str, int]] = {}
    peaks: dict[str, int] = {}
    for t in chosen_marks:
        phase = step.phase(t)
        if phase not in peaks or totals[t] > totals[peaks[phase]]:
            peaks[phase] = t
    for phase, t in peaks.items():
        out[phase] = at(t)
    lines = []
    for t in chosen_marks:
        grows = growing_bytes(at(t), step.phase(t))
        lines.append((float(grows), float(totals[t] - grows), t))
    for t in upper_envelope(lines, _SCALES):
        out[f"{step.phase(t)}.{t}"] = at(t)
    return out


def upper_envelope(lines: list[tuple[float, float, int]], at: tuple[float, ...]) -> list[int]:
    """The marks whose line (slope, value at 0, mark) is the highest at one of the points ``at``."""
    staircase, best_fixed = [], -math.inf
    for slope, fixed, t in sorted(lines, reverse=True):  # steepest first: keep what no other beats
        if fixed > best_fixed:
            staircase.append((fixed, slope, t))
            best_fixed = fixed
    return sorted({max(staircase, key=lambda line: line[0] + x * line[1])[2] for x in at})


__all__ = [
    "CATEGORIES", "PHASE_LETTERS", "MarkedStep", "growing_bytes", "growing_categories", "live_by_mark",
    "marked_step", "memory_envelope", "phase_of", "upper_envelope",
]  # fmt: skip
