"""The one hardware interface every sampling backend implements."""

from __future__ import annotations

import abc
import threading

from profilers.contract.records import DeviceInfo, DeviceSample


class Backend(abc.ABC):
    """A source of device samples: NVML GPUs, the host, or a replayed recording.

    Contract (checked for every backend by tests/profilers/test_backend_contract.py):
    - ``devices()`` is cheap after the first call and stable for the backend's life.
    - ``sample()`` returns one :class:`DeviceSample` per device in ``devices()`` order, never
      raises for an unsupported metric (that metric is ``None``), and is safe to call from a
      background thread.
    - ``close()`` is idempotent; ``sample()`` after ``close()`` returns ``[]``.
    """

    #: Short name shown by ``autotune doctor`` and stored in the run directory.
    name: str = "base"
    #: The spec that builds this backend again (in the sampler process), set by ``get_backend``;
    #: None for a backend made otherwise, which is sampled where it was made.
    spec: str | None = None

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self._devices: list[DeviceInfo] = []

    def devices(self) -> list[DeviceInfo]:
        """Static facts of each device this backend samples."""
        return list(self._devices)

    def sample(self) -> list[DeviceSample]:
        """One reading per device, taken now; ``[]`` once closed."""
        with self._lock:
            if self._closed:
                return []
            return self._read_locked()

    @abc.abstractmethod
    def _read_locked(self) -> list[DeviceSample]:
        """Take one reading per device (called with the lock held, while open)."""

    def supported_metrics(self) -> dict[str, bool]:
        """Metric name to whether this machine reports it (for ``autotune doctor``)."""
        readings = self.sample()
        if not readings:
            return {}
        first = readings[0].to_dict()
        return {k: v is not None for k, v in first.items() if k not in ("t_ns", "device_index", "kind")}

    def exclude_process(self, pid: int) -> None:  # noqa: B027 - optional hook, default does nothing
        """Leave child process ``pid`` (the sampler process) out of this process's readings."""

    def close(self) -> None:
        """Release driver handles. Idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._release()

    def _release(self) -> None:  # noqa: B027 - optional hook, default does nothing
        """Free what the backend holds (called once, with the lock held)."""
