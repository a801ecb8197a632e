"""A fake ``pynvml`` module to inject into ``sys.modules``: NVML's API on GPUs this machine lacks.

It raises the real pynvml error classes and uses its constants, so the backend meets NVML's own
failure modes (unsupported metrics, missing permissions, an old driver) without a GPU.
"""

from __future__ import annotations

import collections
import os
import types
from typing import Any

import pytest

real_pynvml = pytest.importorskip("pynvml")
GiB = 1 << 30


class _Handle:
    def __init__(self, index: int):
        self.index = index


def make_fake_pynvml(
    n_devices: int = 2, init_error: BaseException | None = None, names: list[str] | None = None
) -> types.ModuleType:
    """A small fake of pynvml: even devices support everything, odd ones are older/limited GPUs.

    ``names`` overrides the device names (by default an H100 and a T4 alternate). UUIDs are
    ``GPU-0000000<i>-fake`` (NVML's ``GPU-`` prefix). ``calls`` counts the calls of each function.

    Odd devices: power and energy raise NVMLError_NotSupported, PCIe raises NVMLError_NoPermission,
    the process list raises NVMLError_NoPermission, and nvmlDeviceGetCurrentClocksEventReasons
    raises NVMLError_FunctionNotFound (a pre-535 driver) so the throttle-reasons fallback is used.
    """
    fake = types.ModuleType("pynvml")
    for name in dir(real_pynvml):  # real error classes and constants
        if name.startswith(("NVMLError", "NVML_")) or name == "NVMLLibraryMismatchError":
            setattr(fake, name, getattr(real_pynvml, name))
    calls: collections.Counter[str] = collections.Counter()
    state = {"init": 0, "energy": [1_000_000] * n_devices}
    fake.calls = calls  # type: ignore[attr-defined]
    fake.state = state  # type: ignore[attr-defined]
    E = real_pynvml

    def api(fn: Any) -> Any:
        def wrapper(*args: Any) -> Any:
            calls[fn.__name__] += 1
            if fn.__name__ not in ("nvmlInit", "nvmlShutdown") and state["init"] <= 0:
                raise E.NVMLError_Uninitialized()
            return fn(*args)

        wrapper.__name__ = fn.__name__
        setattr(fake, fn.__name__, wrapper)
        return wrapper

    def dev(handle: Any) -> int:
        if not isinstance(handle, _Handle) or not 0 <= handle.index < n_devices:
            raise E.NVMLError_InvalidArgument()
        return handle.index

    @api
    def nvmlInit() -> None:
        if init_error is not None:
            raise init_error
        state["init"] += 1

    @api
    def nvmlShutdown() -> None:
        if state["init"] <= 0:
            raise E.NVMLError_Uninitialized()
        state["init"] -= 1

    @api
    def nvmlDeviceGetCount() -> int:
        return n_devices

    @api
    def nvmlDeviceGetHandleByIndex(i: int) -> _Handle:
        if not 0 <= i < n_devices:
            raise E.NVMLError_InvalidArgument()
        return _Handle(i)

    @api
    def nvmlSystemGetDriverVersion() -> str:
        return "550.54.15"

    @api
    def nvmlSystemGetNVMLVersion() -> str:
        return "12.550.54.15"

    @api
    def nvmlDeviceGetName(h: Any) -> str:
        return names[dev(h)] if names is not None else ["NVIDIA H100 80GB HBM3", "Tesla T4"][dev(h) % 2]

    @api
    def nvmlDeviceGetUUID(h: Any) -> str:
        return f"GPU-0000000{dev(h)}-fake"

    @api
    def nvmlDeviceGetMemoryInfo(h: Any) -> Any:
        total = (80 if dev(h) % 2 == 0 else 16) * GiB
        return types.SimpleNamespace(total=total, used=total // 4, free=total - total // 4)

    @api
    def nvmlDeviceGetUtilizationRates(h: Any) -> Any:
        return types.SimpleNamespace(gpu=87 if dev(h) % 2 == 0 else 3, memory=40 if dev(h) % 2 == 0 else 1)

    @api
    def nvmlDeviceGetPowerUsage(h: Any) -> int:
        if dev(h) % 2 == 1:
            raise E.NVMLError_NotSupported()
        return 250_000

    @api
    def nvmlDeviceGetTotalEnergyConsumption(h: Any) -> int:
        if dev(h) % 2 == 1:
            raise E.NVMLError_NotSupported()
        state["energy"][dev(h)] += 25_000
        return state["energy"][dev(h)]

    @api
    def nvmlDeviceGetEnforcedPowerLimit(h: Any) -> int:
        return 700_000 if dev(h) % 2 == 0 else 70_000

    @api
    def nvmlDeviceGetClockInfo(h: Any, clock: int) -> int:
        dev(h)
        return {E.NVML_CLOCK_SM: 1980, E.NVML_CLOCK_MEM: 2619}[clock]

    @api
    def nvmlDeviceGetMaxClockInfo(h: Any, clock: int) -> int:
        dev(h)
        return {E.NVML_CLOCK_SM: 1980, E.NVML_CLOCK_MEM: 2619}[clock]

    @api
    def nvmlDeviceGetTemperature(h: Any, sensor: int) -> int:
        assert sensor == E.NVML_TEMPERATURE_GPU
        return 65 if dev(h) % 2 == 0 else 40

    @api
    def nvmlDeviceGetCurrentClocksEventReasons(h: Any) -> int:
        if dev(h) % 2 == 1:
            raise E.NVMLError_FunctionNotFound()
        return E.nvmlClocksEventReasonSwPowerCap

    @api
    def nvmlDeviceGetCurrentClocksThrottleReasons(h: Any) -> int:
        dev(h)
        return E.nvmlClocksThrottleReasonGpuIdle

    @api
    def nvmlDeviceGetPcieThroughput(h: Any, counter: int) -> int:
        if dev(h) % 2 == 1:
            raise E.NVMLError_NoPermission()
        return {E.NVML_PCIE_UTIL_RX_BYTES: 1000, E.NVML_PCIE_UTIL_TX_BYTES: 2000}[counter]

    @api
    def nvmlDeviceGetComputeRunningProcesses(h: Any) -> list[Any]:
        if dev(h) % 2 == 1:
            raise E.NVMLError_NoPermission()
        return [
            types.SimpleNamespace(pid=os.getpid(), usedGpuMemory=2 * GiB),
            types.SimpleNamespace(pid=os.getpid() + 100_000, usedGpuMemory=1 * GiB),
        ]

    return fake
