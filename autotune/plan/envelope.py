"""A traced step's memory as a function of the micro-batch: the points that can be its peak.

After every op of a traced step the live bytes split into a part that does not grow with the
micro-batch (parameters, gradients, optimizer state, weight casts, and the optimizer's temporaries)
and one that does (activations, and the forward's and backward's temporaries). At ``r`` times the
traced micro-batch the live bytes after op ``t`` are ``fixed[t] + r × growing[t]``, and the peak is
the largest of these lines: at r = 1 the traced peak, at a larger r an op where more grows (the
start of the backward rather than the optimizer's step). :func:`memory_envelope` keeps the ops
whose line is the highest somewhere, each with its bytes by category, so a step traced at one size
is scaled to any other op by op rather than from its traced peak alone.
"""

from __future__ import annotations

import itertools
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


def memory_envelope(
    lifetimes: dict[int, list[Any]], final: dict[int, str], phases: list[str]
) -> dict[str, dict[str, int]]:
    """Bytes by category at each phase's own peak and at every op that is the peak somewhere.

    Each phase's peak is keyed by the phase; an op that is the peak at some scale of the
    micro-batch is keyed ``phase.i``.

    ``lifetimes``: storage key -> [bytes, category, first mark live, mark freed at or None];
    ``final``: categories learned later (a gradient); ``phases``: each mark's phase.
    """
    marks = len(phases)
    if not marks:
        return {}
    diff = {c: [0] * (marks + 1) for c in CATEGORIES}
    for key, (nbytes, category, start, end) in lifetimes.items():
        stop = marks if end is None else end
        if start < stop:
            column = diff[final.get(key, category)]
            column[start] += nbytes
            column[stop] -= nbytes
    live = {c: list(itertools.accumulate(diff[c][:marks])) for c in CATEGORIES}

    def at(t: int) -> dict[str, int]:
        return {c: live[c][t] for c in CATEGORIES}

    totals = [sum(live[c][t] for c in CATEGORIES) for t in range(marks)]
    out: dict[str, dict[str, int]] = {}
    peaks: dict[str, int] = {}
    for t, phase in enumerate(phases):
        if phase not in peaks or totals[t] > totals[peaks[phase]]:
            peaks[phase] = t
    for phase, t in peaks.items():
        out[phase] = at(t)
    lines = []
    for t, phase in enumerate(phases):
        grows = growing_bytes(at(t), phase)
        lines.append((grows, totals[t] - grows, t))
    staircase, best_fixed = [], -1
    for grows, fixed, t in sorted(lines, reverse=True):  # most growing first: keep what no other beats
        if fixed > best_fixed:
            staircase.append((fixed, grows, t))
            best_fixed = fixed
    chosen = sorted({max(staircase, key=lambda line: line[0] + r * line[1])[2] for r in _SCALES})
    for i, t in enumerate(chosen):
        out[f"{phases[t]}.{i}"] = at(t)
    return out


__all__ = ["CATEGORIES", "growing_bytes", "growing_categories", "memory_envelope", "phase_of"]
