"""The parts of a profile summary, typed: step times, throughput, loss, memory, device, top ops, error.

Each is a frozen record with units in its field names and a ``parse(data, where)`` that checks the
JSON object summary.json holds (``profilers.contract.summarize`` writes it) and raises one-line
``SummaryError`` naming the field for a wrong type. A missing object or field is None (an older or a
partial summary shows "n/a" where it is drawn), never an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from profilers.contract.json_checks import (
    SummaryError,
    is_number,
    optional_int,
    optional_number,
    optional_str,
)


def _object(data: Any, where: str) -> Mapping[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise SummaryError(f"{where} must be an object or null, not {type(data).__name__}")
    return data


@dataclass(frozen=True)
class StepTimes:
    """``step_time_s``: the measured steps' time in seconds."""

    median_s: float | None = None
    mean_s: float | None = None
    p10_s: float | None = None
    p90_s: float | None = None

    @classmethod
    def parse(cls, data: Any, where: str) -> StepTimes:
        """``data`` (summary.json's ``step_time_s``), checked."""
        d, w = _object(data, f"{where}: step_time_s"), f"{where}: step_time_s"
        return cls(*(optional_number(d, k, w) for k in ("median", "mean", "p10", "p90")))


@dataclass(frozen=True)
class Throughput:
    """``throughput``: samples (and tokens) per second over the measured steps, with an interval."""

    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    #: 95% interval (low, high); high is None when the interval of the mean step time reaches 0
    #: (``summarize.rate_interval``: a few steps far apart).
    samples_per_s_ci95: tuple[float | None, float | None] | None = None

    @classmethod
    def parse(cls, data: Any, where: str) -> Throughput:
        """``data`` (summary.json's ``throughput``), checked."""
        d, w = _object(data, f"{where}: throughput"), f"{where}: throughput"
        ci = d.get("samples_per_s_ci95")
        interval = None
        if ci is not None:
            if not (isinstance(ci, list) and len(ci) == 2 and all(v is None or is_number(v) for v in ci)):
                raise SummaryError(f"{w}: 'samples_per_s_ci95' must be [low, high] or null, not {ci!r}"[:300])
            interval = (None if ci[0] is None else float(ci[0]), None if ci[1] is None else float(ci[1]))
        return cls(optional_number(d, "samples_per_s", w), optional_number(d, "tokens_per_s", w), interval)

    @property
    def bounded_ci95(self) -> tuple[float, float] | None:
        """The interval when both its ends are known."""
        ci = self.samples_per_s_ci95
        return None if ci is None or ci[0] is None or ci[1] is None else (ci[0], ci[1])


@dataclass(frozen=True)
class LossFigures:
    """``loss``: the training loss the run computed, per step and summed up."""

    first: float | None = None
    last: float | None = None
    min: float | None = None
    last_mean: float | None = None
    non_finite_steps: int = 0
    first_non_finite_step: int | None = None
    per_step: tuple[float | None, ...] | None = None  # None: not recorded

    @classmethod
    def parse(cls, data: Any, where: str) -> LossFigures:
        """``data`` (summary.json's ``loss``), checked."""
        d, w = _object(data, f"{where}: loss"), f"{where}: loss"
        per_step = d.get("per_step")
        if per_step is not None and not (
            isinstance(per_step, list) and all(v is None or is_number(v) for v in per_step)
        ):
            raise SummaryError(f"{w}: 'per_step' must hold numbers or nulls")
        return cls(
            first=optional_number(d, "first", w),
            last=optional_number(d, "last", w),
            min=optional_number(d, "min", w),
            last_mean=optional_number(d, "last_mean", w),
            non_finite_steps=optional_int(d, "non_finite_steps", w) or 0,
            first_non_finite_step=optional_int(d, "first_non_finite_step", w),
            per_step=None if per_step is None else tuple(None if v is None else float(v) for v in per_step),
        )


