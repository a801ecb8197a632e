"""Tests for profilers/runtime/flops.py: the peak table, name matching, MFU, FlopCounter, precision."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
from torch.utils.flop_counter import FlopCounterMode

from profilers.hardware.peaks import DEVICE_PEAKS, PRECISIONS, DevicePeak
from profilers.runtime import flops
from profilers.runtime.flops import (
    FlopCounter,
    detect_precision,
    match_device,
    mfu,
    peak_flops_per_s,
)

# --------------------------------------------------------------------------- FlopCounter


def _global_module_hook_counts() -> tuple[int, int]:
    """Global nn.Module forward hooks; FlopCounterMode's module tracker registers some."""
    from torch.nn.modules import module as module_mod

    return len(module_mod._global_forward_pre_hooks), len(module_mod._global_forward_hooks)


@pytest.fixture
def clean_dispatch_state():
    """Every test here must leave torch's dispatch-mode stack and global hooks as it found them."""
    before_hooks = _global_module_hook_counts()
    assert _get_current_dispatch_mode_stack() == []
    yield
    assert _get_current_dispatch_mode_stack() == []
    assert _global_module_hook_counts() == before_hooks


def test_linear_forward_backward_flops(clean_dispatch_state):
    batch, d_in, d_out = 4, 8, 16
    layer = nn.Linear(d_in, d_out)
    x = torch.randn(batch, d_in, requires_grad=True)
    # Forward: one (B x in) @ (in x out) matmul = 2*B*in*out FLOPs (the bias add is not counted).
    forward = 2 * batch * d_in * d_out
    # Backward: grad input (B x out) @ (out x in) and grad weight (out x B) @ (B x in), each
    # 2*B*in*out; the bias gradient is a sum, not counted.
    backward = 2 * (2 * batch * d_in * d_out)
    assert forward + backward == 3072

    counter = FlopCounter()
    assert counter.start() is True
    assert counter.running
    layer(x).sum().backward()
    assert counter.stop() == forward + backward
    assert not counter.running
    assert counter.total_flops == 3072


def test_matmul_chain_flops(clean_dispatch_state):
    a, b, c = torch.randn(3, 5), torch.randn(5, 7), torch.randn(7, 2)
    # (3x5)@(5x7): 2*3*5*7 = 210; (3x7)@(7x2): 2*3*7*2 = 84.
    expected = 2 * 3 * 5 * 7 + 2 * 3 * 7 * 2
    assert expected == 294
    counter = FlopCounter()
    counter.start()
    _ = a @ b @ c
    assert counter.stop() == expected


def test_start_and_stop_in_different_functions(clean_dispatch_state):
    layer = nn.Linear(6, 3, bias=False)

    def on_step_start(c: FlopCounter) -> None:
        c.start()

    def train_step() -> None:
        layer(torch.randn(2, 6)).sum().backward()

    def on_step_end(c: FlopCounter) -> int | None:
        return c.stop()

    counter = FlopCounter()
    on_step_start(counter)
    assert len(_get_current_dispatch_mode_stack()) == 1  # the mode stays pushed between calls
    train_step()
    # Forward 2*2*6*3 = 72; input needs no grad, so backward is the weight gradient only: 72.
    assert on_step_end(counter) == 72 + 72


def test_counts_start_fresh_each_time(clean_dispatch_state):
    counter = FlopCounter()
    counter.start()
    _ = torch.randn(2, 3) @ torch.randn(3, 4)  # 2*2*3*4 = 48
    assert counter.stop() == 48
    counter.start()
    _ = torch.randn(1, 3) @ torch.randn(3, 1)  # 2*1*3*1 = 6
    assert counter.stop() == 6


def test_stop_without_start_returns_none(clean_dispatch_state):
    counter = FlopCounter()
    assert counter.stop() is None
    assert counter.stop() is None
    counter.start()
    counter.stop()
    assert counter.stop() is None  # a second stop is harmless


