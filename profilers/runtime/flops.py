"""FLOP accounting: peak dense FLOP/s per GPU and precision, MFU, a start/stop FLOP counter.

Peak figures are NVIDIA's (or, for the A10G, the AWS-hosted NVIDIA datasheet's) *dense* tensor
throughput. NVIDIA datasheets for Ampere and later quote tensor figures "with sparsity" (2:4
structured sparsity), which is twice the dense rate; every such figure below is halved and the
comment says so. Ordinary dense training does not run 2:4 sparse kernels, so the dense rate is the
right MFU denominator.

Precisions are the strings ``"fp32"`` (plain FP32 on the CUDA cores, no tensor cores), ``"tf32"``,
``"bf16"``, ``"fp16"`` and ``"fp8"`` (tensor cores). A chip without a mode has ``None`` there.

torch is imported lazily inside the functions that need it, so ``import profilers.runtime.flops`` is cheap.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import TracebackType

log = logging.getLogger(__name__)

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
_H200_SXM = DevicePeak(
    "H200 SXM", "SXM5", 67.0, 494.5, 989.5, 989.5, 1979.0,
    "https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM column; tensor figures with sparsity, halved)",
)
# Same page, H200 NVL column: FP32 60, TF32 835 (S/2 = 417.5), BF16 1,671 (S/2 = 835.5),
# FP16 1,671 (S/2 = 835.5), FP8 3,341 (S/2 = 1,670.5) TFLOPS, per GPU, up to 600 W.
_H200_NVL = DevicePeak(
    "H200 NVL", "NVL (PCIe card)", 60.0, 417.5, 835.5, 835.5, 1670.5,
    "https://www.nvidia.com/en-us/data-center/h200/ (H200 NVL column; tensor figures with sparsity, halved)",
)
# NVIDIA, "NVIDIA H100 Tensor Core GPU Datasheet",
# https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet (same table
# on https://www.nvidia.com/en-us/data-center/h100/), footnote "* With sparsity" ("Specifications
# 1/2 lower without sparsity"). H100 SXM: FP32 67, TF32 989*, BF16 1,979*, FP16 1,979*,
# FP8 3,958* TFLOPS; halved for the tensor rows.
_H100_SXM = DevicePeak(
    "H100 SXM", "SXM5", 67.0, 494.5, 989.5, 989.5, 1979.0,
    "NVIDIA H100 Tensor Core GPU Datasheet, "
    "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet "
    "(H100 SXM column; tensor figures with sparsity, halved)",
)
# Same datasheet, H100 PCIe column: FP32 51, TF32 756*, BF16 1,513*, FP16 1,513*, FP8 3,026*.
_H100_PCIE = DevicePeak(
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
_H100_NVL = DevicePeak(
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
_A100_SXM = DevicePeak("A100 SXM4", "SXM4", 19.5, 156.0, 312.0, 312.0, None, _A100_SOURCE)
_A100_PCIE = DevicePeak("A100 PCIe", "PCIe", 19.5, 156.0, 312.0, 312.0, None, _A100_SOURCE)
_A100_OTHER = DevicePeak("A100", "unknown", 19.5, 156.0, 312.0, 312.0, None, _A100_SOURCE)
# NVIDIA, "NVIDIA A10 Tensor Core GPU Datasheet",
# https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf
# (also https://www.nvidia.com/en-us/data-center/products/a10-gpu/): FP32 31.2,
# TF32 62.5 | 125*, BF16 125 | 250*, FP16 125 | 250*; dense figures used.
_A10 = DevicePeak(
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
_A10G = DevicePeak(
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
_L40S = DevicePeak(
    "L40S", "PCIe", 91.6, 183.0, 366.5, 366.5, 733.0,
    "NVIDIA L40S GPU Datasheet, https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413 "
    "(tensor figures with sparsity, halved)",
)
# NVIDIA, "NVIDIA L40 GPU Accelerator" datasheet,
# https://www.nvidia.com/content/dam/en-zz/Solutions/design-visualization/support-guide/NVIDIA-L40-Datasheet-January-2023.pdf
# prints dense | sparse pairs: FP32 90.5, TF32 90.5 | 181*, BF16 181.05 | 362.1*,
# FP16 181.05 | 362.1*, FP8 362 | 724*; dense figures used.
_L40 = DevicePeak(
    "L40", "PCIe", 90.5, 90.5, 181.05, 181.05, 362.0,
    "NVIDIA L40 GPU Accelerator datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/"
    "design-visualization/support-guide/NVIDIA-L40-Datasheet-January-2023.pdf (dense figures)",
)
# NVIDIA, "NVIDIA L4 Tensor Core GPU Datasheet", https://resources.nvidia.com/en-us-l4/l4-datasheet
# (same table on https://www.nvidia.com/en-us/data-center/l4/): FP32 30.3, TF32 120*,
# BF16 242*, FP16 242*, FP8 485* ("* Shown with sparsity. Specifications are one-half lower
# without sparsity."); halved: 60, 121, 121, 242.5.
_L4 = DevicePeak(
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
_V100_SXM2 = DevicePeak("V100 SXM2", "SXM2", 15.7, None, None, 125.0, None, _V100_SOURCE)
_V100_PCIE = DevicePeak("V100 PCIe", "PCIe", 14.0, None, None, 112.0, None, _V100_SOURCE)
_V100S_PCIE = DevicePeak("V100S PCIe", "PCIe", 16.4, None, None, 130.0, None, _V100_SOURCE)

# Turing. NVIDIA, "NVIDIA T4 Tensor Core GPU" datasheet,
# https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf
# Single precision 8.1, Mixed precision (FP16/FP32) 65 TFLOPS (dense; Turing has no sparsity).
# Turing has no TF32, BF16 or FP8 tensor cores.
_T4 = DevicePeak(
    "T4", "PCIe (low profile)", 8.1, None, None, 65.0, None,
    "NVIDIA T4 Tensor Core GPU datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/"
    "Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf (dense; Turing has no sparsity)",
)

#: Every known chip, for reports and tests.
DEVICE_PEAKS: tuple[DevicePeak, ...] = (
    _H200_SXM, _H200_NVL, _H100_SXM, _H100_PCIE, _H100_NVL,
    _A100_SXM, _A100_PCIE, _A100_OTHER, _A10G, _A10,
    _L40S, _L40, _L4,
    _V100_SXM2, _V100_PCIE, _V100S_PCIE, _T4,
)
# fmt: on

# Name rules, first match wins. Names are lower-cased with "_" turned into "-", so "\b" sees
# "-" as a boundary ("a100-sxm4-80gb"). Word boundaries keep "gh200" from matching "h200",
# "a100" from matching "a10", and "l40s" from matching "l40"; the order still puts the more
# specific name first (L40S, L40, L4; A100 before A10; A10G before A10; NVL before the rest).
_RULES: tuple[tuple[re.Pattern[str], DevicePeak], ...] = tuple(
    (re.compile(pattern), peak)
    for pattern, peak in (
        (r"\bh200\b.*\bnvl\b", _H200_NVL),
        (r"\bh200\b", _H200_SXM),  # "NVIDIA H200" is the SXM part
        (r"\bh100\b.*\bnvl\b", _H100_NVL),
        (r"\bh100\b.*\b(pcie|hbm2e)\b", _H100_PCIE),
        (r"\bh100\b.*\b(hbm3|sxm\d?)\b", _H100_SXM),  # "NVIDIA H100 80GB HBM3"
        # A bare "NVIDIA H100" is left unknown: its peak differs by 30% between form factors.
        (r"\bl40s\b", _L40S),
        (r"\bl40\b", _L40),
        (r"\bl4\b", _L4),
        (r"\ba100\b.*\bsxm\d?\b", _A100_SXM),
        (r"\ba100\b.*\bpcie\b", _A100_PCIE),
        (r"\ba100\b", _A100_OTHER),  # every A100 has the same compute figures
        (r"\ba10g\b", _A10G),
        (r"\ba10\b", _A10),
        (r"\bv100s\b.*\bpcie\b", _V100S_PCIE),
        (r"\bv100\b.*\bsxm2\b", _V100_SXM2),
        (r"\bv100\b.*\bpcie\b", _V100_PCIE),
        (r"\bt4\b", _T4),
    )
)


#: A MIG slice's device name: "NVIDIA A100-SXM4-40GB MIG 1g.5gb", "NVIDIA H100 80GB HBM3 MIG 3g.40gb".
_MIG = re.compile(r"\bMIG\b", re.IGNORECASE)


def match_device(name: str) -> DevicePeak | None:
    """Look up the peak table entry for a ``torch.cuda.get_device_name()`` / NVML name.

    Examples: ``"NVIDIA H100 80GB HBM3"`` is the H100 SXM, ``"NVIDIA A100-PCIE-40GB"`` the A100
    PCIe, ``"Tesla V100-SXM2-16GB"`` the V100 SXM2. Unknown or ambiguous names give ``None``, and so
    do MIG slices (``"… MIG 1g.5gb"``): the whole GPU's peak would understate their MFU about 7×.
    """
    if not name or _MIG.search(name):
        return None  # a MIG slice has a fraction of the GPU's peak, and no table of slices here
    normalized = " ".join(name.lower().replace("_", "-").split())
    for pattern, peak in _RULES:
        if pattern.search(normalized):
            return peak
    return None


def peak_flops_per_s(device_name: str, precision: str) -> float | None:
    """Dense peak FLOP/s of one ``device_name`` GPU at ``precision``.

    ``None`` for an unknown device or a precision the chip does not have. FP32 matmuls that run
    as TF32 must be asked for as ``"tf32"`` (:func:`detect_precision` does this).
    """
    peak = match_device(device_name)
    return None if peak is None else peak.flops_per_s(precision)


def mfu(
    flops_per_step: float | None,
    step_time_s: float | None,
    peak_flops_per_s: float | None,
    n_devices: int = 1,
) -> float | None:
    """Model FLOPs utilization: ``flops_per_step / step_time_s / (peak_flops_per_s * n_devices)``.

    ``flops_per_step`` is the step's total over all ``n_devices`` devices and ``peak_flops_per_s``
    is one device's peak. ``None`` when any input is missing, zero or negative.
    """
    if flops_per_step is None or step_time_s is None or peak_flops_per_s is None:
        return None
    if flops_per_step <= 0 or step_time_s <= 0 or peak_flops_per_s <= 0 or n_devices <= 0:
        return None
    return flops_per_step / step_time_s / (peak_flops_per_s * n_devices)


class FlopCounter:
    """Counts the FLOPs torch runs between :meth:`start` and :meth:`stop`.

    Wraps ``torch.utils.flop_counter.FlopCounterMode(display=False)`` so that counting can start
    in one function (a step-start hook) and stop in another (the step-end hook). ``stop()``
    without ``start()`` returns ``None``; a failure to count returns ``None`` and never raises;
    and the mode is never left pushed: a second ``start()`` first stops the open count, and the
    context-manager form stops on an exception. The mode is thread-local, so ``stop()`` must run
    on the thread that called ``start()``, and other dispatch modes entered after ``start()``
    must be exited before ``stop()``.

    Example::

        counter = FlopCounter()
        counter.start()
        loss = model(x).sum()
        loss.backward()
        flops = counter.stop()  # int, or None if counting failed
    """

    def __init__(self) -> None:
        self._mode: Any = None  # the entered FlopCounterMode, or None when not counting
        self._thread: int | None = None
        #: Result of the last :meth:`stop` (also set on leaving a ``with`` block).
        self.total_flops: int | None = None

    @property
    def running(self) -> bool:
        """Whether a count is open."""
        return self._mode is not None

    def start(self) -> bool:
        """Begin counting; return whether counting is on. Never raises.

        A count already open is stopped (and its result dropped) first.
        """
        if self._mode is not None:
            log.debug("FlopCounter.start() with a count open; closing it first")
            self.stop()
        try:
            from torch.utils.flop_counter import FlopCounterMode

            mode = FlopCounterMode(display=False)
        except Exception:  # an old or broken torch means "no FLOP count"
            log.debug("FlopCounterMode unavailable", exc_info=True)
            return False
        try:
            mode.__enter__()
        except Exception:
            log.debug("FlopCounterMode failed to start", exc_info=True)
            _force_close(mode)
            return False
        self._mode = mode
        self._thread = threading.get_ident()
        return True

    def stop(self) -> int | None:
        """End counting and return the total FLOPs, or ``None`` if nothing was counted.

        ``None`` when :meth:`start` was not called (or failed), when called from another thread
        than :meth:`start`, or when torch failed to count. Never raises.
        """
        self.total_flops = None
        mode, self._mode = self._mode, None
        thread, self._thread = self._thread, None
        if mode is None:
            return None
        if thread is not None and thread != threading.get_ident():
            log.warning("FlopCounter.stop() called from another thread than start(); count dropped")
            return None
        try:
            mode.__exit__(None, None, None)
        except Exception:
            log.debug("FlopCounterMode failed to stop cleanly", exc_info=True)
            _force_close(mode)
            return None
        try:
            self.total_flops = int(mode.get_total_flops())
        except Exception:
            log.debug("FlopCounterMode total unavailable", exc_info=True)
        return self.total_flops

    def __enter__(self) -> FlopCounter:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _force_close(mode: Any) -> None:
    """Best effort to leave no half-entered ``FlopCounterMode`` behind (private torch fields)."""
    inner = getattr(mode, "mode", None)
    if inner is not None:
        try:
            from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

            if any(m is inner for m in _get_current_dispatch_mode_stack()):
                inner.__exit__(None, None, None)
        except Exception:
            log.debug("could not pop the flop-counting dispatch mode", exc_info=True)
        mode.mode = None
    tracker = getattr(mode, "mod_tracker", None)
    if tracker is not None:
        try:
            tracker.__exit__()
        except Exception:
            log.debug("could not close the module tracker", exc_info=True)


def _fsdp_param_dtype(module: object | None) -> Any:
    """The dtype FSDP2's mixed-precision policy computes ``module`` in (``fully_shard``), or None."""
    state_of = getattr(module, "_get_fsdp_state", None)
    if state_of is None:
        return None
    try:
        return state_of()._mp_policy.param_dtype
    except Exception:  # another torch's internals: the first parameter's dtype decides
        return None


