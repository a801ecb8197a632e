"""The GPUs a plan can put a job on: rows of the one GPU table, each with the sheet it is planned with.

The facts (memory, bandwidth, links, compute peaks, the Hopper compute scale) are
:mod:`profilers.hardware.gpus`'s; the keys are the ones the price table lists, so every planned
GPU can be priced. A variant without a sheet of its own (a bare ``H100``, an ``A100-PCIe-80GB``)
is planned as the part sold under its name (:attr:`GpuModel.market`).
"""

from __future__ import annotations

from dataclasses import dataclass

from profilers.hardware.gpus import GpuModel, GpuSheet, gpu_model, planned_models
from profilers.hardware.peaks import DevicePeak


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """A GPU as the plan reads it: its row of the GPU table and the sheet it is planned with."""

    model: GpuModel
    sheet: GpuSheet

    @property
    def key(self) -> str:
        """The table key: what ``--gpus`` names and the plan's rows say."""
        return self.model.key

    @property
    def peak(self) -> DevicePeak | None:
        """The compute peaks (TFLOP/s per precision), or None when the name cannot tell them."""
        return self.model.peaks


GPUS: tuple[GpuSpec, ...] = tuple(GpuSpec(model, sheet) for model, sheet in planned_models())


def gpu_spec(key: str) -> GpuSpec | None:
    """The planned GPU of table key ``key`` (case-insensitive): one with a sheet, else None."""
    model = gpu_model(key)
    return None if model is None or model.sheet is None else GpuSpec(model, model.sheet)


def planned_as(model: GpuModel) -> GpuSpec | None:
    """The GPU a device of row ``model`` is planned as: itself with its sheet, else its market row.

    A bare ``H100`` as the ``H100-SXM``, an A100 PCIe card as the SXM part of its memory.
    """
    return gpu_spec(model.key) or gpu_spec(model.market)


__all__ = ["GPUS", "GpuSpec", "gpu_spec", "planned_as"]
