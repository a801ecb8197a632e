"""A profile run's summary.json, as the profiler builds and writes it and every reader reads it.

:class:`ProfileSummary` and its parts (the GPUs', the host's, how samples were counted and where
they were sampled; the rest in :mod:`profilers.contract.figures`): built by the summarizer
(:mod:`profilers.contract.summarize`), written by :func:`~profilers.contract.json_checks.record_json`,
parsed back with every figure checked. A summary this version cannot read (a figure of the wrong
type) is refused where it is read, with one line naming the file, the entry and the field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from profilers.contract.figures import (
    DeviceEntry,
    Envelope,
    LossFigures,
    MemoryFigures,
    ModelFacts,
    ProfileWindow,
    RankEntry,
    RunError,
    SeenFacts,
    StepTimes,
    Throughput,
    TopOp,
)
from profilers.contract.json_checks import (
    DEFAULT_AS_NULL,
    NOT_WRITTEN,
    WHEN_SET,
    ReadsAsItsJson,
    SummaryError,
    checked_fields,
    checked_object,
    is_number,
    nested,
    nested_records,
)
from profilers.contract.load import LoadFigures, RunLoad
from profilers.contract.schema import PHASES, SCHEMA_VERSION


@dataclass(frozen=True)
class UtilFigures:
    """NVML utilisation of one GPU over the summary's span (``util_pct``), in percent."""

    mean: float | None = None
    readings: int | None = None  # None in summaries from before it was recorded
    p5: float | None = None
    p50: float | None = None
    p95: float | None = None
    min: float | None = None
    max: float | None = None

    @classmethod
    def parse(cls, data: Any, where: str) -> UtilFigures | None:
        """``util_pct`` (named by ``where``), checked; None when missing or empty."""
        return cls(**checked_fields(cls, data, where)) if data else None


@dataclass(frozen=True)
class ThrottleFigures:
    """How often each clocks-event reason was set (``throttle``; summarize.throttle_shares)."""

    readings: int = 0
    power_thermal_share: float = 0.0  # 0-1
    reason_shares: dict[str, float] = field(default_factory=dict)  # reason name -> 0-1

    @classmethod
    def parse(cls, data: Any, where: str) -> ThrottleFigures | None:
        """``throttle`` (named by ``where``), checked; None when missing or empty."""
        return cls(**checked_fields(cls, data, where)) if data else None


def _reason_names(value: Any, where: str) -> tuple[str, ...]:
    """``throttle_reasons``: a list of names (older summaries: one name, or NVML's bitmask)."""
    if not value:
        return ()
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    return (str(value),)


@dataclass(frozen=True)
class GpuFigures:
    """One GPU's entry of a profile summary's ``gpu`` list (summarize.gpu_aggregates)."""

    index: int
    name: str | None = None
    samples: int = 0
    #: The readings the rates cover: "measured_steps", or "session" when fewer than 2 fell inside.
    span: str | None = None
    duration_s: float | None = None  # the span its readings cover (energy_j is over it)
    util: UtilFigures | None = field(default=None, metadata=nested(UtilFigures.parse, "util_pct"))
    mem_used_bytes_max: int | None = None
    mem_total_bytes: int | None = None
    process_mem_bytes_max: int | None = None
    mem_busy_pct_mean: float | None = None
    power_w_mean: float | None = None
    power_w_max: float | None = None
    energy_j: float | None = None
    run_energy_j: float | None = None  # over the whole session
    sm_clock_mhz_mean: float | None = None
    mem_clock_mhz_mean: float | None = None
    temperature_c_max: float | None = None
    #: The reasons seen set (names), over the whole session.
    throttle_reasons: tuple[str, ...] = field(default=(), metadata=nested(_reason_names))
    throttle: ThrottleFigures | None = field(default=None, metadata=nested(ThrottleFigures.parse))
    mem_used_envelope: Envelope | None = field(default=None, metadata=nested(Envelope.parse))
    pcie_rx_kbps_mean: float | None = None
    pcie_tx_kbps_mean: float | None = None

    @classmethod
    def parse(cls, data: Any, where: str) -> GpuFigures:
        """The entry ``data``, or SummaryError naming ``where`` and the field."""
        if not isinstance(data, dict) or not isinstance(data.get("index"), int):
            raise SummaryError(f"{where}: a GPU entry must be an object with its index, not {data!r}"[:300])
        return cls(**checked_fields(cls, data, f"{where}[{data['index']}]"))

    @classmethod
    def parse_list(cls, data: Any, where: str) -> tuple[GpuFigures, ...]:
        """A profile summary's ``gpu`` list (named by ``where``), each entry checked."""
        if data is not None and not isinstance(data, list):
            raise SummaryError(f"{where} must be a list or null, not {type(data).__name__}")
        return tuple(cls.parse(g, where) for g in data or ())


