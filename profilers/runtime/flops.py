"""FLOP accounting: peak dense FLOP/s of the run's GPU per precision, MFU, a start/stop FLOP counter.

The peaks are :mod:`profilers.hardware.peaks`'s datasheet figures (dense), found for a device name
through :mod:`profilers.hardware.gpus`'s one table of GPU models.

torch is imported lazily inside the functions that need it, so ``import profilers.runtime.flops`` is cheap.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import TYPE_CHECKING, Any

from profilers.contract.figures import ModelFacts
from profilers.hardware.gpus import match_gpu_model
from profilers.hardware.peaks import DevicePeak

if TYPE_CHECKING:
    from types import TracebackType

log = logging.getLogger(__name__)


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
    model = match_gpu_model(name)
    return None if model is None else model.peaks


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


def model_facts(module: Any) -> ModelFacts:
    """Size facts of a model, as summary.json's ``model`` holds them.

    Its class, parameters (trainable ones apart), their bytes, the gradients' bytes (of the
    trainable parameters: what data parallelism reduces each step), and for a
    DistributedDataParallel model its bucket size (else None).

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
    return ModelFacts(
        class_name=type(module).__name__,
        parameters=total,
        trainable_parameters=trainable,
        parameter_bytes=total_bytes,
        gradient_bytes=grad_bytes,
        ddp_bucket_cap_bytes=int(cap) if isinstance(cap, int) else None,
    )


def warm_up_flop_counter() -> None:
    """Count the FLOPs of a tiny forward and backward: FlopCounterMode's first use imports a lot."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False):
        a = torch.ones(2, 2, requires_grad=True)
        (a @ a).sum().backward()
