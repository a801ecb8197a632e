"""CPU time of a process's child processes (DataLoader workers and what they start), read while they run.

``time.process_time()`` counts the process alone and ``RUSAGE_CHILDREN`` only children already
waited for, so a training loop's DataLoader workers would otherwise read as "other processes" on
a shared machine. Every thread's children are listed once a second (``/proc/<pid>/task/*/children``,
two levels deep; psutil elsewhere) and the main thread's (where a DataLoader starts its workers) at
every reading, so a new worker's first second is not read as another process's. Each reading adds
what every known child used since the last one. A child born since the last listing counts from
its start; one that was already running when counting began counts from then. A child is known by
its pid and start time, so a reused pid is never read as the same process.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

#: Seconds between listings of the children (a listing reads one file per thread of the process).
REFRESH_S = 1.0

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 65536)
    finally:
        os.close(fd)


def _proc_children(pid: int, main_thread_only: bool = False) -> list[int]:
    """Direct children of ``pid`` from /proc (every thread's list); raises OSError without it."""
    out: list[int] = []
    for tid in [str(pid)] if main_thread_only else os.listdir(f"/proc/{pid}/task"):
        try:
            text = _read(f"/proc/{pid}/task/{tid}/children")
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        out += [int(p) for p in text.split()]
    return out


def proc_times(pid: int) -> tuple[int, float] | None:
    """(start time in ticks, user + system CPU seconds) of ``pid``; None once it is gone."""
    try:
        text = _read(f"/proc/{pid}/stat")
    except OSError:
        return None
    fields = text[text.rfind(b")") + 2 :].split()  # after "pid (comm) ": field 3 (state) onwards
    try:
        return int(fields[19]), (int(fields[11]) + int(fields[12])) * _TICK_S
    except (IndexError, ValueError):
        return None


def _psutil_children(pid: int) -> list[int]:
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def _psutil_times(pid: int) -> tuple[int, float] | None:
    import psutil

    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            times = proc.cpu_times()
            return int(proc.create_time() * 1000), times.user + times.system
    except psutil.Error:
        return None


class ChildCpu:
    """Cumulative CPU seconds of one process's children since this object was made."""

    def __init__(self, pid: int | None = None, exclude: frozenset[int] = frozenset()) -> None:
        self.pid = os.getpid() if pid is None else pid
        self._exclude = set(exclude)  # children not counted (the sampler process reading this one)
        self._use_proc = Path(f"/proc/{self.pid}/task").is_dir()
        self._seen: dict[int, tuple[int, float]] = {}  # pid -> (start time, CPU seconds at the last reading)
        self._total_s = 0.0
        for child in self._list():  # already running: only what they use from now on is counted
            times = self._times(child)
            if times is not None:
                self._seen[child] = times
        self._next_listing = time.monotonic() + REFRESH_S

    def exclude(self, pid: int) -> None:
        """Count child ``pid`` no more (from now on)."""
        self._exclude.add(pid)
        self._seen.pop(pid, None)

    def _list(self, main_thread_only: bool = False) -> list[int]:
        return [c for c in self._listed(main_thread_only) if c not in self._exclude]

    def _listed(self, main_thread_only: bool) -> list[int]:
        if not self._use_proc:
            return [] if main_thread_only else _psutil_children(self.pid)
        try:
            children = _proc_children(self.pid, main_thread_only)
            if main_thread_only:
                return children
            return children + [g for c in children for g in _proc_children_or_none(c)]
        except OSError:  # no children files (kernel without CONFIG_PROC_CHILDREN)
            self._use_proc = False
            return _psutil_children(self.pid)

    def _times(self, pid: int) -> tuple[int, float] | None:
        return proc_times(pid) if self._use_proc else _psutil_times(pid)

    def seconds(self) -> float:
        """CPU seconds the children used since construction, up to now."""
        now = time.monotonic()
        whole = now >= self._next_listing
        if whole:
            self._next_listing = now + REFRESH_S
        for child in self._list(main_thread_only=not whole):
            if child not in self._seen:
                times = self._times(child)
                if times is not None:  # born since the last listing: all of its time is this run's
                    self._seen[child] = (times[0], 0.0)
        for child, (start, last_s) in list(self._seen.items()):
            times = self._times(child)
            if times is None or times[0] != start:  # gone (or its pid reused)
                del self._seen[child]
                continue
            self._total_s += max(0.0, times[1] - last_s)
            self._seen[child] = (start, times[1])
        return self._total_s


def _proc_children_or_none(pid: int) -> list[int]:
    """A child's own children; [] when it ended meanwhile."""
    try:
        return _proc_children(pid)
    except OSError:
        return []