def detect_precision(module: object | None = None) -> str:
    """Name the compute precision in use now: ``"bf16"``, ``"fp16"``, ``"tf32"`` or ``"fp32"``.

    Cheap enough to call once per step. In order:

    1. ``"bf16"``/``"fp16"`` when autocast is on with that dtype for the module's device type
       (the first parameter's device; with no module, CUDA then CPU autocast is checked);
    2. else the dtype FSDP2's mixed-precision policy computes the module in (``fully_shard`` with
       ``MixedPrecisionPolicy(param_dtype=...)``), or its first parameter's, when bf16 or fp16;
    3. else ``"tf32"`` when running on CUDA (the module is on CUDA, or with no module CUDA is
       initialized), the device is Ampere or newer, and TF32 matmuls are enabled
       (``torch.backends.cuda.matmul.fp32_precision == "tf32"``, ``allow_tf32``, or
       ``torch.get_float32_matmul_precision() != "highest"``), or the module has convolutions
       and cuDNN runs them in TF32 (``torch.backends.cudnn.conv.fp32_precision`` or the legacy
       ``cudnn.allow_tf32``: on by default, whatever the matmul setting);
    4. else ``"fp32"``.
    """
    import torch

    param = _first_parameter(module)
    device_type = param.device.type if param is not None else None
    autocast_types = (device_type,) if device_type is not None else ("cuda", "cpu")
    for dev in autocast_types:
        dtype = _autocast_dtype(torch, dev)
        if dtype is torch.bfloat16:
            return "bf16"
        if dtype is torch.float16:
            return "fp16"
    if param is not None:
        dtype = _fsdp_param_dtype(module) or param.dtype  # FSDP2 computes in its policy's dtype
        if dtype is torch.bfloat16:
            return "bf16"
        if dtype is torch.float16:
            return "fp16"
    if device_type is not None:
        on_cuda = device_type == "cuda"
    else:
        on_cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    convs_tf32 = _has_conv(torch, module) and _conv_tf32_enabled(torch)
    if on_cuda and _tf32_capable(torch, param) and (_tf32_enabled(torch) or convs_tf32):
        return "tf32"
    return "fp32"