@dataclass(frozen=True)
class MemoryFigures:
    """``memory``: CUDA's allocator peaks, and the process's resident memory on the host, in bytes."""

    cuda_peak_allocated_bytes: int | None = None
    cuda_peak_reserved_bytes: int | None = None
    rss_start_bytes: int | None = None
    rss_peak_bytes: int | None = None
    rss_peak_growth_bytes: int | None = None
    profiler_rss_bytes: int | None = None
    heap_live_bytes_max: int | None = None

    @classmethod
    def parse(cls, data: Any, where: str) -> MemoryFigures:
        """``data`` (summary.json's ``memory``), checked."""
        d, w = _object(data, f"{where}: memory"), f"{where}: memory"
        return cls(**{k: optional_int(d, k, w) for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class DeviceEntry:
    """``device``: what the run trained on (a CUDA device, or the CPU's model name)."""

    kind: str | None = None  # "cuda" or "cpu"
    name: str | None = None
    count: int | None = None  # devices in the job
    index: int | None = None  # the CUDA index of this rank's device
    nvml_indexes: tuple[int, ...] | None = None  # the job's GPUs as NVML numbers them

    @classmethod
    def parse(cls, data: Any, where: str) -> DeviceEntry:
        """``data`` (summary.json's ``device``), checked."""
        d, w = _object(data, f"{where}: device"), f"{where}: device"
        nvml = d.get("nvml_indexes")
        if nvml is not None and not (isinstance(nvml, list) and all(isinstance(i, int) for i in nvml)):
            raise SummaryError(f"{w}: 'nvml_indexes' must be a list of integers or null, not {nvml!r}"[:300])
        return cls(
            optional_str(d, "kind", w),
            optional_str(d, "name", w),
            optional_int(d, "count", w),
            optional_int(d, "index", w),
            None if nvml is None else tuple(nvml),
        )

    @property
    def label(self) -> str | None:
        """The device's name, else its kind."""
        return self.name or self.kind


@dataclass(frozen=True)
class TopOp:
    """One of ``top_ops``: an operator (or, on CUDA, a kernel) of the profiler window, by self time."""

    name: str
    device: str | None
    calls: int | None
    self_time_us: float | None
    total_time_us: float | None
    flops: int | None

    @classmethod
    def parse_all(cls, data: Any, where: str) -> tuple[TopOp, ...]:
        """summary.json's ``top_ops`` list, checked."""
        if data is None:
            return ()
        if not isinstance(data, list):
            raise SummaryError(f"{where}: 'top_ops' must be a list, not {type(data).__name__}")
        out = []
        for i, op in enumerate(data):
            w = f"{where}: top_ops[{i}]"
            if not isinstance(op, Mapping):
                raise SummaryError(f"{w} must be an object, not {type(op).__name__}")
            out.append(cls(
                str(op.get("name", "?")),
                optional_str(op, "device", w),
                optional_int(op, "calls", w),
                optional_number(op, "self_time_us", w),
                optional_number(op, "total_time_us", w),
                optional_int(op, "flops", w),
            ))  # fmt: skip
        return tuple(out)


@dataclass(frozen=True)
class RunError:
    """``error``: the exception that ended the run (profilers.contract.outcome)."""

    type: str | None
    message: str
    step: int | None  # the 1-based step it was raised in (None: before any)
    exit_code: int | None  # SystemExit's status

    @classmethod
    def parse(cls, data: Any, where: str) -> RunError | None:
        """``data`` (summary.json's ``error``), checked; None when the run raised nothing."""
        if data is None:
            return None
        d, w = _object(data, f"{where}: error"), f"{where}: error"
        return cls(
            optional_str(d, "type", w),
            optional_str(d, "message", w) or "",
            optional_int(d, "step", w),
            optional_int(d, "exit_code", w),
        )


@dataclass(frozen=True)
class ProfileWindow:
    """``profile_window``: the whole torch.profiler window summed up (profilers.runtime.deep.window_stats).

    Times in µs over the window's ``steps``; the CUDA figures are None on the CPU.
    """

    steps: int
    wall_us: float
    cpu_op_self_us: float | None = None
    kernels: int | None = None
    kernel_time_us: float | None = None
    kernel_mean_us: float | None = None
    kernel_median_us: float | None = None
    kernel_busy_us: float | None = None
    tensor_core_fraction: float | None = None  # 0-1 of kernel time, by kernel name
    collective_calls: int | None = None
    collective_time_us: float | None = None
    collective_exposed_us: float | None = None
    collective_source: str | None = None  # "device_kernels", "backend_ranges", "frontend_ops"
    dataloader_us: float | None = None
    dataloader_iter: str | None = None  # the DataLoader iterator's class

    @classmethod
    def parse(cls, data: Any, where: str) -> ProfileWindow | None:
        """``data`` (summary.json's ``profile_window``), checked; None without a window (or an empty one)."""
        d, w = _object(data, f"{where}: profile_window"), f"{where}: profile_window"
        steps, wall = optional_int(d, "steps", w), optional_number(d, "wall_us", w)
        if not steps or not wall:
            return None
        def us(key: str) -> float | None:
            return optional_number(d, key, w)

        return cls(
            steps=steps,
            wall_us=wall,
            cpu_op_self_us=us("cpu_op_self_us"),
            kernels=optional_int(d, "kernels", w),
            kernel_time_us=us("kernel_time_us"),
            kernel_mean_us=us("kernel_mean_us"),
            kernel_median_us=us("kernel_median_us"),
            kernel_busy_us=us("kernel_busy_us"),
            tensor_core_fraction=optional_number(d, "tensor_core_fraction", w),
            collective_calls=optional_int(d, "collective_calls", w),
            collective_time_us=us("collective_time_us"),
            collective_exposed_us=us("collective_exposed_us"),
            collective_source=optional_str(d, "collective_source", w),
            dataloader_us=us("dataloader_us"),
            dataloader_iter=optional_str(d, "dataloader_iter", w),
        )


__all__ = [
    "DeviceEntry",
    "LossFigures",
    "MemoryFigures",
    "ProfileWindow",
    "RunError",
    "StepTimes",
    "Throughput",
    "TopOp",
]