def test_exception_inside_counted_region_leaves_no_mode(clean_dispatch_state):
    counter = FlopCounter()

    def counted_region_that_fails() -> None:
        with counter:
            _ = torch.randn(2, 2) @ torch.randn(2, 2)
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        counted_region_that_fails()
    assert counter.total_flops == 2 * 2 * 2 * 2  # what ran before the error is still reported
    assert _get_current_dispatch_mode_stack() == []

    # A later, independent FlopCounterMode works and sees only its own work.
    with FlopCounterMode(display=False) as later:
        _ = torch.randn(4, 5) @ torch.randn(5, 6)
    assert later.get_total_flops() == 2 * 4 * 5 * 6


def test_step_error_then_restart_closes_the_open_count(clean_dispatch_state):
    """A step that raised before its end hook ran: the next start() closes the stale count."""
    counter = FlopCounter()

    def failing_step() -> None:
        counter.start()
        _ = torch.randn(3, 3) @ torch.randn(3, 3)
        raise RuntimeError("step failed")

    with pytest.raises(RuntimeError, match="step failed"):
        failing_step()
    assert len(_get_current_dispatch_mode_stack()) == 1
    counter.start()
    assert len(_get_current_dispatch_mode_stack()) == 1  # replaced, not stacked
    _ = torch.randn(1, 2) @ torch.randn(2, 1)
    assert counter.stop() == 2 * 1 * 2 * 1


def test_start_failure_is_reported_and_harmless(clean_dispatch_state, monkeypatch):
    def broken_enter(self):
        raise RuntimeError("cannot enter")

    monkeypatch.setattr(FlopCounterMode, "__enter__", broken_enter)
    counter = FlopCounter()
    assert counter.start() is False
    assert not counter.running
    assert counter.stop() is None


def test_start_failure_after_module_tracker_is_cleaned_up(clean_dispatch_state, monkeypatch):
    """FlopCounterMode enters its module tracker, then pushes the mode; a failure in between."""
    import torch.utils.flop_counter as fc_mod

    def broken_mode(counter):
        raise RuntimeError("cannot build the dispatch mode")

    monkeypatch.setattr(fc_mod, "_FlopCounterMode", broken_mode)
    counter = FlopCounter()
    assert counter.start() is False
    assert counter.stop() is None  # the fixture checks the tracker's hooks are gone


def test_total_failure_returns_none_and_pops_mode(clean_dispatch_state, monkeypatch):
    def broken_total(self):
        raise RuntimeError("cannot total")

    monkeypatch.setattr(FlopCounterMode, "get_total_flops", broken_total)
    counter = FlopCounter()
    counter.start()
    _ = torch.randn(2, 2) @ torch.randn(2, 2)
    assert counter.stop() is None


def test_stop_failure_returns_none_and_pops_mode(clean_dispatch_state, monkeypatch):
    def broken_exit(self, *args):
        raise RuntimeError("cannot exit")

    monkeypatch.setattr(FlopCounterMode, "__exit__", broken_exit)
    counter = FlopCounter()
    counter.start()
    assert len(_get_current_dispatch_mode_stack()) == 1
    assert counter.stop() is None


def test_stop_from_another_thread_drops_the_count(clean_dispatch_state):
    import threading

    counter = FlopCounter()
    counter.start()
    results: list[int | None] = []
    worker = threading.Thread(target=lambda: results.append(counter.stop()))
    worker.start()
    worker.join()
    assert results == [None]
    # The mode is still on this thread's stack; stopping here is not possible any more either,
    # so pop it by hand to keep the fixture's check meaningful for the rest of the suite.
    stack = _get_current_dispatch_mode_stack()
    assert len(stack) == 1
    flops._force_close(stack[0].counter)


# --------------------------------------------------------------------------- device table

