"""Peak dense FLOP/s of each GPU model per precision, with the public document each comes from.

Peak figures are NVIDIA's (or, for the A10G, the AWS-hosted NVIDIA datasheet's) *dense* tensor
throughput. NVIDIA datasheets for Ampere and later quote tensor figures "with sparsity" (2:4
structured sparsity), which is twice the dense rate; every such figure below is halved and the
comment says so. Ordinary dense training does not run 2:4 sparse kernels, so the dense rate is the
right MFU denominator.

Precisions are the strings ``"fp32"`` (plain FP32 on the CUDA cores, no tensor cores), ``"tf32"``,
``"bf16"``, ``"fp16"`` and ``"fp8"`` (tensor cores). A chip without a mode has ``None`` there.
Which device name is which chip is :mod:`profilers.hardware.gpus`'s one table.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The precision names this module knows, in table order.
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8")


@dataclass(frozen=True, slots=True)
class DevicePeak:
    """Peak dense throughput of one GPU model, in TFLOP/s (10^12 FLOP/s) per precision.

    ``None`` means the chip has no such mode (V100 and T4 have no TF32, BF16 or FP8 tensor cores).
    """

    name: str  # short model name, e.g. "H100 SXM"
    form_factor: str  # "SXM5", "PCIe", "NVL (PCIe card)", ...
    fp32_tflops: float | None  # FP32 on the CUDA cores (non-tensor)
    tf32_tflops: float | None
    bf16_tflops: float | None
    fp16_tflops: float | None  # FP16 inputs, FP32 accumulate where the datasheet distinguishes
    fp8_tflops: float | None
    source: str  # the public document the figures come from

    def tflops(self, precision: str) -> float | None:
        """Dense peak in TFLOP/s for ``precision``; ``None`` if unsupported or not a known name."""
        if precision not in PRECISIONS:
            return None
        value: float | None = getattr(self, f"{precision}_tflops")
        return value

    def flops_per_s(self, precision: str) -> float | None:
        """Dense peak in FLOP/s for ``precision``; ``None`` if unsupported or not a known name."""
        tflops = self.tflops(precision)
        return None if tflops is None else tflops * 1e12


# One row per chip reads better than one value per line, so the formatter is kept out.
# fmt: off
# --------------------------------------------------------------------------------------------
# The table. Figures were cross-checked in 2026 against stored copies and quotations of the cited
# documents (the primary PDFs themselves could not be opened from here); where sources disagree
# the comment says which figure is used and why. "S/2" marks a datasheet figure quoted with
# sparsity and halved here.
# --------------------------------------------------------------------------------------------

# Hopper. NVIDIA, "NVIDIA H200 Tensor Core GPU", product page specification table,
# https://www.nvidia.com/en-us/data-center/h200/ . The table is marked "Preliminary
# specifications. May be subject to change." and every tensor row carries the footnote
# "With sparsity". H200 SXM: FP32 67, TF32 989 (S/2 = 494.5), BF16 1,979 (S/2 = 989.5),
# FP16 1,979 (S/2 = 989.5), FP8 3,958 (S/2 = 1,979) TFLOPS: the same compute as H100 SXM.
H200_SXM = DevicePeak(
    "H200 SXM", "SXM5", 67.0, 494.5, 989.5, 989.5, 1979.0,
    "https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM column; tensor figures with sparsity, halved)",
)
# Same page, H200 NVL column: FP32 60, TF32 835 (S/2 = 417.5), BF16 1,671 (S/2 = 835.5),
# FP16 1,671 (S/2 = 835.5), FP8 3,341 (S/2 = 1,670.5) TFLOPS, per GPU, up to 600 W.
H200_NVL = DevicePeak(
    "H200 NVL", "NVL (PCIe card)", 60.0, 417.5, 835.5, 835.5, 1670.5,
    "https://www.nvidia.com/en-us/data-center/h200/ (H200 NVL column; tensor figures with sparsity, halved)",
)
# NVIDIA, "NVIDIA H100 Tensor Core GPU Datasheet",
# https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet (same table
# on https://www.nvidia.com/en-us/data-center/h100/), footnote "* With sparsity" ("Specifications
# 1/2 lower without sparsity"). H100 SXM: FP32 67, TF32 989*, BF16 1,979*, FP16 1,979*,
# FP8 3,958* TFLOPS; halved for the tensor rows.
H100_SXM = DevicePeak(
    "H100 SXM", "SXM5", 67.0, 494.5, 989.5, 989.5, 1979.0,
    "NVIDIA H100 Tensor Core GPU Datasheet, "
    "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet "
    "(H100 SXM column; tensor figures with sparsity, halved)",
)
# Same datasheet, H100 PCIe column: FP32 51, TF32 756*, BF16 1,513*, FP16 1,513*, FP8 3,026*.
H100_PCIE = DevicePeak(
    "H100 PCIe", "PCIe", 51.0, 378.0, 756.5, 756.5, 1513.0,
    "NVIDIA H100 Tensor Core GPU Datasheet, "
    "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet "
    "(H100 PCIe column; tensor figures with sparsity, halved)",
)
# H100 NVL (94 GB), per GPU: FP32 60, TF32 835*, BF16 1,671*, FP16 1,671*, FP8 3,341* TFLOPS,
# as on the current https://www.nvidia.com/en-us/data-center/h100/ table and NVIDIA's
# "H100 NVL" datasheet (copy hosted by PNY: https://www.pny.com/file%20library/company/support/
# product%20brochures/nvidia%20data%20center%20gpus/english/h100-nvl-datasheet.pdf). The first
# (2023) H100 NVL datasheet quoted a two-GPU NVLink pair (FP32 134, BF16 3,958*); tables copied
# from it (e.g. Lightning's throughput.py) carry pair figures. These are per-GPU figures.
H100_NVL = DevicePeak(
    "H100 NVL", "NVL (PCIe card)", 60.0, 417.5, 835.5, 835.5, 1670.5,
    "https://www.nvidia.com/en-us/data-center/h100/ (H100 NVL column, per GPU; "
    "tensor figures with sparsity, halved)",
)

# Ampere. NVIDIA, "NVIDIA A100 Tensor Core GPU Datasheet",
# https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf
# The datasheet prints dense | sparse pairs: FP32 19.5, TF32 156 | 312*, BF16 312 | 624*,
# FP16 312 | 624*; the dense figure is used. The 40 GB and 80 GB, PCIe and SXM4 columns have the
# same compute figures. Ampere has no FP8.
_A100_SOURCE = (
    "NVIDIA A100 Tensor Core GPU Datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/"
    "Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (dense figures)"
)
A100_SXM = DevicePeak("A100 SXM4", "SXM4", 19.5, 156.0, 312.0, 312.0, None, _A100_SOURCE)
A100_PCIE = DevicePeak("A100 PCIe", "PCIe", 19.5, 156.0, 312.0, 312.0, None, _A100_SOURCE)
A100_OTHER = DevicePeak("A100", "unknown", 19.5, 156.0, 312.0, 312.0, None, _A100_SOURCE)
# NVIDIA, "NVIDIA A10 Tensor Core GPU Datasheet",
# https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf
# (also https://www.nvidia.com/en-us/data-center/products/a10-gpu/): FP32 31.2,
# TF32 62.5 | 125*, BF16 125 | 250*, FP16 125 | 250*; dense figures used.
A10 = DevicePeak(
    "A10", "PCIe", 31.2, 62.5, 125.0, 125.0, None,
    "NVIDIA A10 Tensor Core GPU Datasheet, "
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf "
    "(dense figures)",
)
# A10G is the AWS-only GA102 variant (EC2 G5). Source: the NVIDIA datasheet AWS hosts,
# "NVIDIA A10G Tensor Core GPU", https://d1.awsstatic.com/product-marketing/ec2/
# NVIDIA_AWS_A10G_DataSheet_FINAL_02_17_2022.pdf . The PDF's text could not be opened here;
# its figures as quoted by two independent public write-ups that cite it are FP32 35,
# TF32 35 | 70*, BF16/FP16 70 | 140* (dense | sparse), and we use those dense figures. They are
# consistent with the chip: 80 SMs x 128 FP32 lanes x 2 x 1.71 GHz = 35.0 TFLOP/s, and GA102's
# FP32-accumulate tensor rate of 512 FLOP/clk/SM gives 80 x 512 x 1.71 GHz = 70.0 TFLOP/s; one
# of those write-ups measured a bf16 8192^3 matmul at 66.6 TFLOP/s, which a 70 peak allows.
# Some tables (e.g. Lightning's) reuse the A10's 125 TFLOPS for the A10G; that is the A10's
# figure, not the A10G's. Treat the A10G figures as not confirmed from the PDF text itself.
A10G = DevicePeak(
    "A10G", "PCIe (AWS EC2 G5)", 35.0, 35.0, 70.0, 70.0, None,
    "NVIDIA A10G datasheet hosted by AWS, https://d1.awsstatic.com/product-marketing/ec2/"
    "NVIDIA_AWS_A10G_DataSheet_FINAL_02_17_2022.pdf (dense figures as quoted from it; "
    "PDF text not verified here)",
)

# Ada Lovelace. NVIDIA, "NVIDIA L40S GPU Datasheet",
# https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413 , as reproduced by resellers:
# FP32 91.6, TF32 183 | 366*, BF16 362.05 | 733*, FP16 362.05 | 733*, FP8 733 | 1,466* TFLOPS
# (dense | * with sparsity). The printed dense BF16/FP16 362.05 is not half of the printed 733
# (it matches the L40's 2,490 MHz clock, not the L40S's 2,520 MHz); we use half the sparse
# figure, S/2 = 366.5, which 142 SMs x 1,024 FLOP/clk x 2.52 GHz = 366.4 TFLOP/s agrees with.
# TF32 183 and FP8 733 are half of their sparse figures as printed.
L40S = DevicePeak(
    "L40S", "PCIe", 91.6, 183.0, 366.5, 366.5, 733.0,
    "NVIDIA L40S GPU Datasheet, https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413 "
    "(tensor figures with sparsity, halved)",
)
# NVIDIA, "NVIDIA L40 GPU Accelerator" datasheet,
# https://www.nvidia.com/content/dam/en-zz/Solutions/design-visualization/support-guide/NVIDIA-L40-Datasheet-January-2023.pdf
# prints dense | sparse pairs: FP32 90.5, TF32 90.5 | 181*, BF16 181.05 | 362.1*,
# FP16 181.05 | 362.1*, FP8 362 | 724*; dense figures used.
L40 = DevicePeak(
    "L40", "PCIe", 90.5, 90.5, 181.05, 181.05, 362.0,
    "NVIDIA L40 GPU Accelerator datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/"
    "design-visualization/support-guide/NVIDIA-L40-Datasheet-January-2023.pdf (dense figures)",
)
# NVIDIA, "NVIDIA L4 Tensor Core GPU Datasheet", https://resources.nvidia.com/en-us-l4/l4-datasheet
# (same table on https://www.nvidia.com/en-us/data-center/l4/): FP32 30.3, TF32 120*,
# BF16 242*, FP16 242*, FP8 485* ("* Shown with sparsity. Specifications are one-half lower
# without sparsity."); halved: 60, 121, 121, 242.5.
L4 = DevicePeak(
    "L4", "PCIe (low profile)", 30.3, 60.0, 121.0, 121.0, 242.5,
    "NVIDIA L4 Tensor Core GPU Datasheet, https://resources.nvidia.com/en-us-l4/l4-datasheet "
    "(tensor figures with sparsity, halved)",
)

# Volta. NVIDIA, "NVIDIA Tesla V100 GPU Accelerator" datasheet,
# https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf
# Single precision / Tensor Performance (FP16 inputs, FP32 accumulate; Volta has no sparsity,
# so these are dense): V100 SXM2 15.7 / 125, V100 PCIe 14 / 112, V100S PCIe 16.4 / 130 TFLOPS.
# Volta has no TF32, BF16 or FP8 tensor cores.
_V100_SOURCE = (
    "NVIDIA Tesla V100 datasheet, https://images.nvidia.com/content/technologies/volta/pdf/"
    "volta-v100-datasheet-update-us-1165301-r5.pdf (dense; Volta has no sparsity)"
)
V100_SXM2 = DevicePeak("V100 SXM2", "SXM2", 15.7, None, None, 125.0, None, _V100_SOURCE)
V100_PCIE = DevicePeak("V100 PCIe", "PCIe", 14.0, None, None, 112.0, None, _V100_SOURCE)
V100S_PCIE = DevicePeak("V100S PCIe", "PCIe", 16.4, None, None, 130.0, None, _V100_SOURCE)

# Turing. NVIDIA, "NVIDIA T4 Tensor Core GPU" datasheet,
# https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf
# Single precision 8.1, Mixed precision (FP16/FP32) 65 TFLOPS (dense; Turing has no sparsity).
# Turing has no TF32, BF16 or FP8 tensor cores.
T4 = DevicePeak(
    "T4", "PCIe (low profile)", 8.1, None, None, 65.0, None,
    "NVIDIA T4 Tensor Core GPU datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/"
    "Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf (dense; Turing has no sparsity)",
)

#: Every known chip, for reports and tests.
DEVICE_PEAKS: tuple[DevicePeak, ...] = (
    H200_SXM, H200_NVL, H100_SXM, H100_PCIE, H100_NVL,
    A100_SXM, A100_PCIE, A100_OTHER, A10G, A10,
    L40S, L40, L4,
    V100_SXM2, V100_PCIE, V100S_PCIE, T4,
)
# fmt: on
