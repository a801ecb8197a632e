"""The one table of GPU facts: every reader (MFU peaks, the plan, prices) finds a device in it alike."""

from __future__ import annotations

import pytest

from autotune.cost.prices import builtin_prices, canonical_gpu, match_gpu
from autotune.plan.gpus import GPUS, gpu_spec, planned_as
from profilers.hardware import peaks
from profilers.hardware.gpus import GPU_MODELS, gpu_model, market_keys, match_gpu_model
from profilers.runtime.flops import match_device


def test_every_rows_own_device_name_finds_that_row():
    # the match order is right only if no earlier pattern takes a later row's name
    for model in GPU_MODELS:
        assert match_gpu_model(model.device_name) is model, model.key


def test_keys_are_unique_and_every_market_is_a_row_that_is_its_own_market():
    keys = [m.key for m in GPU_MODELS]
    assert len(keys) == len(set(keys))
    for model in GPU_MODELS:
        market = gpu_model(model.market)
        assert market is not None and market.market == market.key, model.key


def test_a_row_with_a_sheet_is_planned_as_itself_and_one_without_as_its_market():
    assert {g.key for g in GPUS} == {m.key for m in GPU_MODELS if m.sheet is not None}
    assert len(GPUS) == 12
    # --gpus names planned GPUs only; a device without a sheet is planned as its market row
    for key in ("H100", "A100-PCIe-80GB", "H200-NVL", "GH200", "L40", "RTX 4090"):
        assert gpu_spec(key) is None, key
    h100 = match_gpu_model("NVIDIA H100")  # no form factor: planned (and priced) as the SXM part
    assert h100 is not None and h100.peaks is None
    as_sxm = planned_as(h100)
    assert as_sxm is not None and as_sxm.key == "H100-SXM" and as_sxm.peak is peaks.H100_SXM
    pcie = match_gpu_model("NVIDIA A100 80GB PCIe")
    assert pcie is not None and planned_as(pcie) == gpu_spec("A100-80GB")
    assert planned_as(gpu_model("GH200")) is None  # priced, no sheet here
    assert [g.key for g in GPUS] == ["H200", "H100-SXM", "H100-PCIe", "H100-NVL", "A100-80GB", "A100-40GB",
                                      "L40S", "L4", "A10G", "A10", "V100", "T4"]  # fmt: skip


@pytest.mark.parametrize(
    ("device_name", "peak", "priced_as"),
    [
        ("NVIDIA H100 80GB HBM3", peaks.H100_SXM, "H100-SXM"),
        # HBM2e is the PCIe card's memory: its peaks and its price both say PCIe
        ("NVIDIA H100 80GB HBM2e", peaks.H100_PCIE, "H100-PCIe"),
        ("NVIDIA H100", None, "H100-SXM"),
        ("NVIDIA H200 NVL", peaks.H200_NVL, "H200"),
        ("NVIDIA GH200 480GB", None, "GH200"),
        ("NVIDIA A100-SXM4-80GB", peaks.A100_SXM, "A100-80GB"),
        ("NVIDIA A100 80GB PCIe", peaks.A100_PCIE, "A100-80GB"),
        ("NVIDIA A100-PCIE-40GB", peaks.A100_PCIE, "A100-40GB"),
        ("NVIDIA A100-PG509-200", peaks.A100_OTHER, "A100-40GB"),
        ("NVIDIA L40", peaks.L40, "L40"),
        ("Tesla V100S-PCIE-32GB", peaks.V100S_PCIE, "V100"),
        ("Tesla_T4", peaks.T4, "T4"),
    ],
)
def test_one_device_name_gives_the_same_gpu_to_the_profiler_and_the_price(device_name, peak, priced_as):
    model = match_gpu_model(device_name)
    assert model is not None
    assert match_device(device_name) is peak is model.peaks
    assert match_gpu(device_name, builtin_prices()) == priced_as == model.market
    assert canonical_gpu(device_name) == priced_as


def test_a_mig_slice_is_priced_as_its_gpu_but_given_no_whole_gpu_peak():
    name = "NVIDIA A100-SXM4-40GB MIG 1g.5gb"
    assert match_gpu(name) == "A100-40GB"
    assert match_device(name) is None


def test_names_of_other_devices_find_no_row():
    for name in ("NVIDIA GeForce RTX 4090", "AMD Instinct MI250X", "Tesla P100-PCIE-16GB", "cpu", "", "  "):
        assert match_gpu_model(name) is None, name
    assert set(builtin_prices().gpus()) <= set(market_keys())
