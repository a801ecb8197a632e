"""The one module that imports ``pynvml`` (from nvidia-ml-py).

NVML is initialised lazily on first use (thread-safe) and shut down at interpreter exit. Metric
reads go through :func:`query`, which turns every NVML error (not supported, no permission,
function not found in this driver, GPU lost, ...) into ``None``, so a backend never raises for a
metric this machine cannot report. When NVML cannot be used at all, :func:`init` raises
:class:`NvmlUnavailable` whose message is a one-line reason for a human.

Units are NVML's: power in mW, energy in mJ, clocks in MHz, PCIe throughput in KB/s.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import types
from typing import Any

from profilers.contract.schema import THROTTLE_REASONS, throttle_reason_names

__all__ = [
    "THROTTLE_REASONS",
    "NvmlUnavailable",
    "clocks_event_reasons",
    "constant",
    "device_count",
    "device_handle",
    "driver_version",
    "init",
    "is_available",
    "nvml_version",
    "query",
    "reset",
    "text",
    "throttle_reason_names",
    "unavailable_reason",
]

class NvmlUnavailable(RuntimeError):
    """NVML cannot be used on this machine; ``str(exc)`` is a one-line reason for a human."""


_lock = threading.RLock()
_nvml: types.ModuleType | None = None  # the pynvml module, once NVML is initialised
_error: NvmlUnavailable | None = None  # why init failed, remembered so we try once
_shutdown_registered = False
_closed_at_exit = False


def _reason(mod: types.ModuleType, exc: BaseException) -> str:
    """One-line human reason for an exception raised by ``nvmlInit``."""
    reasons = {
        "NVMLError_LibraryNotFound": "NVML library not found (libnvidia-ml.so.1): no NVIDIA driver installed",
        "NVMLError_DriverNotLoaded": "NVIDIA driver not loaded (is the nvidia kernel module loaded?)",
        "NVMLError_NoPermission": "no permission to open the NVIDIA devices (/dev/nvidia*)",
        "NVMLError_LibRmVersionMismatch": (
            "NVML library and NVIDIA kernel driver versions differ (reboot or reload the driver)"
        ),
    }
    for cls_name, text_ in reasons.items():
        cls = getattr(mod, cls_name, None)
        if isinstance(cls, type) and isinstance(exc, cls):
            return text_
    return f"NVML failed to initialise: {type(exc).__name__}: {exc}".replace("\n", " ")


def init() -> types.ModuleType:
    """Initialise NVML once (thread-safe) and return the ``pynvml`` module.

    Raises :class:`NvmlUnavailable` when nvidia-ml-py is not installed, the driver library is
    missing or not loaded, or NVML sees no GPU. The failure is remembered; :func:`reset` forgets it.
    """
    global _nvml, _error, _shutdown_registered
    mod = _nvml
    if mod is not None:
        return mod
    with _lock:
        if _nvml is not None:
            return _nvml
        if _error is not None:
            raise _error
        if _closed_at_exit:
            raise NvmlUnavailable("NVML was shut down at interpreter exit")
        try:
            import pynvml
        except Exception as exc:  # ImportError, or a broken install
            _error = NvmlUnavailable(f"nvidia-ml-py is not installed ({exc}): pip install nvidia-ml-py")
            raise _error from None
        try:
            pynvml.nvmlInit()
        except Exception as exc:
            _error = NvmlUnavailable(_reason(pynvml, exc))
            raise _error from None
        try:
            count = int(pynvml.nvmlDeviceGetCount())
        except Exception as exc:
            count = 0
            why = f"NVML could not count GPUs: {exc}"
        else:
            why = "NVML found no GPU (nvmlDeviceGetCount() == 0)"
        if count < 1:
            _safe_shutdown(pynvml)
            _error = NvmlUnavailable(why)
            raise _error
        if not _shutdown_registered:
            atexit.register(_shutdown_at_exit)
            _shutdown_registered = True
        _nvml = pynvml
        return pynvml


def _safe_shutdown(mod: types.ModuleType) -> None:
    """Call ``nvmlShutdown``, ignoring every error (used on teardown paths)."""
    with contextlib.suppress(Exception):
        mod.nvmlShutdown()


def _shutdown_at_exit() -> None:
    """Shut NVML down at interpreter exit; later queries return ``None``."""
    global _closed_at_exit
    with _lock:
        _closed_at_exit = True
        _shutdown_locked()


def _shutdown_locked() -> None:
    """Shut NVML down if it was initialised (caller holds ``_lock``)."""
    global _nvml
    mod, _nvml = _nvml, None
    if mod is not None:
        _safe_shutdown(mod)


def reset() -> None:
    """Shut NVML down if initialised and forget any remembered failure (for tests).

    The next :func:`init` imports ``pynvml`` again (from ``sys.modules``, so a test can inject a
    fake module) and retries.
    """
    global _error
    with _lock:
        _shutdown_locked()
        _error = None


def is_available() -> bool:
    """Whether NVML initialises and sees at least one GPU."""
    try:
        init()
    except NvmlUnavailable:
        return False
    return True


def unavailable_reason() -> str | None:
    """The one-line reason NVML cannot be used, or ``None`` when it can."""
    try:
        init()
    except NvmlUnavailable as exc:
        return str(exc)
    return None


def _nvml_errors(mod: types.ModuleType) -> tuple[type[BaseException], ...]:
    """The exception types that mean "NVML could not answer" in ``mod``."""
    errors: list[type[BaseException]] = []
    for name in ("NVMLError", "NVMLLibraryMismatchError"):
        cls = getattr(mod, name, None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            errors.append(cls)
    return tuple(errors)


def query(function: str, *args: Any) -> Any:
    """Call ``pynvml.<function>(*args)``; ``None`` when NVML cannot answer.

    Every NVML error (NotSupported, NoPermission, FunctionNotFound, GPU lost, Uninitialized, ...),
    a function this pynvml lacks, and NVML being unavailable or already shut down all give
    ``None``. Other exceptions (bugs) propagate.
    """
    try:
        mod = init()
    except NvmlUnavailable:
        return None
    fn = getattr(mod, function, None)
    if fn is None:
        return None
    try:
        return fn(*args)
    except _nvml_errors(mod):
        return None


def constant(name: str) -> Any:
    """The ``pynvml`` constant ``name`` (e.g. ``"NVML_CLOCK_SM"``); initialises NVML first."""
    return getattr(init(), name)


def text(value: object) -> str | None:
    """An NVML string result as ``str`` (older pynvml returned ``bytes``); ``None`` stays ``None``."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def device_count() -> int:
    """Number of GPUs NVML sees (raises :class:`NvmlUnavailable` when NVML is unusable)."""
    mod = init()
    try:
        return int(mod.nvmlDeviceGetCount())
    except _nvml_errors(mod) as exc:
        raise NvmlUnavailable(f"NVML could not count GPUs: {exc}") from None


