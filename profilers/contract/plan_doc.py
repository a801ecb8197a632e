"""``autotune plan --format json``'s object, parsed once into typed records.

The plan's own Markdown and HTML documents and the ``plan`` section of a run's report (a
``plan.json`` saved in the run directory) read these records, never the raw JSON: a saved plan
that lacks what they show is refused where it is read, with one line naming the field.

>>> doc = PlanDocument.parse({"configs": [{"gpu": "H100-SXM", "gpus": 8, "fits": True,
...     "params": {"micro_batch": 4, "grad_accum": 2, "precision": "bf16",
...                "activation_checkpointing": False, "layout": "ddp"}, "step_time_s": 0.5}],
...     "model": {"parameters": 124000000}, "trace_s": 1.5})
>>> doc.configs[0].params.layout, doc.configs[0].step_time_s, doc.model.parameters, doc.to_json()["trace_s"]
('ddp', 0.5, 124000000, 1.5)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from profilers.contract.json_checks import (
    NOT_WRITTEN,
    WHEN_SET,
    JsonObject,
    SummaryError,
    checked_fields,
    checked_records,
    document,
    nested,
    nested_records,
)


def _required(data: Mapping[str, Any], names: tuple[tuple[str, type], ...], where: str) -> None:
    """SummaryError naming the first of ``names`` (key, type) that ``data`` lacks or holds another type of."""
    for key, kind in names:
        value = data.get(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise SummaryError(f"{where}: {key!r} must be {kind.__name__}")


@dataclass(frozen=True)
class ParallelDegrees:
    """How a layout splits the job: data, tensor and pipeline parallel degrees."""

    dp: int = 1
    tp: int = 1
    pp: int = 1

    @classmethod
    def parse(cls, data: Any, where: str) -> ParallelDegrees:
        """``degrees`` (named by ``where``), checked; all 1 when missing (an older plan)."""
        return cls(**checked_fields(cls, data, where))


@dataclass(frozen=True)
class PlanParams:
    """What a configuration sets: the batch split, precision, checkpointing and parallel layout."""

    micro_batch: int
    grad_accum: int
    precision: str
    activation_checkpointing: bool
    layout: str  # "single", "ddp", "fsdp", "tp2×pp2"...
    degrees: ParallelDegrees = field(default=ParallelDegrees(), metadata=nested(ParallelDegrees.parse))
    offload: bool = False  # FSDP's shards held in host memory
    #: How the precision runs: "fp32", "autocast", or FSDP's mixed-precision policy ("param_dtype").
    precision_policy: str | None = None
    checkpointing_mode: str = "none"  # "none", "full", "selective"
    #: "eager" (as traced), or an option estimated at its published effect ("compile", "compile+float8").
    optimizations: str = "eager"

    @classmethod
    def parse(cls, data: Any, where: str) -> PlanParams:
        """``params`` of a configuration, or SummaryError naming the missing keys."""
        if not isinstance(data, Mapping):
            raise SummaryError(f"{where}: 'params' must be dict")
        needed = ("micro_batch", "grad_accum", "precision", "activation_checkpointing", "layout")
        missing = [k for k in needed if data.get(k) is None]
        if missing:
            raise SummaryError(f"{where}: params lacks {', '.join(missing)}")
        return cls(**checked_fields(cls, data, f"{where}.params"))

    @property
    def layout_label(self) -> str:
        """``fsdp``, or ``fsdp compile`` for a row estimated with an option."""
        return self.layout if self.optimizations == "eager" else f"{self.layout} {self.optimizations}"

    @property
    def label(self) -> str:
        """``4×2 bf16 ckpt ddp``."""
        ckpt = " ckpt" if self.activation_checkpointing else ""
        return f"{self.micro_batch}×{self.grad_accum} {self.precision}{ckpt} {self.layout_label}"


@dataclass(frozen=True)
class PlanConfig:
    """One configuration on one GPU model, predicted (``configs[i]``)."""

    gpu: str
    gpus: int  # every GPU of the job (nodes × per node)
    nodes: int
    params: PlanParams
    peak_memory_bytes: int | None = None
    memory_by_category: dict[str, int] = field(default_factory=dict)  # category -> bytes
    fits: bool = False
    why_not: str | None = None  # when it does not fit or cannot run
    #: The largest micro-batch that fits this layout at this row's accumulation (the gradients of
    #: earlier micro-batches held, a pipeline's micro-batches in flight).
    largest_micro_batch: int | None = None
    step_time_s: float | None = None
    step_time_s_interval: tuple[float, float] | None = None
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    usd_per_gpu_hour: float | None = None
    usd_per_million_samples: float | None = None
    usd_per_million_tokens: float | None = None
    usd_total: float | None = None  # the whole run, when the plan was given one
    #: Host memory per GPU holding offloaded shards (CPU offload; 0 otherwise).
    host_memory_bytes: int = 0
    #: "host" when issuing the step's ops takes longer than the GPU's work, "device", or None (a CPU row).
    step_bound: str | None = None

    @classmethod
    def parse(cls, data: Any, where: str) -> PlanConfig:
        """A configuration, or SummaryError naming ``where`` and the field."""
        if not isinstance(data, Mapping):
            raise SummaryError(f"{where} is not an object")
        _required(data, (("gpu", str), ("gpus", int), ("fits", bool)), where)
        fields = checked_fields(cls, data, where, skip=("params",))
        params = PlanParams.parse(data.get("params"), where)
        return cls(**{**fields, "nodes": fields["nodes"] or 1}, params=params)

    @property
    def gpu_label(self) -> str:
        """``H100-SXM × 8 (2 nodes)``: the GPU, how many, over how many nodes."""
        if self.gpus == 1:
            return self.gpu
        return f"{self.gpu} × {self.gpus}" + (f" ({self.nodes} nodes)" if self.nodes > 1 else "")


@dataclass(frozen=True)
class PlanModel:
    """The model the plan traced: its size and the script's own batch."""

    demo: str | None = field(default=None, metadata=WHEN_SET)  # the built-in model planned
    script: str | None = field(default=None, metadata=WHEN_SET)  # the script traced
    model_class: str | None = field(default=None, metadata=WHEN_SET)
    parameters: int | None = None
    parameter_bytes: int | None = None
    flops_per_sample: float | None = None
    ops_per_step: int | None = None
    micro_batch: int | None = field(default=None, metadata=WHEN_SET)  # a script's own
    accumulation: int | None = field(default=None, metadata=WHEN_SET)  # a script's own
    tokens_per_sample: int | None = field(default=None, metadata=WHEN_SET)  # None: not token ids

    @classmethod
    def parse(cls, data: Any, where: str) -> PlanModel:
        """``model``, or SummaryError naming the field."""
        return cls(**checked_fields(cls, data, where))