def _has_conv(torch: Any, module: object | None) -> bool:
    """Whether ``module`` holds a convolution (cuDNN's TF32 flag applies to it, not matmuls')."""
    modules = getattr(module, "modules", None)
    if not callable(modules):
        return False
    try:
        return any(isinstance(m, torch.nn.modules.conv._ConvNd) for m in modules())
    except Exception:  # an odd object is "no convolution", not an error
        return False


def _conv_tf32_enabled(torch: Any) -> bool:
    """Whether cuDNN may run FP32 convolutions as TF32 (torch's default), new API then legacy."""
    try:
        precision = getattr(torch.backends.cudnn.conv, "fp32_precision", None)  # torch >= 2.9
    except (RuntimeError, AttributeError):
        precision = None
    if precision in ("tf32", "ieee"):
        return bool(precision == "tf32")
    try:
        return bool(torch.backends.cudnn.allow_tf32)
    except RuntimeError:  # legacy and new API mixed: torch will not say
        return False


def _first_parameter(module: object | None) -> Any:
    """Return the first parameter of ``module`` (anything with ``parameters()``), or ``None``."""
    if module is None:
        return None
    parameters = getattr(module, "parameters", None)
    if not callable(parameters):
        return None
    try:
        return next(iter(parameters()), None)
    except Exception:  # an odd object is "no parameter", not an error
        return None


