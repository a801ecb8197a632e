"""The one table of GPU facts: which device name is which GPU, and what that GPU has.

Every reader of a GPU fact goes through :func:`match_gpu_model` (an NVML or
``torch.cuda.get_device_name()`` name) or :func:`gpu_model` (a table key): the profiler's MFU takes
a row's compute peaks, the plan its memory, bandwidth and links, the cost model its ``market`` key,
under which the dated prices of ``autotune/cost/prices.toml`` are listed.

A row is one GPU as a device name can tell it apart. Where a name says less than the facts need
(a bare "NVIDIA H100" has no form factor, whose peaks differ by 30%), the row has no peaks. Where a
part has no sheet of memory and links here (an A100 PCIe card), it is planned and priced as its
``market`` row, the part sold under that name (the SXM A100 with its memory size).

Pure data and one regex walk: no torch, no NVML.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from profilers.hardware import peaks
from profilers.hardware.peaks import DevicePeak

_GB = 10**9


@dataclass(frozen=True, slots=True)
class GpuSheet:
    """What a plan needs of a GPU beyond its peaks: memory, bandwidth, links, host memory."""

    memory_bytes: int  # as sold (GB, 10^9 bytes)
    bandwidth_gb_s: float  # memory bandwidth, GB/s, the datasheet's peak
    #: GPU-to-GPU bandwidth in one direction, GB/s: half the datasheet's bidirectional NVLink
    #: figure for SXM parts (and NVL bridges), else half of PCIe x16's (Gen5 128, Gen4 64, Gen3 32).
    link_gb_s: float
    link: str
    #: GPU-to-host bandwidth in one direction, GB/s (what CPU offload moves over): half of PCIe
    #: x16's bidirectional figure for the GPU's PCIe generation; None: ``link_gb_s`` (a PCIe card).
    host_gb_s: float | None
    #: Host memory per GPU, GiB, on a typical cloud machine with 8 of them (or as many as it
    #: takes): what CPU offload may fill. AWS's instance pages (p5/p5e: 2,048 GiB for 8 H100/H200;
    #: p4d/p4de: 1,152 GiB for 8 A100; g6e: 1,536 for 8 L40S; g6: 768 for 8 L4; g5: 768 for 8
    #: A10G; p3: 488 for 8 V100; g4dn.12xlarge: 192 for 4 T4); parts AWS does not rent take a
    #: sibling's.
    host_memory_gib: float
    #: The share of the datasheet's tensor-core peak its matrix kernels reach beside an A100's:
    #: 1.0 for Ampere and older; Hopper's :data:`HOPPER_COMPUTE_SCALE`, fitted by the plan on
    #: published runs (``benchmarks/gpu_anchors.py``).
    compute_scale: float
    source: str  # the document the memory, bandwidth and links come from
    #: The same share for attention kernels (flash attention), where it differs from
    #: :attr:`compute_scale`: Hopper's :data:`HOPPER_ATTENTION_SCALE`; None: the same.
    attention_scale: float | None = None

    @property
    def attention_compute_scale(self) -> float:
        """The share of the tensor-core peak attention kernels reach beside an A100's."""
        return self.compute_scale if self.attention_scale is None else self.attention_scale

    @property
    def host_link_gb_s(self) -> float:
        """GB/s between this GPU and the host's memory, one direction."""
        return self.host_gb_s if self.host_gb_s is not None else self.link_gb_s


@dataclass(frozen=True, slots=True)
class GpuModel:
    """One GPU model: how its device name reads, its compute peaks, and its sheet when known."""

    key: str  # the table's key: "H100-SXM", what ``autotune plan --gpus`` names
    pattern: str  # regex searched in the lower-cased device name (``_`` read as ``-``)
    device_name: str  # a device name as NVML or torch prints it, that this row matches
    #: the key this GPU is planned and priced as: itself where the row has its own sheet, else the
    #: part sold under that name
    market: str
    peaks: DevicePeak | None  # dense TFLOP/s per precision; None when the name cannot tell them
    sheet: GpuSheet | None = None  # None: planned as its market row


#: Hopper's :attr:`GpuSheet.compute_scale`: llm-foundry's and torchtitan's H100 runs come out
#: slower than the peaks' ratio to an A100's predicts (fitted with the plan's efficiencies in
#: ``benchmarks/gpu_anchors.py``: 7 of its 16 runs within a node, the other 9 A100s at 1.0).
HOPPER_COMPUTE_SCALE = 0.85
#: Hopper's :attr:`GpuSheet.attention_scale`, fitted with it: flash attention 2 reaches less of a
#: Hopper's peak than its GEMMs do. The abstracts of Shah et al. 2024, "FlashAttention-3" (FA2
#: "achieves only 35% utilization" on an H100) and Dao 2023, "FlashAttention-2" (50-73% of an
#: A100's peak) put the ratio at 0.48-0.70; the fit gives 0.6.
HOPPER_ATTENTION_SCALE = 0.6

