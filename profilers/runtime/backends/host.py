"""Host (CPU and RAM) sampling: the fallback backend on machines without NVML.

On Linux the readings come straight from /proc through file descriptors kept open between
samples (about 40 µs a sample instead of about 230 µs through psutil); elsewhere, or when /proc
cannot be read, through psutil. Both paths compute the same quantities the way psutil does.
"""

from __future__ import annotations

import contextlib
import os
import platform
import time
import weakref
from pathlib import Path
from typing import Any

import psutil

from profilers.contract.records import DeviceInfo, DeviceSample
from profilers.runtime.backends.base import Backend
from profilers.runtime.backends.children import ChildCpu, proc_times


def cpu_model_name() -> str:
    """The CPU model (``model name`` in /proc/cpuinfo, else ``platform.processor()``)."""
    try:
        with Path("/proc/cpuinfo").open(encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() in ("model name", "Model", "Hardware") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def pinned_cpus(pid: int = 0) -> frozenset[int] | None:
    """The cores process ``pid`` (0: this one) may run on, when fewer than the machine's (taskset).

    A trial's slot is such a set. None when it may run on every core (or the platform cannot say).
    The host backend then reads the load of these cores only: what competes with the run for its own
    cores, not what runs beside it on others (a sibling trial of a parallel study on its own slot).
    """
    try:
        allowed = frozenset(os.sched_getaffinity(pid))
    except (AttributeError, OSError):
        return None
    return allowed if allowed and len(allowed) < (os.cpu_count() or 0) else None


def machine_cores() -> int:
    """The cores whose load a run's ``load`` is over: the pinned ones (:func:`pinned_cpus`), else all."""
    pinned = pinned_cpus()
    return len(pinned) if pinned is not None else (os.cpu_count() or 1)


def _busy_and_total(times: Any) -> tuple[float, float]:
    """Busy and total CPU time of a ``psutil.cpu_times()`` tuple, counted the way psutil does.

    On Linux guest time is already inside user/nice, and iowait is idle time.
    """
    total = sum(times) - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)
    busy = total - times.idle - getattr(times, "iowait", 0.0)
    return busy, total


class _Readings:
    """Raw counters of one sample: cumulative CPU seconds and memory in bytes."""

    __slots__ = ("avail", "busy", "proc_cpu_s", "rss", "total", "total_mem")

    def __init__(
        self, busy: float, total: float, proc_cpu_s: float | None, rss: int | None, total_mem: int, avail: int
    ):
        self.busy, self.total, self.proc_cpu_s, self.rss = busy, total, proc_cpu_s, rss
        self.total_mem, self.avail = total_mem, avail


class _ProcFiles:
    """/proc/stat, /proc/meminfo and /proc/<pid>/statm kept open and re-read with pread.

    ``cpus``: count only these cores' lines of /proc/stat (``cpuN``), else the machine's (``cpu``).
    """

    def __init__(self, cpus: frozenset[int] | None = None, pid: int | None = None) -> None:
        self.own = pid is None  # this process's CPU time from its clock; another's from its threads
        self.pid = os.getpid() if pid is None else pid
        self._cpus = {f"cpu{n}".encode() for n in cpus} if cpus is not None else None
        self._tick_s = 1.0 / os.sysconf("SC_CLK_TCK")
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._fds: list[int] = []
        try:
            for path in ("/proc/stat", "/proc/meminfo", f"/proc/{self.pid}/statm"):
                self._fds.append(os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)))
        except OSError:
            self.close()
            raise
        self._finalizer = weakref.finalize(self, _close_fds, self._fds)

    def close(self) -> None:
        """Close the descriptors. Idempotent."""
        _close_fds(self._fds)

    def read(self) -> _Readings:
        """Read every counter once (raises OSError or ValueError if /proc is not as expected)."""
        stat, meminfo, pstatm = self._fds
        if self._cpus is None:
            busy, total = _stat_ticks(os.pread(stat, 512, 0).split(b"\n", 1)[0].split())
        else:
            busy = total = found = 0
            for line in _read_all(stat).split(b"\n"):
                fields = line.split()
                if fields and fields[0] in self._cpus:
                    line_busy, line_total = _stat_ticks(fields)
                    busy, total, found = busy + line_busy, total + line_total, found + 1
            if found != len(self._cpus):
                raise ValueError("a pinned core is missing from /proc/stat")
        mem_total = mem_avail = -1
        for line in os.pread(meminfo, 4096, 0).split(b"\n"):
            if line.startswith(b"MemTotal:"):
                mem_total = int(line.split()[1]) * 1024
            elif line.startswith(b"MemAvailable:"):
                mem_avail = int(line.split()[1]) * 1024
            if mem_total >= 0 and mem_avail >= 0:
                break
        if mem_total < 0 or mem_avail < 0:
            raise ValueError("MemTotal/MemAvailable missing from /proc/meminfo")
        # This process's CPU time from the clock, not /proc/<pid>/stat: that one counts in 10 ms
        # ticks, which over a 100 ms sample reads as up to 10 times the true share. Another
        # process's from its CPU-time clock (:func:`process_cpu_s`).
        proc_cpu_s = time.process_time() if self.own else process_cpu_s(self.pid)
        rss = int(os.pread(pstatm, 256, 0).split()[1]) * self._page
        return _Readings(busy * self._tick_s, total * self._tick_s, proc_cpu_s, rss, mem_total, mem_avail)


