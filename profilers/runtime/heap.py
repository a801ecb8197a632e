"""Bytes in live C allocations at step ends, apart from what the allocator merely keeps (glibc).

On a CPU, torch allocates tensors with the C allocator, and the process's resident memory (RSS)
counts what that allocator keeps after a ``free`` as well as what is live: glibc's heap grows and
stays grown with no tensor held. ``mallinfo2()`` tells the two apart: ``uordblks`` (bytes in
allocated heap chunks) plus ``hblkhd`` (bytes in chunks mapped on their own, large tensors) is what
is live now, whatever RSS says. Read at the end of a step (the step's activations are freed by
then), at most every :data:`EVERY_NS`, it is the memory the training holds across steps: a leak
grows it, a heap that keeps freed memory does not. About half a microsecond a reading; None where
the C library has no ``mallinfo2`` (glibc before 2.33, musl, macOS).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from dataclasses import replace

from profilers.contract.figures import MemoryFigures
from profilers.contract.summarize import memory_envelope

#: The least time between two readings (ns): at most ten a second, however short the steps.
EVERY_NS = 100_000_000
#: Readings kept; past this every other one is dropped and readings come half as often.
MAX_POINTS = 4096


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost",
        )
    ]  # fmt: skip


def live_bytes_reader() -> Callable[[], int] | None:
    """A function giving the bytes in live C allocations now, or None without ``mallinfo2``."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = _Mallinfo2
    mallinfo2.argtypes = []

    def read() -> int:
        info = mallinfo2()
        return int(info.uordblks + info.hblkhd)

    try:
        read()
    except Exception:  # a C library that answers nothing usable
        return None
    return read


class StepEndHeap:
    """Live C-allocation bytes at step ends: (wall-clock ns, bytes) points for summary.json's memory."""

    def __init__(self) -> None:
        self._read = live_bytes_reader()
        self.points: list[tuple[int, float]] = []
        self._every_ns = EVERY_NS
        self._next_ns = 0

    def at_step_end(self, t_ns: int) -> None:
        """Take a reading if the last one is old enough (``t_ns``: ``time.time_ns()``)."""
        if self._read is None or t_ns < self._next_ns:
            return
        self.points.append((t_ns, float(self._read())))
        self._next_ns = t_ns + self._every_ns
        if len(self.points) >= MAX_POINTS:
            self.points = self.points[::2]
            self._every_ns *= 2


def heap_figures(
    memory: MemoryFigures, points: list[tuple[int, float]], steady_ns: tuple[int, int] | None
) -> MemoryFigures:
    """``memory`` with the C heap's figures from the step-end readings (as it is without any).

    ``heap_live_bytes_max``: the most live C-allocation bytes at a step end; ``heap_live_envelope``:
    their peaks over the steady span (:func:`~profilers.contract.summarize.memory_envelope`), the
    line the memory-growth rule fits beside RSS's. A step ends a moment after the span's last step
    is timed, so the span is taken to one reading interval past its end.
    """
    if not points:
        return memory
    span = (steady_ns[0], steady_ns[1] + EVERY_NS) if steady_ns is not None else None
    peak = int(max(v for _, v in points))
    return replace(memory, heap_live_bytes_max=peak, heap_live_envelope=memory_envelope(points, span))