NAMES = [
    ("NVIDIA H200", "H200 SXM", "SXM5"),
    ("NVIDIA H200 NVL", "H200 NVL", "NVL (PCIe card)"),
    ("NVIDIA H100 80GB HBM3", "H100 SXM", "SXM5"),
    ("NVIDIA H100 PCIe", "H100 PCIe", "PCIe"),
    ("NVIDIA H100 NVL", "H100 NVL", "NVL (PCIe card)"),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM4", "SXM4"),
    ("NVIDIA A100-SXM4-40GB", "A100 SXM4", "SXM4"),
    ("NVIDIA A100-PCIE-40GB", "A100 PCIe", "PCIe"),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe", "PCIe"),
    ("NVIDIA L40S", "L40S", "PCIe"),
    ("NVIDIA L40", "L40", "PCIe"),
    ("NVIDIA L4", "L4", "PCIe (low profile)"),
    ("NVIDIA A10G", "A10G", "PCIe (AWS EC2 G5)"),
    ("NVIDIA A10", "A10", "PCIe"),
    ("Tesla V100-SXM2-16GB", "V100 SXM2", "SXM2"),
    ("Tesla V100-SXM2-32GB", "V100 SXM2", "SXM2"),
    ("Tesla V100-PCIE-32GB", "V100 PCIe", "PCIe"),
    ("Tesla V100S-PCIE-32GB", "V100S PCIe", "PCIe"),
    ("Tesla T4", "T4", "PCIe (low profile)"),
    # Spelling that NVML or other tools may produce.
    ("nvidia  h100   80gb hbm3", "H100 SXM", "SXM5"),
    ("NVIDIA_A10G", "A10G", "PCIe (AWS EC2 G5)"),
]


@pytest.mark.parametrize(("device_name", "peak_name", "form_factor"), NAMES)
def test_match_device_known_names(device_name, peak_name, form_factor):
    peak = match_device(device_name)
    assert peak is not None
    assert (peak.name, peak.form_factor) == (peak_name, form_factor)


@pytest.mark.parametrize(
    "device_name",
    [
        "",
        "cpu",
        "NVIDIA GeForce RTX 4090",
        "NVIDIA GH200 480GB",  # contains "h200" but is Grace Hopper, not an H200
        "NVIDIA H100",  # form factor unknown: SXM and PCIe peaks differ by 30%
        "NVIDIA A100X",
        "NVIDIA A40",
        "NVIDIA L20",
        "Tesla V100-SXM3-32GB",  # not in the V100 datasheet used here
        "Tesla P100-PCIE-16GB",
        "AMD Instinct MI300X",
        # MIG slices: the whole GPU's peak would understate MFU about 7x (1g.5gb is 1/7 of an A100)
        "NVIDIA A100-SXM4-40GB MIG 1g.5gb",
        "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
    ],
)
def test_match_device_unknown_names(device_name):
    assert match_device(device_name) is None


def test_peak_flops_per_s_values():
    assert peak_flops_per_s("NVIDIA H100 80GB HBM3", "bf16") == pytest.approx(1979e12 / 2)
    assert peak_flops_per_s("NVIDIA H100 80GB HBM3", "fp32") == pytest.approx(67e12)
    assert peak_flops_per_s("NVIDIA H200", "fp8") == pytest.approx(3958e12 / 2)
    assert peak_flops_per_s("NVIDIA H200 NVL", "tf32") == pytest.approx(835e12 / 2)
    assert peak_flops_per_s("NVIDIA A100-SXM4-80GB", "tf32") == pytest.approx(156e12)
    assert peak_flops_per_s("NVIDIA L4", "fp8") == pytest.approx(485e12 / 2)
    assert peak_flops_per_s("NVIDIA A10G", "bf16") == pytest.approx(70e12)
    assert peak_flops_per_s("NVIDIA A10", "bf16") == pytest.approx(125e12)
    assert peak_flops_per_s("Tesla T4", "fp16") == pytest.approx(65e12)
    assert peak_flops_per_s("Tesla V100-SXM2-16GB", "fp16") == pytest.approx(125e12)


@pytest.mark.parametrize(
    ("device_name", "precision"),
    [
        ("Tesla T4", "bf16"),  # Turing has no BF16
        ("Tesla T4", "tf32"),
        ("Tesla V100-PCIE-32GB", "bf16"),
        ("Tesla V100-PCIE-32GB", "fp8"),
        ("NVIDIA A100-PCIE-40GB", "fp8"),  # Ampere has no FP8
        ("NVIDIA A10G", "fp8"),
        ("NVIDIA H100 PCIe", "int8"),  # not a precision this table knows
        ("NVIDIA H100 PCIe", "BF16"),  # names are lower case
        ("NVIDIA GeForce RTX 4090", "bf16"),  # unknown device
    ],
)
def test_peak_flops_per_s_none(device_name, precision):
    assert peak_flops_per_s(device_name, precision) is None