def process_cpu_s(pid: int) -> float:
    """CPU seconds process ``pid`` has run, every thread's, ended ones too (OSError once it is gone).

    Linux's CPU-time clock of another process (``clock_gettime`` of ``((~pid) << 3) | 2``, the
    scheduler's nanoseconds, as ``clock_getcpuclockid`` makes it), else ``/proc/<pid>/stat``'s
    user and system ticks (10 ms).
    """
    try:
        return time.clock_gettime(((~pid) << 3) | 2)
    except OSError:
        times = proc_times(pid)
        if times is None:
            raise ProcessLookupError(pid) from None
        return times[1]


def _read_all(fd: int) -> bytes:
    """The whole of a /proc file from its start (/proc/stat grows with the cores: 80 bytes a core)."""
    chunks, offset = [], 0
    while chunk := os.pread(fd, 1 << 16, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _stat_ticks(fields: list[bytes]) -> tuple[int, int]:
    """Busy and total ticks of one /proc/stat line (b"cpu user nice system idle iowait ...")."""
    ticks = [int(x) for x in fields[1:]]
    total = sum(ticks) - sum(ticks[8:10])  # minus guest, guest_nice
    return total - ticks[3] - (ticks[4] if len(ticks) > 4 else 0), total  # minus idle, iowait


def _close_fds(fds: list[int]) -> None:
    """Close and forget every descriptor in ``fds``."""
    while fds:
        with contextlib.suppress(OSError):
            os.close(fds.pop())


def _read_psutil(proc: psutil.Process, cpus: frozenset[int] | None = None) -> _Readings:
    """The same counters through psutil (portable, slower); ``cpus``: only these cores'."""
    if cpus is None:
        busy, total = _busy_and_total(psutil.cpu_times())
    else:
        per_cpu = psutil.cpu_times(percpu=True)
        if len(per_cpu) == psutil.cpu_count():  # psutil lists online cores only: positions are ids
            pairs = [_busy_and_total(t) for n, t in enumerate(per_cpu) if n in cpus]
            busy, total = sum(b for b, _ in pairs), sum(t for _, t in pairs)
        else:
            busy, total = _busy_and_total(psutil.cpu_times())
    try:
        with proc.oneshot():
            proc_cpu_s: float | None = (
                time.process_time() if proc.pid == os.getpid() else sum(proc.cpu_times()[:2])
            )
            rss: int | None = proc.memory_info().rss
    except psutil.Error:
        proc_cpu_s = rss = None
    vm = psutil.virtual_memory()
    return _Readings(busy, total, proc_cpu_s, rss, vm.total, vm.available)


class HostBackend(Backend):
    """One device (index 0, kind ``"host"``): system CPU use, this process's CPU and RSS, host RAM.

    ``cpu_util_pct`` (system-wide, 0-100) and ``process_cpu_pct`` (this process and its child
    processes, such as DataLoader workers: 100 per busy core) cover the interval since the
    previous ``sample()``; the first covers the time since construction. They are computed from
    CPU-time deltas kept by this object, like ``psutil.cpu_percent(None)`` but without its
    per-thread baseline shared with every other caller. ``host_mem_used_bytes`` is
    ``total - available`` (memory not available to new processes without swapping), not psutil's
    narrower ``used``. Costs about 40 µs a sample on Linux, and about 15 µs more per child process.
    A process pinned to some of the cores (:func:`pinned_cpus`) reads ``cpu_util_pct`` over those
    cores only.
    """

    name = "host"

    def __init__(self, pid: int | None = None, exclude_children: frozenset[int] = frozenset()) -> None:
        """Read process ``pid``'s CPU and RSS (None: this one, followed across a fork).

        ``exclude_children``: its children left out of its CPU time (a sampler process reading it).
        """
        super().__init__()
        self._pid = pid
        self._exclude = exclude_children
        self._proc = psutil.Process(pid)
        self._cpus = pinned_cpus(pid or 0)
        files: _ProcFiles | None
        try:
            files = _ProcFiles(self._cpus, pid)
        except OSError:
            files = None
        if files is not None:
            try:
                files.read()
            except (OSError, ValueError, IndexError):
                files.close()
                files = None
        self._files = files
        self._children = ChildCpu(pid, exclude_children)
        self._last_t_ns = 0
        first = self._read()
        self._prev = (first, time.monotonic())
        self._cpu_pct = 0.0
        self._proc_pct: float | None = 0.0
        self._devices = [
            DeviceInfo(
                index=0,
                kind="host",
                name=cpu_model_name(),
                mem_total_bytes=first.total_mem,
                cpu_cores=machine_cores(),  # what cpu_util_pct is over: the pinned cores, else all
            )
        ]

    def exclude_process(self, pid: int) -> None:
        """Leave child process ``pid`` (the sampler process) out of this process's CPU time."""
        with self._lock:
            self._exclude = self._exclude | {pid}
            self._children.exclude(pid)

    def _read(self) -> _Readings:
        """Current counters, from /proc when possible (caller holds the lock, or is __init__).

        The process's CPU seconds include its children's (:class:`ChildCpu`).
        """
        if self._pid is None and self._children.pid != os.getpid():  # forked: the new process's children
            self._children = ChildCpu(None, self._exclude)
        now = self._read_own()
        if now.proc_cpu_s is not None:
            now.proc_cpu_s += self._children.seconds()
        return now

    def _read_own(self) -> _Readings:
        files = self._files
        if files is not None:
            if files.own and files.pid != os.getpid():  # forked: /proc/<pid> is the parent's
                files.close()
                files = self._files = None
            else:
                try:
                    return files.read()
                except (OSError, ValueError, IndexError):
                    files.close()
                    self._files = None
        if self._pid is None and self._proc.pid != os.getpid():
            self._proc = psutil.Process()
        return _read_psutil(self._proc, self._cpus)

    def _read_locked(self) -> list[DeviceSample]:
        """One reading of the host, taken now."""
        t_ns = max(time.time_ns(), self._last_t_ns + 1)
        self._last_t_ns = t_ns
        now = self._read()
        mono = time.monotonic()
        prev, prev_mono = self._prev
        d_total = now.total - prev.total
        if d_total > 0:  # else: within one clock tick of the last sample; repeat its values
            self._cpu_pct = min(100.0, max(0.0, 100.0 * (now.busy - prev.busy) / d_total))
            if now.proc_cpu_s is None or prev.proc_cpu_s is None or mono <= prev_mono:
                self._proc_pct = None
            else:
                self._proc_pct = max(0.0, 100.0 * (now.proc_cpu_s - prev.proc_cpu_s) / (mono - prev_mono))
            self._prev = (now, mono)
        return [
            DeviceSample(
                t_ns=t_ns,
                device_index=0,
                kind="host",
                cpu_util_pct=self._cpu_pct,
                process_cpu_pct=self._proc_pct,
                rss_bytes=now.rss,
                host_mem_used_bytes=now.total_mem - now.avail,
                host_mem_total_bytes=now.total_mem,
            )
        ]

    def _release(self) -> None:
        """Close the /proc files."""
        if self._files is not None:
            self._files.close()
            self._files = None