def _autocast_dtype(torch: Any, device_type: str) -> Any:
    """Return the autocast dtype for ``device_type`` when autocast is on there, else ``None``."""
    try:
        if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4: per-device-type API
            if torch.is_autocast_enabled(device_type):
                return torch.get_autocast_dtype(device_type)
            return None
        if device_type == "cuda":  # torch 2.3
            return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None
        if device_type == "cpu":
            return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else None
    except (RuntimeError, TypeError, ValueError, AttributeError):
        # Device types without autocast support ("meta", some backends) land here.
        return None
    return None


def _tf32_enabled(torch: Any) -> bool:
    """Whether FP32 CUDA matmuls may run as TF32, read without tripping torch's API-mix check."""
    matmul = torch.backends.cuda.matmul
    try:
        precision = getattr(matmul, "fp32_precision", None)  # torch >= 2.9 API
    except RuntimeError:
        precision = None
    if precision == "tf32":
        return True
    if precision == "ieee":
        return False
    # Reading the legacy flags raises RuntimeError when the legacy and new APIs were mixed.
    try:
        if matmul.allow_tf32:
            return True
    except RuntimeError:
        pass
    try:
        return bool(torch.get_float32_matmul_precision() != "highest")
    except RuntimeError:
        return False


def _tf32_capable(torch: Any, param: Any) -> bool:
    """Whether the CUDA device in use has TF32 tensor cores (compute capability 8.0 or newer)."""
    try:
        device = param.device if param is not None else None
        major, _minor = torch.cuda.get_device_capability(device)
    except Exception:
        return False
    return bool(major >= 8)