@dataclass(frozen=True)
class HostFigures:
    """A profile summary's ``host`` entry (summarize.host_aggregates): this rank's process and host."""

    samples: int = 0
    cpu_util_pct_mean: float | None = None
    process_cpu_pct_mean: float | None = None  # this process and its children, % of one core
    rss_peak_bytes: int | None = None
    host_mem_total_bytes: int | None = None
    rss_envelope: Envelope | None = field(default=None, metadata=nested(Envelope.parse))

    @classmethod
    def parse(cls, data: Any, where: str) -> HostFigures | None:
        """The entry ``data`` (None stays None), or SummaryError naming ``where`` and the field."""
        return None if data is None else cls(**checked_fields(cls, data, where))


def _phases(data: Any, where: str) -> dict[str, float]:
    """``phases``: each phase's share of the step (other keys, such as ``bins``, left out)."""
    shares = {}
    for name, value in checked_object(data, where).items():
        if is_number(value):
            shares[name] = float(value)
        elif name in PHASES and value is not None:
            raise SummaryError(f"{where}.{name} must be a number or null, not {value!r}"[:300])
    return shares


_NULL = DEFAULT_AS_NULL


def _or_null(parse: Callable[[Any, str], Any], key: str | None = None) -> dict[str, Any]:
    """A part read by ``parse`` and written as null when it holds its default (not measured)."""
    return {**nested(parse, key), **_NULL}


@dataclass(frozen=True)
class SamplesSource:
    """``samples_from``: how a step's samples were counted: the override given, or the model input."""

    override: int | None = field(default=None, metadata=WHEN_SET)  # --samples-per-step
    module: str | None = field(default=None, metadata=WHEN_SET)  # the class whose input counted them
    input: str | None = field(default=None, metadata=WHEN_SET)  # which input ("args[0]", "input_ids")
    batch_dim: int | None = field(default=None, metadata=WHEN_SET)
    shape: tuple[int, ...] | None = field(default=None, metadata=WHEN_SET)  # its shape when first seen
    tokens: bool | None = field(default=None, metadata=WHEN_SET)  # it held token ids

    @classmethod
    def parse(cls, data: Any, where: str) -> SamplesSource | None:
        """``samples_from`` (named by ``where``), checked; None when not known."""
        return None if data is None else cls(**checked_fields(cls, data, where))


@dataclass(frozen=True)
class SamplingFacts:
    """``sampling``: where each sampling backend ran at the end, and why not in the sampler process."""

    where: dict[str, str] = field(default_factory=dict)  # backend -> "sampler process" / "training process"
    notes: tuple[str, ...] = ()

    @classmethod
    def parse(cls, data: Any, where: str) -> SamplingFacts | None:
        """``sampling`` (named by ``where``), checked; None when nothing was sampled."""
        return None if data is None else cls(**checked_fields(cls, data, where))


