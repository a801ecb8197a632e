"""GPU sampling through NVML: power, energy, utilisation, memory, clocks, temperature, PCIe."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from profilers.contract.records import DeviceInfo, DeviceSample
from profilers.runtime.backends import libnvml
from profilers.runtime.backends.base import Backend


class NvmlBackend(Backend):
    """Samples NVIDIA GPUs through NVML (``profilers.runtime.backends.libnvml``).

    ``device_indices`` picks a subset of GPUs by NVML index (NVML order ignores
    ``CUDA_VISIBLE_DEVICES``); ``None`` samples every GPU. ``DeviceSample.device_index`` is the
    NVML index. Raises :class:`~profilers.runtime.backends.libnvml.NvmlUnavailable` when NVML cannot be
    used, and ``ValueError`` for an index NVML does not have.

    ``pcie_interval_s`` rate-limits the PCIe throughput reads: each
    ``nvmlDeviceGetPcieThroughput`` call blocks for about 20 ms while NVML measures over a window,
    and two are needed per GPU (RX and TX), so reading them at 10 Hz would cost 40 % of the sampler
    thread per GPU. They are read at most once per ``pcie_interval_s`` per GPU and the last value
    is repeated in between. ``None`` turns PCIe sampling off (the fields are ``None``).
    """

    name = "nvml"

    def __init__(
        self,
        device_indices: Sequence[int] | None = None,
        *,
        pcie_interval_s: float | None = 1.0,
        pid: int | None = None,
    ):
        """``pid``: the process whose GPU memory is read (None: this one)."""
        super().__init__()
        count = libnvml.device_count()
        indices = list(range(count)) if device_indices is None else [int(i) for i in device_indices]
        bad = [i for i in indices if not 0 <= i < count]
        if bad or len(set(indices)) != len(indices) or not indices:
            raise ValueError(f"bad NVML device indices {indices}: this machine has GPUs 0..{count - 1}")
        self._handles: list[Any] = [libnvml.device_handle(i) for i in indices]
        self._indices = indices
        self._clock_sm = libnvml.constant("NVML_CLOCK_SM")
        self._clock_mem = libnvml.constant("NVML_CLOCK_MEM")
        self._temp_gpu = libnvml.constant("NVML_TEMPERATURE_GPU")
        self._pcie_rx = libnvml.constant("NVML_PCIE_UTIL_RX_BYTES")
        self._pcie_tx = libnvml.constant("NVML_PCIE_UTIL_TX_BYTES")
        self._pcie_interval_ns = None if pcie_interval_s is None else int(pcie_interval_s * 1e9)
        # per device: (monotonic ns of the last PCIe read, rx KB/s, tx KB/s)
        self._pcie_last: list[tuple[int, int | None, int | None] | None] = [None] * len(indices)
        self._pid = os.getpid() if pid is None else pid
        self._last_t_ns = 0
        self._devices = [self._device_info(i, h) for i, h in zip(indices, self._handles, strict=True)]

    def _device_info(self, index: int, handle: Any) -> DeviceInfo:
        """Static facts of one GPU."""
        q = libnvml.query
        mem = q("nvmlDeviceGetMemoryInfo", handle)
        power_limit = q("nvmlDeviceGetEnforcedPowerLimit", handle)
        if power_limit is None:
            power_limit = q("nvmlDeviceGetPowerManagementLimit", handle)
        return DeviceInfo(
            index=index,
            kind="gpu",
            name=libnvml.text(q("nvmlDeviceGetName", handle)) or f"GPU {index}",
            mem_total_bytes=_int(getattr(mem, "total", None)),
            uuid=libnvml.text(q("nvmlDeviceGetUUID", handle)),
            power_limit_mw=_int(power_limit),
            max_sm_clock_mhz=_int(q("nvmlDeviceGetMaxClockInfo", handle, self._clock_sm)),
            max_mem_clock_mhz=_int(q("nvmlDeviceGetMaxClockInfo", handle, self._clock_mem)),
        )

    def _read_locked(self) -> list[DeviceSample]:
        """One reading per GPU; a metric NVML cannot report here is ``None``."""
        return [self._sample_one(k) for k in range(len(self._handles))]

    def _pcie(self, k: int, handle: Any) -> tuple[int | None, int | None]:
        """PCIe RX/TX KB/s of device ``k``, read at most once per ``pcie_interval_s``."""
        if self._pcie_interval_ns is None:
            return None, None
        now = time.monotonic_ns()
        last = self._pcie_last[k]
        if last is not None and now - last[0] < self._pcie_interval_ns:
            return last[1], last[2]
        rx = _int(libnvml.query("nvmlDeviceGetPcieThroughput", handle, self._pcie_rx))
        tx = _int(libnvml.query("nvmlDeviceGetPcieThroughput", handle, self._pcie_tx))
        self._pcie_last[k] = (now, rx, tx)
        return rx, tx

    def _process_mem(self, handle: Any) -> int | None:
        """GPU memory used by this process on ``handle``; ``None`` when NVML does not list us.

        NVML reports host PIDs, so inside a container with its own PID namespace this process
        is not found and the field is ``None`` (as it is before this process creates a CUDA context).
        """
        procs = libnvml.query("nvmlDeviceGetComputeRunningProcesses", handle)
        if procs is None:
            return None
        used = [getattr(p, "usedGpuMemory", None) for p in procs if getattr(p, "pid", None) == self._pid]
        known = [int(u) for u in used if u is not None]
        return sum(known) if known else None

    def _sample_one(self, k: int) -> DeviceSample:
        """Read every metric of device ``k`` (caller holds the lock)."""
        h = self._handles[k]
        q = libnvml.query
        t_ns = max(time.time_ns(), self._last_t_ns + 1)
        self._last_t_ns = t_ns
        util = q("nvmlDeviceGetUtilizationRates", h)
        mem = q("nvmlDeviceGetMemoryInfo", h)
        rx, tx = self._pcie(k, h)
        return DeviceSample(
            t_ns=t_ns,
            device_index=self._indices[k],
            kind="gpu",
            gpu_util_pct=_float(getattr(util, "gpu", None)),
            mem_used_bytes=_int(getattr(mem, "used", None)),
            mem_total_bytes=_int(getattr(mem, "total", None)),
            mem_busy_pct=_float(getattr(util, "memory", None)),
            power_mw=_int(q("nvmlDeviceGetPowerUsage", h)),
            energy_mj=_int(q("nvmlDeviceGetTotalEnergyConsumption", h)),
            sm_clock_mhz=_int(q("nvmlDeviceGetClockInfo", h, self._clock_sm)),
            mem_clock_mhz=_int(q("nvmlDeviceGetClockInfo", h, self._clock_mem)),
            temperature_c=_int(q("nvmlDeviceGetTemperature", h, self._temp_gpu)),
            throttle_reasons=libnvml.clocks_event_reasons(h),
            pcie_rx_kbps=rx,
            pcie_tx_kbps=tx,
            process_mem_bytes=self._process_mem(h),
        )

    def _release(self) -> None:
        """Drop the device handles; NVML itself is shut down at interpreter exit."""
        self._handles = []


def _int(value: Any) -> int | None:
    """``int(value)``, or ``None`` for ``None``."""
    return None if value is None else int(value)


def _float(value: Any) -> float | None:
    """``float(value)``, or ``None`` for ``None``."""
    return None if value is None else float(value)
