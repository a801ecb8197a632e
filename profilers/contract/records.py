"""Typed records of a run. Units are in every field name; ``None`` means "not supported here".

Part of the run directory's contract (``profilers.contract``); the names of the schema (versions,
phases, tables) are in :mod:`profilers.contract.schema`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from profilers.contract.json_checks import JsonObject
from profilers.contract.lenient import read_fields, record_of


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """Static facts about one sampled device (a GPU, or the host for the host backend)."""

    index: int
    kind: str  # "gpu" or "host"
    name: str
    mem_total_bytes: int | None = None
    uuid: str | None = None
    power_limit_mw: int | None = None
    max_sm_clock_mhz: int | None = None
    max_mem_clock_mhz: int | None = None
    cpu_cores: int | None = None  # the host: logical cores (what its CPU percentages are out of)


@dataclass(frozen=True, slots=True)
class RankDevice:
    """A device as a run's store keeps it: its static facts and the rank that sampled it."""

    rank: int
    info: DeviceInfo

    @classmethod
    def from_json(cls, rank: int, data: dict[str, Any]) -> RankDevice:
        """The store's JSON of a :class:`DeviceInfo` (keys this version does not know are left out)."""
        known = {k: v for k, v in data.items() if k in DeviceInfo.__slots__}
        return cls(int(rank), DeviceInfo(**known))

    @property
    def kind(self) -> str:
        """The sample's kind: "gpu" or "host"."""
        return self.info.kind

    @property
    def index(self) -> int:
        """Its index among the devices of its kind (NVML's for a GPU)."""
        return self.info.index


@dataclass(frozen=True, slots=True)
class RankRow:
    """One rank of a run as its store's ``ranks`` table keeps it."""

    rank: int
    world_size: int | None
    host: str | None
    pid: int | None
    finished_ns: int | None  # None while it runs (or when it was killed)
    #: The rank's own summary.json object once it finished (None without it, or when not read).
    summary: JsonObject | None = None

    @property
    def facts(self) -> RankFacts:
        """What the job's summary takes of the rank's own summary (all None before it finished)."""
        return RankFacts(**read_fields(RankFacts, self.summary or {}))

    @property
    def own_cores(self) -> float | None:
        """The cores the rank's process kept busy, from its summary's ``load`` (None: unknown)."""
        return self.facts.load.own_cores


@dataclass(frozen=True, slots=True)
class OwnLoad:
    """A rank summary's ``load``, as far as the job's summary reads it."""

    own_cores: float | None = None  # the cores the rank's own process kept busy


@dataclass(frozen=True, slots=True)
class RankFacts:
    """What the job's summary reads of a finished rank's own summary.json (read leniently)."""

    peak_memory_bytes: int | None = None
    load: OwnLoad = field(default=OwnLoad(), metadata=record_of(OwnLoad))


class DeviceSample(NamedTuple):
    """One reading of one device at ``t_ns`` (``time.time_ns()``, wall clock).

    GPU fields are filled by GPU backends, host fields by the host backend; every field a backend
    cannot read on this machine is ``None``. A named tuple, not a dataclass: a report reads a
    million of them from run.db, and a tuple is built several times faster than a frozen
    dataclass (which sets each field through ``object.__setattr__``).
    """

    t_ns: int
    device_index: int
    kind: str  # "gpu" or "host"
    # GPU (NVML)
    gpu_util_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    mem_busy_pct: float | None = None  # NVML "memory utilization": % of time memory was read/written
    power_mw: int | None = None
    energy_mj: int | None = None  # total energy counter since driver load
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    temperature_c: int | None = None
    throttle_reasons: int | None = None  # NVML clocks-event-reasons bit mask
    pcie_rx_kbps: int | None = None  # KB/s, as NVML reports
    pcie_tx_kbps: int | None = None
    process_mem_bytes: int | None = None  # GPU memory used by this process
    # host (psutil)
    cpu_util_pct: float | None = None  # system-wide, 0-100
    process_cpu_pct: float | None = None  # this process and its children (DataLoader workers); 100 a core
    rss_bytes: int | None = None  # this process's resident set
    host_mem_used_bytes: int | None = None
    host_mem_total_bytes: int | None = None

    def to_dict(self) -> dict[str, object]:
        """Field name to value, for JSON and the run store."""
        return dict(zip(self._fields, self, strict=True))


#: Column order of DeviceSample, used by the run store and the replay format.
SAMPLE_FIELDS: tuple[str, ...] = DeviceSample._fields
#: The fields a host reading fills (the last of DeviceSample's; its GPU fields are None).
HOST_FIELDS: tuple[str, ...] = SAMPLE_FIELDS[SAMPLE_FIELDS.index("cpu_util_pct") :]


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One training step as measured. Phase durations sum to ``duration_ns``."""

    step: int  # 1-based, per rank
    rank: int
    start_ns: int  # wall clock (time.time_ns()) at the step's start
    duration_ns: int
    data_ns: int
    forward_ns: int
    backward_ns: int
    optimizer_ns: int
    other_ns: int
    samples: int | None  # samples in the step (None when no tensor input was seen)
    tokens: int | None  # tokens when the input held integer token ids, else None
    kind: str  # "warmup", "flops" (FLOP counting), "trace" (deep-profile window) or "measured"
    #: Mean of the scalar losses backpropagated in the step (NaN/inf kept as they are), or None
    #: when no scalar floating loss was backpropagated.
    loss: float | None = None
    #: Evaluation inside the step: forwards under no_grad/inference_mode or of a model in eval mode.
    eval_ns: int = 0
    #: Whether the phases were timed on the clock of ``duration_ns``. False: a CUDA step between the
    #: steps that time their phases on the GPU (``profilers.runtime.cuda_clock``); its duration is
    #: the GPU's, its phases the host's split of it. Phase figures read :func:`phase_timed` steps.
    phases_timed: bool = True

    def phase_ns(self) -> dict[str, int]:
        """Phase name to its duration in ns (PHASES order)."""
        return {
            "data": self.data_ns,
            "forward": self.forward_ns,
            "backward": self.backward_ns,
            "optimizer": self.optimizer_ns,
            "eval": self.eval_ns,
            "other": self.other_ns,
        }


def phase_timed(steps: Sequence[StepRecord]) -> list[StepRecord]:
    """The steps whose phases were timed on their own clock (every one when none was)."""
    timed = [s for s in steps if s.phases_timed]
    return timed or list(steps)


def mean_loss(values: Sequence[float]) -> float | None:
    """Mean of a step's losses (one per backward pass), None for none; never overflows on finite values."""
    if not values:
        return None
    n = len(values)
    return sum(v / n for v in values)


@dataclass(frozen=True, slots=True)
class OpRecord:
    """One operator or kernel from the deep-profile window, aggregated over the window."""

    name: str
    device: str  # "cpu" or "cuda"
    calls: int
    self_time_us: float
    total_time_us: float
    flops: int | None