def test_table_entries_are_consistent():
    names = [p.name for p in DEVICE_PEAKS]
    assert len(names) == len(set(names))
    for peak in DEVICE_PEAKS:
        assert isinstance(peak, DevicePeak)
        assert "http" in peak.source, peak.name
        assert peak.fp32_tflops is not None
        assert peak.fp32_tflops > 0
        values = {p: peak.tflops(p) for p in PRECISIONS}
        for precision, value in values.items():
            assert value is None or value > 0, (peak.name, precision)
        # Tensor FP16 is faster than plain FP32 on every chip listed.
        assert values["fp16"] is not None
        assert values["fp16"] > values["fp32"]
        # Where a chip has BF16 it runs at the FP16 rate; FP8, where present, doubles it.
        if values["bf16"] is not None:
            assert values["bf16"] == values["fp16"]
        if values["fp8"] is not None:
            assert values["fp8"] == pytest.approx(2 * values["fp16"], rel=0.01)
        if values["tf32"] is not None:
            assert values["tf32"] <= values["fp16"]


def test_device_peak_is_frozen():
    peak = match_device("NVIDIA L40S")
    assert peak is not None
    with pytest.raises(AttributeError):
        peak.bf16_tflops = 1.0  # type: ignore[misc]


# --------------------------------------------------------------------------- mfu


def test_mfu_hand_computed():
    # 3e15 FLOPs per step over 2 devices in 2.0 s: 1.5e15 FLOP/s achieved against
    # 2 x 989.5e12 = 1.979e15 FLOP/s of peak.
    assert mfu(3e15, 2.0, 989.5e12, n_devices=2) == pytest.approx(1.5e15 / 1.979e15)
    assert mfu(3e15, 2.0, 989.5e12, n_devices=2) == pytest.approx(0.757958, abs=1e-6)
    # One device: 1e12 FLOPs in 0.5 s against a 8e12 FLOP/s peak is 25%.
    assert mfu(1e12, 0.5, 8e12) == pytest.approx(0.25)


@pytest.mark.parametrize(
    ("flops_per_step", "step_time_s", "peak", "n_devices"),
    [
        (None, 1.0, 1e12, 1),
        (1e12, None, 1e12, 1),
        (1e12, 1.0, None, 1),
        (0, 1.0, 1e12, 1),
        (1e12, 0.0, 1e12, 1),
        (1e12, 1.0, 0.0, 1),
        (1e12, 1.0, 1e12, 0),
        (-1e12, 1.0, 1e12, 1),
    ],
)
def test_mfu_none_propagation(flops_per_step, step_time_s, peak, n_devices):
    assert mfu(flops_per_step, step_time_s, peak, n_devices) is None


def test_mfu_from_counter_and_table(clean_dispatch_state):
    """End to end: a counted step, a table peak, a step time."""
    counter = FlopCounter()
    counter.start()
    _ = torch.randn(8, 16) @ torch.randn(16, 32)  # 2*8*16*32 = 8192 FLOPs
    step_flops = counter.stop()
    assert step_flops == 8192
    peak = peak_flops_per_s("Tesla T4", "fp16")
    assert mfu(step_flops, 1e-6, peak) == pytest.approx(8192 / 1e-6 / 65e12)


# --------------------------------------------------------------------------- detect_precision


@pytest.fixture
def restore_matmul_precision():
    yield
    torch.backends.cuda.matmul.fp32_precision = "none"
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = True  # torch's default


def test_detect_precision_plain_fp32_on_cpu():
    assert detect_precision(nn.Linear(4, 4)) == "fp32"
    assert detect_precision() == "fp32"


