"""The one hardware interface every sampling backend implements."""

from __future__ import annotations

import abc

from profilers.records import DeviceInfo, DeviceSample


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

    @abc.abstractmethod
    def devices(self) -> list[DeviceInfo]:
        """Static facts of each device this backend samples."""

    @abc.abstractmethod
    def sample(self) -> list[DeviceSample]:
        """One reading per device, taken now."""

    def supported_metrics(self) -> dict[str, bool]:
        """Metric name to whether this machine reports it (for ``autotune doctor``)."""
        readings = self.sample()
        if not readings:
            return {}
        first = readings[0].to_dict()
        return {k: v is not None for k, v in first.items() if k not in ("t_ns", "device_index", "kind")}

    def close(self) -> None:  # noqa: B027 - optional hook, default does nothing
        """Release driver handles. Idempotent."""
