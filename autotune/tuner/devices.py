"""The devices trials share when several run at once (``autotune tune --parallel N``).

On GPUs each trial takes as many GPUs as it has ranks, by index (``CUDA_VISIBLE_DEVICES``), and
waits until they are free: never more GPUs than exist, never one GPU for two trials. On a CPU the
cores are cut into N equal slots and each trial runs on its own slot (``AUTOTUNE_TRIAL_CPUS``,
which ``autotune profile`` applies to itself with ``os.sched_setaffinity`` before the script
starts; the ranks of a torchrun trial each do), so trials do not fight for cores. No torch here.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

#: The variable through which a trial is told the cores it may run on ("0,1").
TRIAL_CPUS_ENV = "AUTOTUNE_TRIAL_CPUS"


@dataclass(frozen=True)
class Lease:
    """The devices one trial holds: GPU indices, or a slot of the CPU's cores."""

    gpus: tuple[int, ...] = ()
    cpus: tuple[int, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``cuda:0,1`` or ``cpu:2,3``: what the trial entry's ``devices`` says."""
        if self.gpus:
            return "cuda:" + ",".join(map(str, self.gpus))
        return "cpu:" + ",".join(map(str, self.cpus))


def visible_gpus() -> list[int]:
    """Indices of the GPUs this process may give out: ``CUDA_VISIBLE_DEVICES``, else NVML's count."""
    raw = os.environ.get("CUDA_VISIBLE_DEVICES")
    if raw is not None:
        return [int(x) for x in raw.split(",") if x.strip().isdigit()]
    try:
        import pynvml  # nvidia-ml-py: only asked on a GPU machine

        pynvml.nvmlInit()
        try:
            return list(range(int(pynvml.nvmlDeviceGetCount())))
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no library: no GPU to give out
        return []


def usable_cpus() -> list[int]:
    """The cores this process may run on (its affinity)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


class DevicePool:
    """Hands out :class:`Lease` s to trials running at once, blocking until what one needs is free.

    ``gpus``: the GPU indices to share (empty: the CPU's ``cpus`` cut into ``slots`` equal slots).
    """

    def __init__(self, slots: int, gpus: list[int] | None = None, cpus: list[int] | None = None) -> None:
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self.gpus = list(gpus or [])
        cores = list(cpus if cpus is not None else usable_cpus())
        per_slot = max(1, len(cores) // slots)
        self.cpu_slots = [
            tuple(cores[i * per_slot : (i + 1) * per_slot]) or (cores[0],) for i in range(slots)
        ]
        self._free_gpus = set(self.gpus)
        self._free_slots = list(range(slots))
        self._changed = threading.Condition()

    @property
    def cores_per_slot(self) -> int:
        """Cores of each CPU slot."""
        return len(self.cpu_slots[0])

    def acquire(self, ranks: int) -> Lease:
        """The devices for a trial of ``ranks`` ranks, once free (all the GPUs if it needs more)."""
        with self._changed:
            if self.gpus:
                need = min(ranks, len(self.gpus))
                self._changed.wait_for(lambda: len(self._free_gpus) >= need)
                taken = tuple(sorted(self._free_gpus)[:need])
                self._free_gpus -= set(taken)
                return Lease(gpus=taken, env={"CUDA_VISIBLE_DEVICES": ",".join(map(str, taken))})
            self._changed.wait_for(lambda: bool(self._free_slots))
            slot = self._free_slots.pop(0)
            cpus = self.cpu_slots[slot]
            return Lease(cpus=cpus, env={TRIAL_CPUS_ENV: ",".join(map(str, cpus))})

    def release(self, lease: Lease) -> None:
        """Give ``lease`` 's devices back."""
        with self._changed:
            if lease.gpus:
                self._free_gpus |= set(lease.gpus)
            else:
                self._free_slots.append(self.cpu_slots.index(lease.cpus))
                self._free_slots.sort()
            self._changed.notify_all()

    @contextmanager
    def lease(self, ranks: int) -> Iterator[Lease]:
        """``with pool.lease(ranks) as lease:`` the devices for the block, given back after it."""
        held = self.acquire(ranks)
        try:
            yield held
        finally:
            self.release(held)


def apply_trial_cpus(environ: dict[str, str] | None = None) -> None:
    """Run this process on the cores its trial was given (``AUTOTUNE_TRIAL_CPUS``), if any."""
    raw = (os.environ if environ is None else environ).get(TRIAL_CPUS_ENV)
    if not raw or not hasattr(os, "sched_setaffinity"):
        return
    with contextlib.suppress(OSError, ValueError):  # a core that is gone: run where the process may
        os.sched_setaffinity(0, {int(x) for x in raw.split(",") if x.strip()})
