"""The parts of a profile summary, typed: step times, throughput, loss, memory, device, top ops, error.

Each is a frozen record with units in its field names and a ``parse(data, where)`` that checks the
JSON object summary.json holds (``profilers.contract.summarize`` writes it) and raises one-line
``SummaryError`` naming the field for a wrong type. A missing object or field is None (an older or a
partial summary shows "n/a" where it is drawn), never an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profilers.contract.json_checks import (
    WHEN_SET,
    SummaryError,
    checked_fields,
    is_number,
    nested,
    stored_as,
)


@dataclass(frozen=True)
class StepTimes:
    """``step_time_s``: the measured steps' time in seconds."""

    median_s: float | None = field(default=None, metadata=stored_as("median"))
    mean_s: float | None = field(default=None, metadata=stored_as("mean"))
    p10_s: float | None = field(default=None, metadata=stored_as("p10"))
    p90_s: float | None = field(default=None, metadata=stored_as("p90"))

    @classmethod
    def parse(cls, data: Any, where: str) -> StepTimes:
        """``data`` (summary.json's ``step_time_s``, named by ``where``), checked."""
        return cls(**checked_fields(cls, data, where))


@dataclass(frozen=True)
class Throughput:
    """``throughput``: samples (and tokens) per second over the measured steps, with an interval.

    A job of several ranks writes its own figures (the ranks' sum over ``ranks_per_replica``) and
    every rank's samples per second.
    """

    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    #: 95% interval (low, high); high is None when the interval of the mean step time reaches 0
    #: (``summarize.rate_interval``: a few steps far apart).
    samples_per_s_ci95: tuple[float | None, float | None] | None = None
    per_rank_samples_per_s: tuple[float | None, ...] | None = field(default=None, metadata=WHEN_SET)
    ranks_per_replica: int | None = field(default=None, metadata=WHEN_SET)  # tensor × pipeline degree

    @classmethod
    def parse(cls, data: Any, where: str) -> Throughput:
        """``data`` (summary.json's ``throughput``, named by ``where``), checked."""
        return cls(**checked_fields(cls, data, where))

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
        """``data`` (summary.json's ``loss``, named by ``where``), checked."""
        return cls(**checked_fields(cls, data, where))


@dataclass(frozen=True)
class Envelope:
    """A memory line's input: the peak of each equal slice of the steady span.

    See :func:`profilers.contract.summarize.memory_envelope`.
    """

    readings: int
    span_ns: tuple[int, int]
    peaks: tuple[tuple[float, float], ...]  # (seconds from the span's start, bytes)

    @classmethod
    def parse(cls, data: Any, where: str) -> Envelope | None:
        """The envelope ``data`` (None stays None), or SummaryError naming ``where``."""
        if data is None:
            return None
        try:
            readings = data["readings"]
            start, end = data["span_ns"]
            peaks = tuple((float(x), float(v)) for x, v in data["peaks"])
            if not all(is_number(v) for v in (readings, start, end)):
                raise TypeError
        except (TypeError, KeyError, ValueError):
            shape = "{readings, span_ns: [start, end], peaks: [[s, bytes]...]}"
            raise SummaryError(f"{where}: must be {shape}, not {data!r}"[:300]) from None
        return cls(int(readings), (int(start), int(end)), peaks)


