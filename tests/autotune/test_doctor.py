from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
from rich.console import Console

from autotune.cli import doctor
from profilers.contract.records import SAMPLE_FIELDS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("AUTOTUNE_BACKEND", raising=False)
    return monkeypatch


def _render(info: doctor.DoctorInfo) -> str:
    out = io.StringIO()
    doctor.render(info, Console(file=out, width=200, color_system=None))
    return out.getvalue()


def test_collect_on_this_machine(no_env: pytest.MonkeyPatch) -> None:
    import torch

    info = doctor.collect()
    assert info.python.startswith("3.")
    assert info.torch_version == str(torch.__version__)
    assert info.cuda_available == torch.cuda.is_available()
    assert len(info.device_names) == (torch.cuda.device_count() if info.cuda_available else 0)
    assert info.nvtx_importable
    assert info.psutil_version
    assert set(info.supported_metrics) == set(SAMPLE_FIELDS) - {"t_ns", "device_index", "kind"}
    if info.nvml_available:  # a GPU machine
        assert info.backend == "nvml" and info.nvml_driver_version and info.nvml_unavailable_reason is None
    else:  # this CPU-only machine: host backend, and NVML listed as missing with a fix
        assert info.backend == "host" and info.nvml_unavailable_reason
        assert info.supported_metrics["cpu_util_pct"] and not info.supported_metrics["power_mw"]
        (fix,) = [fix for what, fix in info.missing if what.startswith("NVML")]
        assert fix.startswith(info.nvml_unavailable_reason) and "NVIDIA driver" in fix
    text = _render(info)
    assert "autotune doctor" in text and re.search(rf"sampling backend +│ {info.backend} ", text)


def test_nvml_missing_is_reported_with_a_fix(no_env: pytest.MonkeyPatch) -> None:
    import pynvml

    fake = types.ModuleType("pynvml")
    fake.NVMLError = pynvml.NVMLError  # type: ignore[attr-defined]
    fake.NVMLError_LibraryNotFound = pynvml.NVMLError_LibraryNotFound  # type: ignore[attr-defined]

    def nvml_init() -> None:
        raise pynvml.NVMLError_LibraryNotFound()

    fake.nvmlInit = nvml_init  # type: ignore[attr-defined]
    no_env.setitem(sys.modules, "pynvml", fake)
    info = doctor.collect()
    assert not info.nvml_available and info.backend == "host"
    assert info.nvml_unavailable_reason is not None and "library not found" in info.nvml_unavailable_reason
    assert info.nvml_driver_version is None and info.nvml_version is None
    whats = [what for what, _ in info.missing]
    assert any(w.startswith("NVML") for w in whats)
    text = _render(info)
    assert "unavailable" in text and "missing" in text and "library not found" in text


def test_bad_backend_env_is_reported_not_raised(no_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    no_env.setenv("AUTOTUNE_BACKEND", f"replay:{tmp_path / 'nope.jsonl.gz'}")
    info = doctor.collect()
    assert info.backend == "none" and info.backend_error and "nope.jsonl.gz" in info.backend_error
    assert any(what == "a sampling backend" for what, _ in info.missing)


def test_main_prints_and_returns_zero(no_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert doctor.main() == 0
    assert "autotune doctor" in capsys.readouterr().out


def test_a_missing_psutil_is_reported_not_raised() -> None:
    code = "import sys\nsys.modules['psutil'] = None\nfrom autotune.cli.main import main\n"
    code += "sys.exit(main(['doctor']))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "pip install psutil" in out.stdout and "Traceback" not in out.stderr


def test_import_does_not_pull_torch_or_pynvml() -> None:
    code = (
        "import sys, autotune.cli.doctor\n"
        "heavy = [m for m in ('torch', 'pynvml', 'nvtx') if m in sys.modules]\n"
        "assert not heavy, heavy"
    )
    subprocess.run(
        [sys.executable, "-c", code], check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