_NVLINK_900, _NVLINK_600, _NVLINK_300 = "NVLink 900 GB/s", "NVLink 600 GB/s", "NVLink 300 GB/s"
_GEN5, _GEN4, _GEN3 = "PCIe Gen5 x16", "PCIe Gen4 x16", "PCIe Gen3 x16"
_H100_SHEET = "NVIDIA H100 Tensor Core GPU Datasheet"
_A100_SHEET = "NVIDIA A100 Tensor Core GPU Datasheet"
_H = HOPPER_COMPUTE_SCALE
_HA = HOPPER_ATTENTION_SCALE

# Rows in match order: the first whose pattern the name holds wins. Word boundaries keep "gh200"
# from matching "h200", "a100" from "a10" and "l40s" from "l40"; the more specific name of one
# family comes first (an A100 with its form factor and memory before one without), or its pattern
# leaves the others out (the H200 and H100 SXM rows are no NVL, the H100 PCIe no NVL), so the rows
# with a sheet stay in the plan's order. Memory and bandwidth as NVIDIA's datasheets and product
# pages print them (the documents of the compute peaks in :mod:`profilers.hardware.peaks`): capacity
# in GB as sold, bandwidth GB/s.
# fmt: off
GPU_MODELS: tuple[GpuModel, ...] = (
    GpuModel("GH200", r"\bgh200\b", "NVIDIA GH200 480GB", "GH200", None),
    # "NVIDIA H200" is the SXM part
    GpuModel("H200", r"\bh200\b(?!.*\bnvl\b)", "NVIDIA H200", "H200", peaks.H200_SXM,
             GpuSheet(141 * _GB, 4800.0, 450.0, _NVLINK_900, 64.0, 256, _H,
             "https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM: 141 GB, 4.8 TB/s, NVLink 900 GB/s)",
             _HA)),
    GpuModel("H200-NVL", r"\bh200\b.*\bnvl\b", "NVIDIA H200 NVL", "H200", peaks.H200_NVL),
    GpuModel("H100-SXM", r"\bh100\b(?!.*\b(nvl|pcie|hbm2e)\b).*\b(hbm3|sxm\d?)\b", "NVIDIA H100 80GB HBM3",
             "H100-SXM", peaks.H100_SXM,
             GpuSheet(80 * _GB, 3350.0, 450.0, _NVLINK_900, 64.0, 256, _H,
             f"{_H100_SHEET} (H100 SXM: 80 GB, 3.35 TB/s, NVLink 900 GB/s)", _HA)),
    GpuModel("H100-PCIe", r"\bh100\b(?!.*\bnvl\b).*\b(pcie|hbm2e)\b", "NVIDIA H100 PCIe", "H100-PCIe",
             peaks.H100_PCIE,
             GpuSheet(80 * _GB, 2000.0, 64.0, _GEN5, None, 256, _H,
             f"{_H100_SHEET} (H100 PCIe: 80 GB, 2 TB/s, PCIe Gen5 128 GB/s)", _HA)),
    GpuModel("H100-NVL", r"\bh100\b.*\bnvl\b", "NVIDIA H100 NVL", "H100-NVL", peaks.H100_NVL,
             GpuSheet(94 * _GB, 3900.0, 300.0, _NVLINK_600, 64.0, 256, _H,
             f"{_H100_SHEET} (H100 NVL: 94 GB, 3.9 TB/s, NVLink 600 GB/s)", _HA)),
    # A bare "NVIDIA H100" has no peaks (they differ by 30% between form factors); priced as the SXM.
    GpuModel("H100", r"\bh100\b", "NVIDIA H100", "H100-SXM", None),
    GpuModel("A100-80GB", r"\ba100\b(?=.*\bsxm\d?\b)(?=.*\b80\s*gb\b)", "NVIDIA A100-SXM4-80GB", "A100-80GB",
             peaks.A100_SXM, GpuSheet(80 * _GB, 2039.0, 300.0, _NVLINK_600, 32.0, 144, 1.0,
             f"{_A100_SHEET} (A100 80GB SXM: 2,039 GB/s, NVLink 600 GB/s)")),
    GpuModel("A100-40GB", r"\ba100\b.*\bsxm\d?\b", "NVIDIA A100-SXM4-40GB", "A100-40GB", peaks.A100_SXM,
             GpuSheet(40 * _GB, 1555.0, 300.0, _NVLINK_600, 32.0, 144, 1.0,
             f"{_A100_SHEET} (A100 40GB: 1,555 GB/s, NVLink 600 GB/s)")),
    GpuModel("A100-PCIe-80GB", r"\ba100\b(?=.*\bpcie\b)(?=.*\b80\s*gb\b)", "NVIDIA A100 80GB PCIe",
             "A100-80GB", peaks.A100_PCIE),
    GpuModel("A100-PCIe-40GB", r"\ba100\b.*\bpcie\b", "NVIDIA A100-PCIE-40GB", "A100-40GB", peaks.A100_PCIE),
    # Every A100 has the same compute; its memory names the market row.
    GpuModel("A100-other-80GB", r"\ba100\b.*\b80\s*gb\b", "NVIDIA A100 80GB", "A100-80GB", peaks.A100_OTHER),
    GpuModel("A100-other", r"\ba100\b", "NVIDIA A100-PG509-200", "A100-40GB", peaks.A100_OTHER),
    GpuModel("L40S", r"\bl40s\b", "NVIDIA L40S", "L40S", peaks.L40S,
             GpuSheet(48 * _GB, 864.0, 32.0, _GEN4, None, 192, 1.0,
             "NVIDIA L40S datasheet (48 GB GDDR6, 864 GB/s, PCIe Gen4 x16 64 GB/s)")),
    GpuModel("L40", r"\bl40\b", "NVIDIA L40", "L40", peaks.L40),
    GpuModel("L4", r"\bl4\b", "NVIDIA L4", "L4", peaks.L4,
             GpuSheet(24 * _GB, 300.0, 32.0, _GEN4, None, 96, 1.0,
             "NVIDIA L4 datasheet (24 GB GDDR6, 300 GB/s, PCIe Gen4 x16 64 GB/s)")),
    GpuModel("A10G", r"\ba10g\b", "NVIDIA A10G", "A10G", peaks.A10G,
             GpuSheet(24 * _GB, 600.0, 32.0, _GEN4, None, 96, 1.0,
             "NVIDIA A10G datasheet, AWS copy (24 GB, 600 GB/s, PCIe Gen4 x16)")),
    GpuModel("A10", r"\ba10\b", "NVIDIA A10", "A10", peaks.A10,
             GpuSheet(24 * _GB, 600.0, 32.0, _GEN4, None, 96, 1.0,
             "NVIDIA A10 datasheet (24 GB GDDR6, 600 GB/s, PCIe Gen4 x16 64 GB/s)")),
    GpuModel("V100S-PCIe", r"\bv100s\b.*\bpcie\b", "Tesla V100S-PCIE-32GB", "V100", peaks.V100S_PCIE),
    GpuModel("V100", r"\bv100\b.*\bsxm2\b", "Tesla V100-SXM2-16GB", "V100", peaks.V100_SXM2,
             GpuSheet(16 * _GB, 900.0, 150.0, _NVLINK_300, 16.0, 61, 1.0,
             "NVIDIA Tesla V100 datasheet (V100 SXM2 16 GB: 900 GB/s, NVLink 300 GB/s)")),
    GpuModel("V100-PCIe", r"\bv100\b.*\bpcie\b", "Tesla V100-PCIE-16GB", "V100", peaks.V100_PCIE),
    GpuModel("V100-other", r"\bv100s?\b", "Tesla V100S", "V100", None),
    GpuModel("T4", r"\bt4\b", "Tesla T4", "T4", peaks.T4,
             GpuSheet(16 * _GB, 320.0, 16.0, _GEN3, None, 48, 1.0,
             "NVIDIA T4 datasheet (16 GB GDDR6, 320+ GB/s, PCIe Gen3 x16 32 GB/s)")),
)
# fmt: on

