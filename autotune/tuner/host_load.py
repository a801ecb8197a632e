"""How busy the rest of the machine was while a trial ran: other processes' CPU, in cores.

A trial's throughput on a shared machine moves with what else runs there. Measured from the
machine's busy CPU time (``psutil.cpu_times``) less the trial's own (the tuner's waited-for
children: every rank of the trial, through torchrun too) and the tuner's own, over the trial's wall
time. Processes that start and end during the trial are counted too (nothing is sampled).
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

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

    def own_cores(self) -> float | None:
        """Mean cores the waited-for children (a trial's processes) used since the start, or None."""
        wall = time.monotonic() - self._t0
        return (_children_s() - self._children0) / wall if wall >= 0.05 else None


def free_cores(seconds: float = 0.5) -> tuple[int, float]:
    """(cores other processes leave free now, their busy cores), over ``seconds`` of this machine.

    At least one core; the tuner's own CPU (and its waited-for children's) is not counted as theirs.
    """
    load = OtherLoad()
    time.sleep(seconds)
    others = load.cores() or 0.0
    return max(1, len(usable_cpus()) - round(others)), others


#: A probe of the CPU a run would get now: a leader on the cores in argv[2] (comma separated; none:
#: wherever it is put) forks argv[3] children that spin for argv[1] seconds, all in the leader's
#: session as a trial's ranks and threads are in one, and prints the least share of a core one got.
_PROBE = """import os, sys, time
seconds, where, count = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
if where:
    os.sched_setaffinity(0, {int(c) for c in where.split(",")})
pipes = []
for _ in range(count):
    r, w = os.pipe()
    if os.fork() == 0:
        os.close(r)
        wall0, cpu0 = time.monotonic(), time.process_time()
        while time.monotonic() - wall0 < seconds:
            pass
        os.write(w, str((time.process_time() - cpu0) / (time.monotonic() - wall0)).encode())
        os._exit(0)
    os.close(w)
    pipes.append(r)
shares = [float(os.read(r, 64) or b"0") for r in pipes]
for _ in pipes:
    os.wait()
print(min(shares))
"""


def cpu_share_now(cpus: Sequence[int] | None, demand_cores: float, seconds: float = 0.5) -> float | None:
    """The share of a core each of a run's threads would get now (the least of them), or None.

    As many spinning probes as the run's threads (at most the cores), in one session of their own
    on ``cpus`` (a pinned trial's slot; None: the machine), as a trial's processes are: the kernel
    shares the CPU with them as it would with the run, whatever the others' priorities, groups or
    limits (a busy CPU alone does not say it: beside two busy loops of one session, a process of
    another session still gets a whole core here). None when the probe could not run.
    """
    cores = list(cpus) if cpus else usable_cpus()
    count = max(1, min(len(cores), math.ceil(demand_cores)))
    where = ",".join(map(str, cpus)) if cpus else ""
    command = [sys.executable, "-S", "-c", _PROBE, str(seconds), where, str(count)]
    try:
        probe = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
        )
    except OSError:
        return None
    try:
        out, _ = probe.communicate(timeout=seconds + 30)
        return float(out.strip())
    except (subprocess.TimeoutExpired, ValueError):
        return None
    finally:
        if probe.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(probe.pid, signal.SIGKILL)
            probe.wait()


def wait_for_calm(
    cpus: Sequence[int] | None,
    demand_cores: float,
    timeout_s: float,
    poll_s: float = 1.0,
    stop: Callable[[], bool] = lambda: False,
) -> tuple[bool, float | None]:
    """Wait until a run would get the CPU its threads could use; (calm, the share of a core it would get).

    Calm when each of its threads (``demand_cores``: threads × ranks, at most the cores) would get
    :data:`STARVED_FRACTION` of a core or more (:func:`cpu_share_now`): a run then is not short of CPU
    as :meth:`LoadProfile.starved_share` counts it. ``cpus``: the cores a pinned trial runs on (its
    slot). Probed every ``poll_s`` for up to ``timeout_s``; not calm at once when the probe cannot
    run (share None), or as soon as ``stop()`` says the study stops.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        share = cpu_share_now(cpus, demand_cores)
        if share is not None and share >= STARVED_FRACTION:
            return True, share
        if share is None or stop() or time.monotonic() >= deadline:
            return False, share
        time.sleep(poll_s)


def machine_cores() -> int:
    """Logical cores of this machine (what ``other_load_cores`` is out of)."""
    return os.cpu_count() or 1