@dataclass(frozen=True)
class ProfileSummary(ReadsAsItsJson):
    """A profile run's summary.json: built by the profiler, written and read back as this record.

    Its fields are summary.json's keys in the order written (``profilers.contract.fields`` says what
    each means). It also reads as the JSON object (``summary["samples_from"]``): the one it was
    parsed from (a newer writer's keys kept), or the one it writes. Missing parts are None or empty
    (an older, partial or crashed run's summary).
    """

    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=NOT_WRITTEN)
    schema: int | None = SCHEMA_VERSION
    name: str | None = None
    run_dir: str | None = None
    steps: int | None = None
    measured_steps: int | None = None
    step_time: StepTimes = field(default=StepTimes(), metadata=_or_null(StepTimes.parse, "step_time_s"))
    throughput: Throughput = field(default=Throughput(), metadata=nested(Throughput.parse))
    phases: dict[str, float] = field(default_factory=dict, metadata=_or_null(_phases))  # phase -> share
    peak_memory_bytes: int | None = None
    memory: MemoryFigures = field(default=MemoryFigures(), metadata=_or_null(MemoryFigures.parse))
    flops_per_step: int | None = None
    mfu: float | None = None  # 0-1
    peak_flops_per_s: float | None = None  # the peak mfu is taken against
    precision: str | None = None
    device: DeviceEntry = field(default=DeviceEntry(), metadata=_or_null(DeviceEntry.parse))
    gpus: tuple[GpuFigures, ...] = field(default=(), metadata=_or_null(GpuFigures.parse_list, "gpu"))
    host: HostFigures | None = field(default=None, metadata=nested(HostFigures.parse))
    #: Other processes' CPU while it ran (None: not recorded).
    load_figures: LoadFigures | None = field(default=None, metadata=nested(LoadFigures.parse, "load"))
    rank: int | None = None  # the rank that wrote it
    #: Each rank's figures, on the summary of a job of several ranks.
    ranks: tuple[RankEntry, ...] = field(default=(), metadata={**nested_records(RankEntry), **_NULL})
    top_ops: tuple[TopOp, ...] = field(default=(), metadata=nested_records(TopOp))
    #: The torch.profiler window's totals (None when none ran).
    window: ProfileWindow | None = field(default=None, metadata=nested(ProfileWindow.parse, "profile_window"))
    trace_files: tuple[str, ...] = ()  # relative to the run directory
    memory_snapshot_files: tuple[str, ...] = ()  # relative to the run directory
    step_mode: str | None = None
    wall_time_s: float | None = None
    stopped_by_budget: bool | None = None  # None: not known (a run rebuilt from its store)
    stop_reason: str | None = None
    outcome: str | None = None
    error: RunError | None = field(default=None, metadata=nested(RunError.parse))
    seen: SeenFacts = field(default=SeenFacts(), metadata={**nested(SeenFacts.parse), **WHEN_SET})
    loss: LossFigures = field(default=LossFigures(), metadata=_or_null(LossFigures.parse))
    warnings: tuple[str, ...] = ()
    model: ModelFacts = field(default=ModelFacts(), metadata=_or_null(ModelFacts.parse))
    samples_from: SamplesSource | None = field(default=None, metadata=nested(SamplesSource.parse))
    params_used: dict[str, Any] = field(default_factory=dict)  # the tuning parameters its code read
    sampling: SamplingFacts | None = field(default=None, metadata=nested(SamplingFacts.parse))

    @classmethod
    def parse(cls, data: dict[str, Any], where: str) -> ProfileSummary:
        """The summary ``data`` of a profile run, or SummaryError (one line naming ``where``)."""
        return cls(raw=data, **checked_fields(cls, data, where, skip=("raw",)))

    @property
    def rank_count(self) -> int:
        """Ranks of a multi-rank job (0 for one process)."""
        return len(self.ranks)

    @property
    def load(self) -> RunLoad | None:
        """Other processes' CPU while it ran; None when not recorded or unknown."""
        return None if self.load_figures is None else self.load_figures.known

    @property
    def host_ranks(self) -> int | None:
        """Ranks on rank 0's host (the job's first ranks); None for one process or unknown."""
        return None if self.load_figures is None else self.load_figures.ranks

    @classmethod
    def of(cls, summary: ProfileSummary | Mapping[str, Any], where: str = "summary.json") -> ProfileSummary:
        """``summary`` as the record: itself, or summary.json's dict parsed (SummaryError, one line)."""
        return summary if isinstance(summary, ProfileSummary) else cls.parse(dict(summary), where)

    @classmethod
    def empty(cls) -> ProfileSummary:
        """The summary of a run that wrote none: every figure missing."""
        return _EMPTY_PROFILE

    @property
    def step_median_s(self) -> float | None:
        """The median measured step time in seconds."""
        return self.step_time.median_s

    @property
    def samples_per_s(self) -> float | None:
        """Samples per second over the measured steps."""
        return self.throughput.samples_per_s

    def gpu(self, index: int) -> GpuFigures | None:
        """The entry of NVML index ``index``, or None."""
        return next((g for g in self.gpus if g.index == index), None)


_EMPTY_PROFILE = ProfileSummary.parse({}, "no summary")


__all__ = [
    "GpuFigures",
    "HostFigures",
    "ProfileSummary",
    "SamplesSource",
    "SamplingFacts",
    "ThrottleFigures",
    "UtilFigures",
]
