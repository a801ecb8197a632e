"""The GPUs a plan can put a job on: memory and memory bandwidth per model, with their sources.

Compute peaks come from :mod:`profilers.runtime.flops` (datasheet figures, dense), prices from the price
table (:mod:`autotune.cost.prices`); this table adds what the memory and time models need. The keys
are the price table's, so every priced GPU can be planned.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from profilers.runtime.flops import DevicePeak, match_device


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU model: its memory, its memory bandwidth, its compute peaks."""

    key: str  # the price table's key: "H100-SXM"
    device_name: str  # a name profilers.runtime.flops.match_device knows
    memory_bytes: int
    bandwidth_gb_s: float  # GB/s (10^9 bytes/s), the datasheet's peak
    source: str
    #: GPU-to-GPU bandwidth in one direction, GB/s: half the datasheet's bidirectional NVLink figure
    #: for SXM parts (and NVL bridges), else half of PCIe x16's (Gen5 128, Gen4 64, Gen3 32 GB/s).
    link_gb_s: float = 32.0
    link: str = "PCIe Gen4 x16"
    #: GPU-to-host bandwidth in one direction, GB/s (what CPU offload moves over): half of PCIe
    #: x16's bidirectional figure for the GPU's PCIe generation; None: ``link_gb_s`` (a PCIe card).
    host_gb_s: float | None = None
    #: Host memory per GPU, GiB, on a typical cloud machine with 8 of them (or as many as it takes):
    #: what CPU offload may fill. AWS's instance pages (p5/p5e: 2,048 GiB for 8 H100/H200; p4d/p4de:
    #: 1,152 GiB for 8 A100; g6e: 1,536 for 8 L40S; g6: 768 for 8 L4; g5: 768 for 8 A10G; p3:
    #: 488 for 8 V100; g4dn.12xlarge: 192 for 4 T4); parts AWS does not rent take a sibling's.
    host_memory_gib: float = 96.0
    #: The share of the datasheet's tensor-core peak its matrix kernels reach beside an A100's: 1.0
    #: for Ampere and older; for Hopper (H100, H200) :data:`HOPPER_COMPUTE_SCALE`, fitted on published
    #: runs (llm-foundry's and torchtitan's H100 runs come out 15-35% slower than the peaks' ratio to
    #: an A100's predicts).
    compute_scale: float = 1.0

    @property
    def host_link_gb_s(self) -> float:
        """GB/s between this GPU and the host's memory, one direction."""
        return self.host_gb_s if self.host_gb_s is not None else self.link_gb_s

    @property
    def peak(self) -> DevicePeak | None:
        """The compute peaks (TFLOP/s per precision), or None when not in the table."""
        return match_device(self.device_name)


