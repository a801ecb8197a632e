"""Two traces of a plan at once: one here, one in a forked child, on a machine with two cores or more.

A plan traces every step twice, at two micro-batch sizes, and a trace is one Python thread
dispatching fake-tensor ops: on two cores the pair takes the time of one. The child is a fork of
this process (the model factory and the user's closures need no pickling), silent (its output
would repeat this process's), on one thread (the parent's OpenMP workers are not in the fork), and
sends its figures back pickled. When it cannot run (no ``fork``, one core, other threads in this
process, ``AUTOTUNE_PLAN_SERIAL=1``) or fails, the second trace runs here after the first, so its
error, if any, is raised here as it would be without the child.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def at_once(trace: Callable[..., T], first: int, second: int, *args: Any) -> tuple[T, T]:
    """``(trace(first, *args), trace(second, *args))``, the second in a forked child meanwhile."""
    serial = os.environ.get("AUTOTUNE_PLAN_SERIAL") == "1"
    # a fork copies one thread: another's lock (a logger's, torch's) could stay held in the child
    if serial or not hasattr(os, "fork") or _cores() < 2 or threading.active_count() > 1:
        return trace(first, *args), trace(second, *args)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: trace, send, leave without running this process's exit handlers
        status = 1
        try:
            os.close(read_fd)
            quiet = os.open(os.devnull, os.O_WRONLY)
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            # the parent's OpenMP workers are not in the fork: a parallel region would wait on them
            # forever (a model built before the plan ran its initialisation on them); one thread,
            # as torch's DataLoader workers run (the trace dispatches fake tensors anyway)
            if "torch" in sys.modules:
                sys.modules["torch"].set_num_threads(1)
            data = pickle.dumps(trace(second, *args))
            with os.fdopen(write_fd, "wb") as out:
                out.write(data)
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    try:
        here = trace(first, *args)
    except BaseException:
        os.close(read_fd)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    with os.fdopen(read_fd, "rb") as source:
        data = source.read()  # until the child closes its end (done or gone)
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        return here, trace(second, *args)
    return here, pickle.loads(data)