@dataclass(frozen=True)
class MemoryFigures:
    """``memory``: CUDA's allocator peaks, and the process's resident memory on the host, in bytes."""

    rss_start_bytes: int | None = None
    rss_peak_bytes: int | None = None  # over the training's own steps, less profiler_rss_bytes
    ru_maxrss_bytes: int | None = None  # the process's lifetime peak, everything included
    profiler_rss_bytes: int | None = None
    rss_peak_growth_bytes: int | None = field(default=None, metadata=WHEN_SET)
    heap_live_bytes_max: int | None = field(default=None, metadata=WHEN_SET)
    #: The C heap's live bytes over the steady span (profilers.runtime.heap).
    heap_live_envelope: Envelope | None = field(default=None, metadata=nested(Envelope.parse))
    cuda_peak_allocated_bytes: int | None = field(default=None, metadata=WHEN_SET)
    cuda_peak_reserved_bytes: int | None = field(default=None, metadata=WHEN_SET)

    @classmethod
    def parse(cls, data: Any, where: str) -> MemoryFigures:
        """``data`` (summary.json's ``memory``, named by ``where``), checked."""
        return cls(**checked_fields(cls, data, where))


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
        """``data`` (summary.json's ``device``, named by ``where``), checked."""
        return cls(**checked_fields(cls, data, where))

    @property
    def label(self) -> str | None:
        """The device's name, else its kind."""
        return self.name or self.kind


@dataclass(frozen=True)
class TopOp:
    """One of ``top_ops``: an operator (or, on CUDA, a kernel) of the profiler window, by self time."""

    name: str = "?"
    device: str | None = None
    calls: int | None = None
    self_time_us: float | None = None
    total_time_us: float | None = None
    flops: int | None = None


@dataclass(frozen=True)
class RunError:
    """``error``: the exception that ended the run (profilers.contract.outcome)."""

    type: str | None = None
    message: str = ""
    step: int | None = None  # the 1-based step it was raised in (None: before any)
    exit_code: int | None = field(default=None, metadata=WHEN_SET)  # SystemExit's status

    @classmethod
    def parse(cls, data: Any, where: str) -> RunError | None:
        """``data`` (summary.json's ``error``, named by ``where``), checked; None when it raised nothing."""
        return None if data is None else cls(**checked_fields(cls, data, where))


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
        """``data`` (summary.json's ``profile_window``, named by ``where``), checked; None without a window.

        An empty window (no steps, or no time) is None too.
        """
        window = checked_fields(cls, data, where)
        return cls(**window) if window["steps"] and window["wall_us"] else None


@dataclass(frozen=True)
class ModelFacts:
    """``model``: what the profiler read off the user's model (profilers.runtime.flops.model_facts)."""

    class_name: str | None = field(default=None, metadata=stored_as("class"))
    parameters: int | None = None
    trainable_parameters: int | None = None
    parameter_bytes: int | None = None  # this rank's (a sharded model's shard)
    gradient_bytes: int | None = None  # its trainable parameters' gradients
    ddp_bucket_cap_bytes: int | None = None  # a DistributedDataParallel model's bucket size

    @classmethod
    def parse(cls, data: Any, where: str) -> ModelFacts:
        """``data`` (summary.json's ``model``, named by ``where``), checked."""
        return cls(**checked_fields(cls, data, where))


def _step_times_or_none(data: Any, where: str) -> StepTimes | None:
    return None if data is None else StepTimes.parse(data, where)


@dataclass(frozen=True)
class RankEntry:
    """One entry of a multi-rank summary's ``ranks``: what the job's summary keeps of each rank."""

    rank: int | None = None
    steps: int | None = None
    measured_steps: int | None = None
    step_time: StepTimes | None = field(default=None, metadata=nested(_step_times_or_none, "step_time_s"))
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    peak_memory_bytes: int | None = None  # its peak allocated


@dataclass(frozen=True)
class SeenFacts:
    """``seen``: what the session saw of the user's code, for a run that closed no step."""

    optimizer_steps: int | None = None  # optimizer.step() calls
    model_forward: bool = False  # a model's forward ran

    @classmethod
    def parse(cls, data: Any, where: str) -> SeenFacts:
        """``data`` (summary.json's ``seen``, named by ``where``), checked."""
        return cls(**checked_fields(cls, data, where))


__all__ = [
    "DeviceEntry",
    "Envelope",
    "LossFigures",
    "MemoryFigures",
    "ModelFacts",
    "ProfileWindow",
    "RankEntry",
    "RunError",
    "SeenFacts",
    "StepTimes",
    "Throughput",
    "TopOp",
]
