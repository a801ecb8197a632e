"""Two traces at once: the second in a forked child, the same answers as one after the other."""

from __future__ import annotations

import os

import pytest

from autotune.plan import two_at_once
from autotune.plan.two_at_once import at_once


def traced(n: int, scale: int) -> tuple[int, int]:
    return n * scale, os.getpid()


def test_the_second_trace_runs_in_a_child_and_comes_back_as_it_was(monkeypatch):
    monkeypatch.setattr(two_at_once, "_cores", lambda: 2)
    # threads an earlier test left in this process would make it trace serially (tested below)
    monkeypatch.setattr(two_at_once.threading, "active_count", lambda: 1)
    (a, here), (b, there) = at_once(traced, 3, 5, 10)
    assert (a, b) == (30, 50)
    assert here == os.getpid() and there != os.getpid()  # the child's pid: it ran meanwhile


def test_one_core_or_the_serial_switch_trace_here_one_after_the_other(monkeypatch):
    monkeypatch.setattr(two_at_once, "_cores", lambda: 1)
    assert [pid for _, pid in at_once(traced, 3, 5, 10)] == [os.getpid()] * 2
    monkeypatch.setattr(two_at_once, "_cores", lambda: 2)
    monkeypatch.setenv("AUTOTUNE_PLAN_SERIAL", "1")
    assert [pid for _, pid in at_once(traced, 3, 5, 10)] == [os.getpid()] * 2


def test_a_child_that_fails_is_retraced_here_and_an_error_of_the_trace_is_raised_here(monkeypatch):
    monkeypatch.setattr(two_at_once, "_cores", lambda: 2)
    monkeypatch.setattr(two_at_once.threading, "active_count", lambda: 1)
    parent = os.getpid()

    def only_here(n: int) -> tuple[int, int]:
        if os.getpid() != parent:
            raise RuntimeError("the child fails")
        return n, os.getpid()

    assert at_once(only_here, 1, 2) == ((1, parent), (2, parent))

    def second_fails(n: int) -> int:
        if n == 2:
            raise ValueError("cannot trace at micro-batch 2")
        return n

    with pytest.raises(ValueError, match="cannot trace at micro-batch 2"):
        at_once(second_fails, 1, 2)


def test_a_process_with_other_threads_traces_here_one_after_the_other(monkeypatch):
    import threading

    monkeypatch.setattr(two_at_once, "_cores", lambda: 2)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert [pid for _, pid in at_once(traced, 3, 5, 10)] == [os.getpid()] * 2
    finally:
        stop.set()
        other.join()
