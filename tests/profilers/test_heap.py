"""Live C-allocation bytes at step ends (profilers.runtime.heap): what is held, not what glibc keeps."""

from __future__ import annotations

import pytest

from profilers.contract.figures import MemoryFigures
from profilers.runtime.heap import EVERY_NS, MAX_POINTS, StepEndHeap, heap_figures, live_bytes_reader

read = live_bytes_reader()
pytestmark = pytest.mark.skipif(read is None, reason="this C library has no mallinfo2")
MIB = 2**20


def test_live_bytes_count_an_allocation_and_give_it_back_when_freed():
    assert read is not None
    before = read()
    buffer = bytearray(64 * MIB)  # zero-filled by calloc: its own mapping (hblkhd)
    during = read()
    del buffer
    after = read()
    assert 64 * MIB <= during - before < 65 * MIB
    assert during - after >= 64 * MIB


def test_readings_are_at_most_ten_a_second_and_their_number_is_bounded():
    heap = StepEndHeap()
    for t_ns in range(0, 1_000_000_000, 1_000_000):  # a step every millisecond for a second
        heap.at_step_end(t_ns)
    assert len(heap.points) == 1_000_000_000 // EVERY_NS
    long_run = StepEndHeap()
    for i in range(MAX_POINTS + 10):
        long_run.at_step_end(i * EVERY_NS)
    assert MAX_POINTS // 2 <= len(long_run.points) < MAX_POINTS
    times = [t for t, _ in long_run.points]
    assert times == sorted(times) and times[0] == 0  # thinned evenly, the start kept


def test_the_summary_figures_cover_the_steady_span_and_its_last_step_end():
    points = [(t * EVERY_NS, float(100 + t)) for t in range(20)]
    figures = heap_figures(MemoryFigures(rss_start_bytes=7), points, (5 * EVERY_NS, 15 * EVERY_NS - 1))
    assert figures.heap_live_bytes_max == 119 and figures.rss_start_bytes == 7
    envelope = figures.heap_live_envelope
    assert envelope is not None
    assert envelope.readings == 11  # 5..15: the reading a moment after the last step is in
    assert envelope.peaks[-1][1] == 115.0
    assert heap_figures(MemoryFigures(), [], None) == MemoryFigures()