def test_detect_precision_cpu_autocast_bf16():
    layer = nn.Linear(4, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert detect_precision(layer) == "bf16"
        assert detect_precision() == "bf16"
    assert detect_precision(layer) == "fp32"


def test_detect_precision_cpu_autocast_fp16():
    with torch.autocast("cpu", dtype=torch.float16):
        assert detect_precision(nn.Linear(4, 4)) == "fp16"


def test_detect_precision_disabled_autocast_is_ignored():
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        assert detect_precision(nn.Linear(4, 4)) == "fp32"


def test_detect_precision_half_modules():
    assert detect_precision(nn.Linear(4, 4).to(torch.bfloat16)) == "bf16"
    assert detect_precision(nn.Linear(4, 4).to(torch.float16)) == "fp16"


def test_detect_precision_odd_modules():
    assert detect_precision(object()) == "fp32"
    assert detect_precision(nn.ReLU()) == "fp32"  # no parameters


def test_detect_precision_tf32_setting_ignored_on_cpu(restore_matmul_precision):
    torch.set_float32_matmul_precision("high")
    assert detect_precision(nn.Linear(4, 4)) == "fp32"


def _fake_cuda_module(dtype: torch.dtype = torch.float32) -> SimpleNamespace:
    param = SimpleNamespace(device=torch.device("cuda", 0), dtype=dtype)
    return SimpleNamespace(parameters=lambda: iter([param]))


@pytest.mark.parametrize(
    ("capability", "set_precision", "expected"),
    [
        ((8, 0), "high", "tf32"),  # Ampere with TF32 matmuls on
        ((9, 0), "medium", "tf32"),
        ((8, 0), "highest", "fp32"),  # TF32 off
        ((7, 0), "high", "fp32"),  # Volta has no TF32
    ],
)
def test_detect_precision_tf32_rule_on_cuda(
    monkeypatch, restore_matmul_precision, capability, set_precision, expected
):
    """Rule 3 without a GPU: a module reporting a CUDA parameter and a faked device capability."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    torch.set_float32_matmul_precision(set_precision)
    assert detect_precision(_fake_cuda_module()) == expected
    assert detect_precision(_fake_cuda_module(torch.bfloat16)) == "bf16"


def _fake_cuda_conv_net() -> SimpleNamespace:
    net = _fake_cuda_module()
    net.modules = lambda: iter([nn.Conv2d(3, 8, 3), nn.ReLU()])
    return net


def test_detect_precision_fp32_matmuls_but_tf32_convolutions(monkeypatch, restore_matmul_precision):
    """torch's default: matmuls "highest", cuDNN convolutions TF32 on an Ampere GPU: tf32, not fp32."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    torch.set_float32_matmul_precision("highest")
    assert torch.backends.cudnn.conv.fp32_precision == "tf32"  # what torch 2.13 starts with
    assert detect_precision(_fake_cuda_conv_net()) == "tf32"
    assert detect_precision(_fake_cuda_module()) == "fp32"  # no convolution: the matmul mode rules
    torch.backends.cudnn.allow_tf32 = False  # what autotune.prepare() sets for "fp32"
    assert detect_precision(_fake_cuda_conv_net()) == "fp32"
    torch.backends.cudnn.conv.fp32_precision = "tf32"  # the new API
    assert detect_precision(_fake_cuda_conv_net()) == "tf32"
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 0))
    assert detect_precision(_fake_cuda_conv_net()) == "fp32"  # Volta has no TF32


def test_tf32_enabled_reads_new_and_legacy_api(restore_matmul_precision):
    assert flops._tf32_enabled(torch) is False
    torch.set_float32_matmul_precision("high")  # legacy API
    assert flops._tf32_enabled(torch) is True
    torch.set_float32_matmul_precision("highest")
    assert flops._tf32_enabled(torch) is False
    # New API; afterwards torch refuses to read the legacy flags (it raises RuntimeError).
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    assert flops._tf32_enabled(torch) is True
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    assert flops._tf32_enabled(torch) is False


# --------------------------------------------------------------------------- imports


def test_import_does_not_pull_torch():
    code = "import sys, profilers.runtime.flops; sys.exit(1 if 'torch' in sys.modules else 0)"
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_on_gpu_name_counter_and_precision(clean_dispatch_state, restore_matmul_precision):
    name = torch.cuda.get_device_name()
    assert match_device(name) is not None, f"no peak entry for {name!r}"
    layer = nn.Linear(64, 32, device="cuda")
    x = torch.randn(8, 64, device="cuda", requires_grad=True)
    counter = FlopCounter()
    counter.start()
    layer(x).sum().backward()
    assert counter.stop() == 6 * 8 * 64 * 32
    torch.set_float32_matmul_precision("high")
    major, _ = torch.cuda.get_device_capability()
    assert detect_precision(layer) == ("tf32" if major >= 8 else "fp32")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        assert detect_precision(layer) == "bf16"