def device_handle(index: int) -> Any:
    """The NVML handle of GPU ``index`` (NVML order, which ignores ``CUDA_VISIBLE_DEVICES``).

    Raises :class:`NvmlUnavailable` when the GPU cannot be opened.
    """
    mod = init()
    try:
        return mod.nvmlDeviceGetHandleByIndex(index)
    except _nvml_errors(mod) as exc:
        raise NvmlUnavailable(f"NVML could not open GPU {index}: {exc}") from None


def driver_version() -> str | None:
    """The NVIDIA driver version string, or ``None``."""
    return text(query("nvmlSystemGetDriverVersion"))


def nvml_version() -> str | None:
    """The NVML library version string, or ``None``."""
    return text(query("nvmlSystemGetNVMLVersion"))


def clocks_event_reasons(handle: Any) -> int | None:
    """The clocks-event (throttle) reasons bit mask of ``handle``, or ``None``.

    Uses ``nvmlDeviceGetCurrentClocksEventReasons`` (driver 535+) and falls back to the older
    ``nvmlDeviceGetCurrentClocksThrottleReasons``; the bits are the same (:data:`THROTTLE_REASONS`).
    """
    mask = query("nvmlDeviceGetCurrentClocksEventReasons", handle)
    if mask is None:
        mask = query("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
    return None if mask is None else int(mask)
