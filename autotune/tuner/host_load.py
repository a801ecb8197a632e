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
from collections.abc import Sequence

from autotune.tuner.devices import usable_cpus
from profilers.contract.load import STARVED_FRACTION


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


def _busy_on(cpus: Sequence[int]) -> float:
    """Busy CPU seconds so far of the logical cores ``cpus`` (a pinned trial's slot)."""
    import psutil

    per_cpu = psutil.cpu_times(percpu=True)
    total = 0.0
    for index in cpus:
        if 0 <= index < len(per_cpu):
            t = per_cpu[index]
            guest = getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
            total += sum(t) - t.idle - getattr(t, "iowait", 0.0) - guest
    return total


def wait_for_calm(
    cpus: Sequence[int] | None, demand_cores: float, timeout_s: float, poll_s: float = 1.0
) -> tuple[bool, float]:
    """Wait until other processes leave a run the CPU its threads could use; (calm, their busy cores).

    ``cpus``: the cores a pinned trial runs on (its slot: a sibling trial on another slot is not in
    the way), None for the machine. Calm when what they leave free of those cores reaches
    :data:`STARVED_FRACTION` of ``demand_cores`` (threads × ranks, at most the cores): a run then is
    not short of CPU as :meth:`LoadProfile.starved_share` counts it. Read every ``poll_s`` for up to
    ``timeout_s``; nothing of the study runs here meanwhile, except sibling trials on other slots.
    """
    cores = list(cpus) if cpus else usable_cpus()
    want = STARVED_FRACTION * min(demand_cores, len(cores))
    deadline = time.monotonic() + timeout_s
    while True:
        if cpus:
            t0, busy0 = time.monotonic(), _busy_on(cores)
            time.sleep(poll_s)
            others = (_busy_on(cores) - busy0) / (time.monotonic() - t0)
        else:
            load = OtherLoad()
            time.sleep(poll_s)
            others = load.cores() or 0.0
        if len(cores) - others >= want:
            return True, others
        if time.monotonic() >= deadline:
            return False, others


def machine_cores() -> int:
    """Logical cores of this machine (what ``other_load_cores`` is out of)."""
    return os.cpu_count() or 1
