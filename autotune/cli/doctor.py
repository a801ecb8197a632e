"""``autotune doctor``: what this machine offers the profiler, and how to fix what is missing.

Data first (:func:`collect` returns a :class:`DoctorInfo`), then drawing (:func:`render`).
Importing this module is cheap: torch and the sampling backends are imported inside
:func:`collect`.
"""

from __future__ import annotations

import importlib.util
import platform
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from profilers.runtime.backends import get_backend, libnvml

if TYPE_CHECKING:
    from rich.console import Console


@dataclass(frozen=True)
class DoctorInfo:
    """What ``autotune doctor`` found on this machine."""

    python: str
    platform: str
    torch_version: str | None  # None: torch is not importable
    torch_cuda_version: str | None  # CUDA version torch was built with; None for a CPU build
    cuda_available: bool
    device_names: list[str]  # torch's CUDA devices, in CUDA order
    nvml_available: bool
    nvml_driver_version: str | None
    nvml_version: str | None
    nvml_unavailable_reason: str | None  # one line; None when NVML works
    nvtx_importable: bool
    backend: str  # the sampling backend get_backend() picked, e.g. "nvml", "host", "replay"
    backend_error: str | None  # why get_backend() failed (e.g. a bad $AUTOTUNE_BACKEND), else None
    supported_metrics: dict[str, bool]  # DeviceSample field -> reported by the chosen backend here
    psutil_version: str | None
    missing: list[tuple[str, str]] = field(default_factory=list)  # (what, how to fix)


def _torch_facts() -> tuple[str | None, str | None, bool, list[str], str | None]:
    """Torch version, its CUDA version, CUDA availability, device names, import error."""
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install
        return None, None, False, [], f"{type(exc).__name__}: {exc}"
    cuda_version = getattr(torch.version, "cuda", None)
    try:
        available = bool(torch.cuda.is_available())
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if available else []
    except Exception:  # a broken driver can make these raise
        available, names = False, []
    return str(torch.__version__), cuda_version, available, names, None


def collect() -> DoctorInfo:
    """Inspect this machine: Python, torch and CUDA, NVML, nvtx, psutil and the sampling backend."""
    missing: list[tuple[str, str]] = []
    torch_version, torch_cuda, cuda_ok, names, torch_error = _torch_facts()
    if torch_version is None:
        missing.append(("torch", f"pip install torch ({torch_error})"))
    elif torch_cuda is None:
        missing.append(
            ("CUDA build of torch", "this torch is CPU-only; install a CUDA build (see https://pytorch.org)")
        )
    elif not cuda_ok:
        missing.append(("a CUDA GPU visible to torch", "check nvidia-smi and CUDA_VISIBLE_DEVICES"))

    nvml_reason = libnvml.unavailable_reason()
    nvml_ok = nvml_reason is None
    if not nvml_ok:
        missing.append(
            (
                "NVML (GPU power, utilisation, memory, clocks)",
                f"{nvml_reason}. "
                + (
                    ""
                    if "nvidia-ml-py" in (nvml_reason or "")
                    else "Install or load the NVIDIA driver (nvidia-smi must work). "
                )
                + "Until then only host CPU and RAM are sampled",
            )
        )

    nvtx_ok = importlib.util.find_spec("nvtx") is not None
    if not nvtx_ok:
        missing.append(("nvtx (named ranges in Nsight Systems)", "pip install nvtx"))

    psutil_version: str | None
    try:
        import psutil  # a missing psutil is what doctor reports, not a traceback

        psutil_version = psutil.__version__
    except ImportError:
        psutil_version = None
        missing.append(("psutil (host metrics)", "pip install psutil"))

    backend_error: str | None = None
    try:
        backend = get_backend()
        backend_name = backend.name
        metrics = backend.supported_metrics()
    except Exception as exc:  # a bad $AUTOTUNE_BACKEND, an unreadable recording, ...
        backend_name, metrics = "none", {}
        backend_error = f"{type(exc).__name__}: {exc}"
        missing.append(("a sampling backend", f"{backend_error} (check $AUTOTUNE_BACKEND)"))

    return DoctorInfo(
        python=platform.python_version(),
        platform=platform.platform(),
        torch_version=torch_version,
        torch_cuda_version=torch_cuda,
        cuda_available=cuda_ok,
        device_names=names,
        nvml_available=nvml_ok,
        nvml_driver_version=libnvml.driver_version() if nvml_ok else None,
        nvml_version=libnvml.nvml_version() if nvml_ok else None,
        nvml_unavailable_reason=nvml_reason,
        nvtx_importable=nvtx_ok,
        backend=backend_name,
        backend_error=backend_error,
        supported_metrics=metrics,
        psutil_version=psutil_version,
        missing=missing,
    )


def _yes_no(ok: bool) -> str:
    """Rich markup for a yes/no cell."""
    return "[green]yes[/green]" if ok else "[red]no[/red]"


def render(info: DoctorInfo, console: Console) -> None:
    """Print ``info`` as rich tables: the facts, the backend's metrics, then what is missing."""
    facts = Table(title="autotune doctor", show_header=False, title_justify="left")
    facts.add_column("check", style="bold")
    facts.add_column("value")
    facts.add_row("python", f"{info.python} ({info.platform})")
    facts.add_row("torch", info.torch_version or "[red]not importable[/red]")
    facts.add_row("torch CUDA build", info.torch_cuda_version or "none (CPU build)")
    facts.add_row("CUDA available", _yes_no(info.cuda_available))
    facts.add_row("CUDA devices", ", ".join(info.device_names) or "none")
    if info.nvml_available:
        facts.add_row(
            "NVML", f"[green]ok[/green] (driver {info.nvml_driver_version}, NVML {info.nvml_version})"
        )
    else:
        facts.add_row("NVML", f"[red]unavailable[/red]: {info.nvml_unavailable_reason}")
    facts.add_row("nvtx", _yes_no(info.nvtx_importable))
    facts.add_row("psutil", info.psutil_version or "[red]not installed[/red]")
    facts.add_row(
        "sampling backend", info.backend if info.backend_error is None else f"[red]{info.backend_error}[/red]"
    )
    supported = [k for k, ok in info.supported_metrics.items() if ok]
    unsupported = [k for k, ok in info.supported_metrics.items() if not ok]
    facts.add_row("metrics reported", ", ".join(supported) or "none")
    facts.add_row("metrics not reported", ", ".join(unsupported) or "none")
    console.print(facts)

    if info.missing:
        todo = Table(title="missing", title_justify="left")
        todo.add_column("what", style="bold yellow")
        todo.add_column("how to fix")
        for what, fix in info.missing:
            todo.add_row(what, fix)
        console.print(todo)
    else:
        console.print("[green]nothing missing[/green]")


def main() -> int:
    """Collect and print the doctor report; always returns 0 (missing parts are not errors)."""
    render(collect(), Console())
    return 0


if __name__ == "__main__":
    sys.exit(main())