#: Hopper's :attr:`GpuSpec.compute_scale`, fitted with the plan's efficiencies on published H100 runs
#: (``benchmarks/gpu_anchors.py``; 6 of its 12 runs within a node, the rest A100s at 1.0).
HOPPER_COMPUTE_SCALE = 0.75
_GB = 10**9
_GIB = 2**30
# Memory and bandwidth as printed by NVIDIA's datasheets and product pages (the same documents as
# the compute peaks in profilers/runtime/flops.py): HBM/GDDR capacity in GB as sold, peak bandwidth in GB/s.
_NVLINK_900, _NVLINK_600, _NVLINK_300 = "NVLink 900 GB/s", "NVLink 600 GB/s", "NVLink 300 GB/s"
_GEN5, _GEN4, _GEN3 = "PCIe Gen5 x16", "PCIe Gen4 x16", "PCIe Gen3 x16"
_H100_SHEET = "NVIDIA H100 Tensor Core GPU Datasheet"
_A100_SHEET = "NVIDIA A100 Tensor Core GPU Datasheet"
_TABLE: tuple[GpuSpec, ...] = (
    GpuSpec("H200", "NVIDIA H200", 141 * _GB, 4800.0,
            "https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM: 141 GB, 4.8 TB/s, NVLink 900 GB/s)",
            450.0, _NVLINK_900, 64.0),
    GpuSpec("H100-SXM", "NVIDIA H100 80GB HBM3", 80 * _GB, 3350.0,
            f"{_H100_SHEET} (H100 SXM: 80 GB, 3.35 TB/s, NVLink 900 GB/s)", 450.0, _NVLINK_900, 64.0),
    GpuSpec("H100-PCIe", "NVIDIA H100 PCIe", 80 * _GB, 2000.0,
            f"{_H100_SHEET} (H100 PCIe: 80 GB, 2 TB/s, PCIe Gen5 128 GB/s)", 64.0, _GEN5),
    GpuSpec("H100-NVL", "NVIDIA H100 NVL", 94 * _GB, 3900.0,
            f"{_H100_SHEET} (H100 NVL: 94 GB, 3.9 TB/s, NVLink 600 GB/s)", 300.0, _NVLINK_600, 64.0),
    GpuSpec("A100-80GB", "NVIDIA A100-SXM4-80GB", 80 * _GB, 2039.0,
            f"{_A100_SHEET} (A100 80GB SXM: 2,039 GB/s, NVLink 600 GB/s)", 300.0, _NVLINK_600, 32.0),
    GpuSpec("A100-40GB", "NVIDIA A100-SXM4-40GB", 40 * _GB, 1555.0,
            f"{_A100_SHEET} (A100 40GB: 1,555 GB/s, NVLink 600 GB/s)", 300.0, _NVLINK_600, 32.0),
    GpuSpec("L40S", "NVIDIA L40S", 48 * _GB, 864.0,
            "NVIDIA L40S datasheet (48 GB GDDR6, 864 GB/s, PCIe Gen4 x16 64 GB/s)", 32.0, _GEN4),
    GpuSpec("L4", "NVIDIA L4", 24 * _GB, 300.0,
            "NVIDIA L4 datasheet (24 GB GDDR6, 300 GB/s, PCIe Gen4 x16 64 GB/s)", 32.0, _GEN4),
    GpuSpec("A10G", "NVIDIA A10G", 24 * _GB, 600.0,
            "NVIDIA A10G datasheet, AWS copy (24 GB, 600 GB/s, PCIe Gen4 x16)", 32.0, _GEN4),
    GpuSpec("A10", "NVIDIA A10", 24 * _GB, 600.0,
            "NVIDIA A10 datasheet (24 GB GDDR6, 600 GB/s, PCIe Gen4 x16 64 GB/s)", 32.0, _GEN4),
    GpuSpec("V100", "Tesla V100-SXM2-16GB", 16 * _GB, 900.0,
            "NVIDIA Tesla V100 datasheet (V100 SXM2 16 GB: 900 GB/s, NVLink 300 GB/s)", 150.0, _NVLINK_300,
            16.0),
    GpuSpec("T4", "Tesla T4", 16 * _GB, 320.0,
            "NVIDIA T4 datasheet (16 GB GDDR6, 320+ GB/s, PCIe Gen3 x16 32 GB/s)", 16.0, _GEN3),
)  # fmt: skip


#: Host memory per GPU (GiB) of a typical machine with these GPUs (see ``GpuSpec.host_memory_gib``).
_HOST_MEMORY_GIB = {"H200": 256, "H100-SXM": 256, "H100-PCIe": 256, "H100-NVL": 256, "A100-80GB": 144,
                    "A100-40GB": 144, "L40S": 192, "L4": 96, "A10G": 96, "A10": 96, "V100": 61,
                    "T4": 48}  # fmt: skip
_HOPPER = frozenset(("H200", "H100-SXM", "H100-PCIe", "H100-NVL"))
GPUS: tuple[GpuSpec, ...] = tuple(
    dataclasses.replace(
        g,
        host_memory_gib=_HOST_MEMORY_GIB[g.key],
        compute_scale=HOPPER_COMPUTE_SCALE if g.key in _HOPPER else 1.0,
    )
    for g in _TABLE
)


def gpu_spec(key: str) -> GpuSpec | None:
    """The table row of a GPU key (case-insensitive), or None."""
    folded = key.casefold()
    return next((g for g in GPUS if g.key.casefold() == folded), None)


__all__ = ["GPUS", "GpuSpec", "gpu_spec"]