@dataclass(frozen=True)
class EfficiencyFigures:
    """One of the GPU efficiencies a plan's step times assume (slow, expected, fast)."""

    gemm: float
    attention: float
    memory: float
    launch_us: float
    host_us_per_op: float = 0.0


@dataclass(frozen=True)
class HeldOut:
    """A configuration the calibration did not fit on: predicted against measured."""

    config: str
    predicted: float  # seconds, or bytes for memory
    measured: float


@dataclass(frozen=True)
class TimedOut:
    """A configuration left out of the CPU's time calibration: its predicted and measured step."""

    config: str
    predicted_s: float
    measured_s: float


@dataclass(frozen=True)
class WeighedOut:
    """A configuration left out of the CPU's memory calibration: its predicted and measured peak."""

    config: str
    predicted_bytes: float
    measured_bytes: float


@dataclass(frozen=True)
class WorkspaceLine:
    """The memory a setting's steps take beyond their trace on this CPU, as a line in the micro-batch."""

    precision: str
    activation_checkpointing: bool | str
    intercept_bytes: float
    bytes_per_sample: float


@dataclass(frozen=True)
class CpuCheck:
    """How a calibration of this machine was fitted and how far it held on configurations left out."""

    fitted_on: tuple[str, ...]
    held_out: tuple[HeldOut, ...]
    held_out_median_error: float | None  # 0-1
    #: The largest relative range of a probed cost between the probe's rounds (0-1; None: not probed).
    spread: float | None = None


