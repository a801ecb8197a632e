"""How busy the rest of the machine was while a trial ran: other processes' CPU, in cores.

A trial's throughput on a shared machine moves with what else runs there. Measured from the
machine's busy CPU time (``psutil.cpu_times``) less the trial's own (the tuner's waited-for
children: every rank of the trial, through torchrun too) and the tuner's own, over the trial's wall
time. Processes that start and end during the trial are counted too (nothing is sampled).
"""

from __future__ import annotations

import os
import resource
import time

from autotune.tuner.devices import usable_cpus


def _busy_s() -> float:
    import psutil  # a dependency of the profiler already; imported where a trial runs

    t = psutil.cpu_times()
    idle = t.idle + getattr(t, "iowait", 0.0)
    guest = getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)  # already inside user and nice
    return sum(t) - idle - guest


def _children_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class OtherLoad:
    """Started before a trial, read after it has been waited for."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()
        self._busy0 = _busy_s()
        self._children0 = _children_s()
        self._own0 = time.process_time()

    def cores(self) -> float | None:
        """Mean cores other processes kept busy since the start (None over too short a span)."""
        wall = time.monotonic() - self._t0
        if wall < 0.05:
            return None
        busy = _busy_s() - self._busy0
        ours = (_children_s() - self._children0) + (time.process_time() - self._own0)
        return max(0.0, busy - ours) / wall


def free_cores(seconds: float = 0.5) -> tuple[int, float]:
    """(cores other processes leave free now, their busy cores), over ``seconds`` of this machine.

    At least one core; the tuner's own CPU (and its waited-for children's) is not counted as theirs.
    """
    load = OtherLoad()
    time.sleep(seconds)
    others = load.cores() or 0.0
    return max(1, len(usable_cpus()) - round(others)), others


def machine_cores() -> int:
    """Logical cores of this machine (what ``other_load_cores`` is out of)."""
    return os.cpu_count() or 1
