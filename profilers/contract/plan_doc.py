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
    SummaryError,
    is_number,
    optional_dict,
    optional_int,
    optional_list,
    optional_number,
    optional_str,
    str_list,
)


def _required(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise SummaryError(f"{where}: {key!r} must be {kind.__name__}")
    return value


@dataclass(frozen=True, slots=True)
class PlanParams:
    """What a configuration sets: the batch split, precision, checkpointing and parallel layout."""

    micro_batch: int
    grad_accum: int
    precision: str
    activation_checkpointing: bool
    layout: str  # "single", "ddp", "fsdp", "tp2×pp2"...
    #: "eager" (as traced), or an option estimated at its published effect ("compile", "compile+float8").
    optimizations: str = "eager"

    @classmethod
    def parse(cls, data: Any, where: str) -> PlanParams:
        """``params`` of a configuration, or SummaryError naming the missing keys."""
        if not isinstance(data, Mapping):
            raise SummaryError(f"{where}: 'params' must be dict")
        missing = [k for k in cls.__slots__ if k not in data and k != "optimizations"]
        if missing:
            raise SummaryError(f"{where}: params lacks {', '.join(missing)}")
        return cls(int(data["micro_batch"]), int(data["grad_accum"]), str(data["precision"]),
                   bool(data["activation_checkpointing"]), str(data["layout"]),
                   str(data.get("optimizations") or "eager"))  # fmt: skip

    @property
    def layout_label(self) -> str:
        """``fsdp``, or ``fsdp compile`` for a row estimated with an option."""
        return self.layout if self.optimizations == "eager" else f"{self.layout} {self.optimizations}"

    @property
    def label(self) -> str:
        """``4×2 bf16 ckpt ddp``."""
        ckpt = " ckpt" if self.activation_checkpointing else ""
        return f"{self.micro_batch}×{self.grad_accum} {self.precision}{ckpt} {self.layout_label}"


@dataclass(frozen=True, slots=True)
class PlanConfig:
    """One configuration on one GPU model, predicted (``configs[i]``)."""

    gpu: str
    gpus: int  # every GPU of the job
    nodes: int
    params: PlanParams
    fits: bool
    why_not: str | None
    peak_memory_bytes: int | None
    step_time_s: float | None
    step_time_s_interval: tuple[float, float] | None
    samples_per_s: float | None
    tokens_per_s: float | None
    usd_per_million_samples: float | None
    usd_per_million_tokens: float | None
    usd_total: float | None  # the whole run, when the plan was given one
    #: "host" when issuing the step's ops takes longer than the GPU's work, "device", or None.
    step_bound: str | None = None

    @classmethod
    def parse(cls, data: Any, where: str) -> PlanConfig:
        """A configuration, or SummaryError naming ``where`` and the field."""
        if not isinstance(data, Mapping):
            raise SummaryError(f"{where} is not an object")
        interval = optional_list(data, "step_time_s_interval", where)
        if interval and not (len(interval) == 2 and all(is_number(v) for v in interval)):
            raise SummaryError(f"{where}: 'step_time_s_interval' must be [low, high]")
        return cls(
            gpu=_required(data, "gpu", str, where),
            gpus=_required(data, "gpus", int, where),
            nodes=optional_int(data, "nodes", where) or 1,
            params=PlanParams.parse(data.get("params"), where),
            fits=_required(data, "fits", bool, where),
            why_not=optional_str(data, "why_not", where),
            peak_memory_bytes=optional_int(data, "peak_memory_bytes", where),
            step_time_s=optional_number(data, "step_time_s", where),
            step_time_s_interval=(float(interval[0]), float(interval[1])) if interval else None,
            samples_per_s=optional_number(data, "samples_per_s", where),
            tokens_per_s=optional_number(data, "tokens_per_s", where),
            usd_per_million_samples=optional_number(data, "usd_per_million_samples", where),
            usd_per_million_tokens=optional_number(data, "usd_per_million_tokens", where),
            usd_total=optional_number(data, "usd_total", where),
            step_bound=optional_str(data, "step_bound", where),
        )

    @property
    def gpu_label(self) -> str:
        """``H100-SXM × 8 (2 nodes)``: the GPU, how many, over how many nodes."""
        if self.gpus == 1:
            return self.gpu
        return f"{self.gpu} × {self.gpus}" + (f" ({self.nodes} nodes)" if self.nodes > 1 else "")


@dataclass(frozen=True, slots=True)
class PlanModel:
    """The model the plan traced: its size and the script's own batch."""

    script: str | None
    demo: str | None
    parameters: int | None
    parameter_bytes: int | None
    micro_batch: int | None
    accumulation: int
    tokens_per_sample: int | None

    @classmethod
    def parse(cls, data: Mapping[str, Any], where: str) -> PlanModel:
        """``model``, or SummaryError naming the field."""
        return cls(
            script=optional_str(data, "script", where),
            demo=optional_str(data, "demo", where),
            parameters=optional_int(data, "parameters", where),
            parameter_bytes=optional_int(data, "parameter_bytes", where),
            micro_batch=optional_int(data, "micro_batch", where),
            accumulation=optional_int(data, "accumulation", where) or 1,
            tokens_per_sample=optional_int(data, "tokens_per_sample", where),
        )


@dataclass(frozen=True, slots=True)
class HeldOut:
    """A configuration the calibration did not fit on: predicted against measured."""

    config: str
    predicted: float  # seconds, or bytes for memory
    measured: float


@dataclass(frozen=True, slots=True)
class CpuCheck:
    """How a calibration of this machine was fitted and how far it held on configurations left out."""

    fitted_on: tuple[str, ...]
    held_out: tuple[HeldOut, ...]
    held_out_median_error: float | None  # 0-1
    #: The largest relative range of a probed cost between the probe's rounds (0-1; None: not probed).
    spread: float | None = None

    @classmethod
    def parse(cls, data: Mapping[str, Any], unit: str, where: str) -> CpuCheck:
        """A ``calibration.cpu`` (``unit`` "s") or its ``memory`` (``unit`` "bytes")."""
        held = []
        for row in optional_list(data, "held_out", where):
            if not isinstance(row, Mapping):
                raise SummaryError(f"{where}: a held-out row must be an object")
            predicted = optional_number(row, f"predicted_{unit}", where)
            measured = optional_number(row, f"measured_{unit}", where)
            if predicted is None or not measured:
                raise SummaryError(f"{where}: a held-out row needs predicted_{unit} and measured_{unit}")
            held.append(HeldOut(str(row.get("config")), predicted, measured))
        return cls(str_list(data, "fitted_on", where), tuple(held),
                   optional_number(data, "held_out_median_error", where),
                   optional_number(data, "spread", where))  # fmt: skip


@dataclass(frozen=True, slots=True)
class PlanDocument:
    """The whole plan: its configurations cheapest first, the model, what the figures rest on."""

    configs: tuple[PlanConfig, ...]
    model: PlanModel
    trace_s: float  # seconds spent tracing
    notes: tuple[str, ...]
    suggestion_text: str | None  # the cheapest configuration that fits, in one line
    calibration_note: str | None
    cpu: CpuCheck | None  # this machine's calibration (the ``this-cpu`` rows)
    cpu_memory: CpuCheck | None  # its measured workspace
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, data: Any, where: str = "the plan") -> PlanDocument:
        """``autotune plan --format json``'s object, or SummaryError (one line naming the field)."""
        if not isinstance(data, dict) or not isinstance(data.get("configs"), list):
            raise SummaryError(f"{where}: not the JSON of `autotune plan --format json` (no configs list)")
        trace_s = data.get("trace_s", 0.0)
        if not is_number(trace_s):
            raise SummaryError(f"{where}: trace_s must be a number")
        calibration = optional_dict(data, "calibration", where)
        cpu = optional_dict(calibration, "cpu", f"{where}: calibration")
        memory = optional_dict(cpu, "memory", f"{where}: calibration.cpu")
        memory_where = f"{where}: calibration.cpu.memory"
        configs = tuple(
            PlanConfig.parse(c, f"{where}: configuration {i}") for i, c in enumerate(data["configs"])
        )
        suggestion = optional_dict(data, "suggestion", where)
        return cls(
            configs=configs,
            model=PlanModel.parse(optional_dict(data, "model", where), f"{where}: model"),
            trace_s=float(trace_s),
            notes=str_list(data, "notes", where),
            suggestion_text=optional_str(suggestion, "text", f"{where}: suggestion"),
            calibration_note=optional_str(calibration, "note", f"{where}: calibration"),
            cpu=CpuCheck.parse(cpu, "s", f"{where}: calibration.cpu") if cpu else None,
            cpu_memory=CpuCheck.parse(memory, "bytes", memory_where) if memory else None,
            raw=data,
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object the record was parsed from, every key kept."""
        return dict(self.raw)

    @property
    def title(self) -> str:
        """``Plan: train.py`` (the script, else the demo model)."""
        return f"Plan: {self.model.script or self.model.demo or 'the model'}"


__all__ = ["CpuCheck", "HeldOut", "PlanConfig", "PlanDocument", "PlanModel", "PlanParams"]