def _workspace_lines(data: Any, where: str) -> tuple[WorkspaceLine, ...]:
    if data is None:
        return ()
    if not isinstance(data, list) or not all(isinstance(row, Mapping) for row in data):
        raise SummaryError(f"{where} must be a list of objects")
    lines = []
    for row in data:
        mode = row.get("activation_checkpointing")
        mode = mode if isinstance(mode, bool | str) else False
        intercept, slope = float(row.get("intercept_bytes") or 0.0), float(row.get("bytes_per_sample") or 0.0)
        lines.append(WorkspaceLine(str(row.get("precision")), mode, intercept, slope))
    return tuple(lines)


def _held_out(record: type) -> Any:
    def parse(data: Any, where: str) -> tuple[Any, ...]:
        rows = checked_records(record, data, where)
        unit = "s" if record is TimedOut else "bytes"
        if any(getattr(r, f"predicted_{unit}") is None or not getattr(r, f"measured_{unit}") for r in rows):
            raise SummaryError(f"{where}: a held-out row needs predicted_{unit} and measured_{unit}")
        return rows

    return nested(parse)


@dataclass(frozen=True)
class CpuMemoryFacts:
    """``calibration.cpu.memory``: the workspace this CPU's steps take beyond their traces."""

    workspace_lines: tuple[WorkspaceLine, ...] = field(default=(), metadata=nested(_workspace_lines))
    fitted_on: tuple[str, ...] = ()
    held_out: tuple[WeighedOut, ...] = field(default=(), metadata=_held_out(WeighedOut))
    held_out_median_error: float | None = None

    @classmethod
    def parse(cls, data: Any, where: str) -> CpuMemoryFacts | None:
        """``memory`` (named by ``where``), checked; None when not measured."""
        return None if data is None else cls(**checked_fields(cls, data, where))

    @property
    def check(self) -> CpuCheck:
        """How the workspace was fitted and how far it held."""
        held = tuple(HeldOut(r.config, r.predicted_bytes, r.measured_bytes) for r in self.held_out)
        return CpuCheck(self.fitted_on, held, self.held_out_median_error)


@dataclass(frozen=True)
class CpuCalibrationFacts:
    """``calibration.cpu``: this machine's costs, fitted (or probed), and how far they held."""

    s_per_fp32_flop: float | None = None
    s_per_low_precision_flop: float | None = None
    s_per_fp16_flop: float | None = None
    s_per_byte: float | None = None
    s_per_op: float | None = None
    spread: float | None = None  # the probe's rounds' largest relative range (0-1)
    fitted_on: tuple[str, ...] = ()
    held_out: tuple[TimedOut, ...] = field(default=(), metadata=_held_out(TimedOut))
    held_out_median_error: float | None = None
    memory: CpuMemoryFacts | None = field(default=None, metadata=nested(CpuMemoryFacts.parse))

    @classmethod
    def parse(cls, data: Any, where: str) -> CpuCalibrationFacts | None:
        """``cpu`` (named by ``where``), checked; None without a calibration of this machine."""
        return None if data is None else cls(**checked_fields(cls, data, where))

    @property
    def check(self) -> CpuCheck:
        """How the costs were fitted and how far they held."""
        held = tuple(HeldOut(r.config, r.predicted_s, r.measured_s) for r in self.held_out)
        return CpuCheck(self.fitted_on, held, self.held_out_median_error, self.spread)


@dataclass(frozen=True)
class PlanCalibration:
    """``calibration``: what the GPU step times rest on, and this machine's calibration."""

    calibrated: bool = False
    calibrated_on: str | None = None  # the published runs the efficiencies were fitted on
    efficiency: tuple[EfficiencyFigures, ...] = field(default=(), metadata=nested_records(EfficiencyFigures))
    framework_reserve_bytes: int | None = None  # the CUDA context and libraries' workspaces, assumed
    note: str | None = None
    cpu: CpuCalibrationFacts | None = field(
        default=None, metadata={**nested(CpuCalibrationFacts.parse), **WHEN_SET}
    )

    @classmethod
    def parse(cls, data: Any, where: str) -> PlanCalibration:
        """``calibration`` (named by ``where``), checked."""
        return cls(**checked_fields(cls, data, where))