_COMPILED: tuple[tuple[re.Pattern[str], GpuModel], ...] = tuple(
    (re.compile(m.pattern), m) for m in GPU_MODELS
)


def normalize_device_name(name: str) -> str:
    """A device name as the patterns read it: lower case, ``_`` as ``-``, single spaces."""
    return " ".join(name.lower().replace("_", "-").split())


def match_gpu_model(name: str | None) -> GpuModel | None:
    """The row of an NVML or torch device name (or a table key), or None for an unknown GPU.

    ``"NVIDIA H100 80GB HBM3"`` is the H100 SXM, ``"NVIDIA A100-PCIE-40GB"`` the A100 PCIe 40GB
    (priced and planned as ``A100-40GB``), ``"Tesla V100-SXM2-16GB"`` the V100. A MIG slice's name
    matches its whole GPU: whoever reads a per-GPU figure decides what a slice gets.
    """
    if not name or not name.strip():
        return None
    normalized = normalize_device_name(name)
    return next((model for pattern, model in _COMPILED if pattern.search(normalized)), None)


def gpu_model(key: str) -> GpuModel | None:
    """The row with table key ``key`` (case-insensitive), or None."""
    folded = key.casefold()
    return next((m for m in GPU_MODELS if m.key.casefold() == folded), None)


def planned_models() -> tuple[tuple[GpuModel, GpuSheet], ...]:
    """The rows with their own sheet, and that sheet: the GPUs a plan is made for."""
    return tuple((m, m.sheet) for m in GPU_MODELS if m.sheet is not None)


def market_keys() -> tuple[str, ...]:
    """The keys GPUs are priced under, in table order."""
    return tuple(dict.fromkeys(m.market for m in GPU_MODELS))


__all__ = [
    "GPU_MODELS",
    "HOPPER_ATTENTION_SCALE",
    "HOPPER_COMPUTE_SCALE",
    "GpuModel",
    "GpuSheet",
    "gpu_model",
    "market_keys",
    "match_gpu_model",
    "normalize_device_name",
    "planned_models",
]