#: DistributedDataParallel's default ``bucket_cap_mb`` (torch.nn.parallel.DistributedDataParallel).
DDP_DEFAULT_BUCKET_CAP_BYTES = 25 * 1024 * 1024


def model_facts(module: Any) -> dict[str, Any]:
    """Size facts of a model, as summary.json's ``model`` holds them.

    ``class``, ``parameters``, ``trainable_parameters``, ``parameter_bytes``, ``gradient_bytes``
    (bytes of the trainable parameters: what data parallelism reduces each step), and for a
    DistributedDataParallel model ``ddp_bucket_cap_bytes`` (else None).

    Parameters shared between modules count once; DTensor shards count their local part.
    """
    seen: set[int] = set()
    total = trainable = total_bytes = grad_bytes = 0
    for param in module.parameters():
        if id(param) in seen:
            continue
        seen.add(id(param))
        local = getattr(param, "_local_tensor", param)  # a DTensor (FSDP2): this rank's shard
        n, size = int(local.numel()), int(local.element_size())
        total += n
        total_bytes += n * size
        if param.requires_grad:
            trainable += n
            grad_bytes += n * size
    cap = getattr(module, "bucket_bytes_cap", None)
    return {
        "class": type(module).__name__,
        "parameters": total,
        "trainable_parameters": trainable,
        "parameter_bytes": total_bytes,
        "gradient_bytes": grad_bytes,
        "ddp_bucket_cap_bytes": int(cap) if isinstance(cap, int) else None,
    }


def warm_up_flop_counter() -> None:
    """Count the FLOPs of a tiny forward and backward: FlopCounterMode's first use imports a lot."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False):
        a = torch.ones(2, 2, requires_grad=True)
        (a @ a).sum().backward()