@dataclass(frozen=True)
class SuggestedConfig:
    """The configuration a suggestion names, with its figures."""

    gpu: str
    gpus: int
    nodes: int
    params: PlanParams
    peak_memory_bytes: int | None = None
    step_time_s: float | None = None
    usd_per_million_samples: float | None = None
    usd_per_million_tokens: float | None = None

    @classmethod
    def parse(cls, data: Any, where: str) -> SuggestedConfig | None:
        """``config`` (named by ``where``), checked; None when nothing fits."""
        if data is None:
            return None
        if not isinstance(data, Mapping):
            raise SummaryError(f"{where} is not an object")
        _required(data, (("gpu", str), ("gpus", int)), where)
        params = PlanParams.parse(data.get("params"), where)
        fields = checked_fields(cls, data, where, skip=("params",))
        return cls(**{**fields, "nodes": fields["nodes"] or 1}, params=params)


@dataclass(frozen=True)
class Suggestion:
    """``suggestion``: the cheapest configuration that fits, in one line and as figures."""

    text: str | None = None
    fits_as_asked: bool = False  # among the GPUs asked for (else on more of them)
    config: SuggestedConfig | None = field(default=None, metadata=nested(SuggestedConfig.parse))

    @classmethod
    def parse(cls, data: Any, where: str) -> Suggestion | None:
        """``suggestion`` (named by ``where``), checked; None when the plan made none."""
        return None if data is None else cls(**checked_fields(cls, data, where))


@dataclass(frozen=True)
class PlanDocument:
    """The whole plan, as ``autotune plan --format json`` writes it and every reader reads it.

    Its configurations cheapest first, the model, what the figures rest on. The planner builds it;
    it is written by :func:`~profilers.contract.json_checks.record_json` and read back by
    :meth:`parse`.
    """

    configs: tuple[PlanConfig, ...]
    model: PlanModel = field(default=PlanModel(), metadata=nested(PlanModel.parse))
    calibration: PlanCalibration = field(default=PlanCalibration(), metadata=nested(PlanCalibration.parse))
    trace_s: float = 0.0  # seconds spent tracing
    notes: tuple[str, ...] = ()
    suggestion: Suggestion | None = field(default=None, metadata=nested(Suggestion.parse))
    #: The JSON object it was parsed from (empty for one built in code).
    raw: JsonObject = field(default_factory=dict, repr=False, compare=False, metadata=NOT_WRITTEN)

    @classmethod
    def parse(cls, data: Any, where: str = "the plan") -> PlanDocument:
        """``autotune plan --format json``'s object, or SummaryError (one line naming the field)."""
        if not isinstance(data, dict) or not isinstance(data.get("configs"), list):
            raise SummaryError(f"{where}: not the JSON of `autotune plan --format json` (no configs list)")
        rows = enumerate(data["configs"])
        configs = tuple(PlanConfig.parse(c, f"{where}: configuration {i}") for i, c in rows)
        return cls(configs, raw=data, **checked_fields(cls, data, where, skip=("raw", "configs")))

    def to_json(self) -> JsonObject:
        """The JSON object: the one it was parsed from (every key kept), or the one it writes."""
        return document(self)

    @property
    def suggestion_text(self) -> str | None:
        """The cheapest configuration that fits, in one line."""
        return None if self.suggestion is None else self.suggestion.text

    @property
    def calibration_note(self) -> str | None:
        """What the GPU figures rest on, in one line."""
        return self.calibration.note

    @property
    def cpu(self) -> CpuCheck | None:
        """The calibration of this machine (the ``this-cpu`` rows), fitted and checked."""
        return None if self.calibration.cpu is None else self.calibration.cpu.check

    @property
    def cpu_memory(self) -> CpuCheck | None:
        """The workspace measured on this machine, fitted and checked."""
        cpu = self.calibration.cpu
        return None if cpu is None or cpu.memory is None else cpu.memory.check

    @property
    def title(self) -> str:
        """``Plan: train.py`` (the script, else the demo model)."""
        return f"Plan: {self.model.script or self.model.demo or 'the model'}"


__all__ = [
    "CpuCalibrationFacts",
    "CpuCheck",
    "CpuMemoryFacts",
    "EfficiencyFigures",
    "HeldOut",
    "ParallelDegrees",
    "PlanCalibration",
    "PlanConfig",
    "PlanDocument",
    "PlanModel",
    "PlanParams",
    "SuggestedConfig",
    "Suggestion",
    "TimedOut",
    "WeighedOut",
    "WorkspaceLine",
]
