"""The job's GPUs among those NVML sees: CUDA_VISIBLE_DEVICES, CUDA's order, UUIDs.

On a node whose NVML lists more GPUs than the job uses (Slurm, shared nodes), only the job's are
sampled, summarized, stored, and counted in the energy objective. NVML is a fake behind the real
backend (tests/fake_nvml.py); the CUDA side of the match is torch's UUID text, exercised for real by
the GPU-marked test at the end.
"""

from __future__ import annotations

import sys

import pytest
import torch
from torch import nn

import autotune
from profilers.contract.profile_summary import GpuFigures
from profilers.contract.reader import read_devices, read_sample_records
from profilers.contract.records import DeviceInfo
from profilers.contract.schema import STORE_NAME
from profilers.contract.study.trials import energy_per_sample
from profilers.runtime.backends import libnvml
from profilers.runtime.gpu_match import job_cuda_indexes, match_uuids, normalize_uuid, visible_nvml_indexes
from tests.fake_nvml import make_fake_pynvml

H100 = "NVIDIA H100 80GB HBM3"


def gpus(*names: str) -> list[DeviceInfo]:
    uuid = "GPU-{:08x}-aaaa-bbbb-cccc-{:012x}"
    return [DeviceInfo(i, "gpu", name, 80 << 30, uuid.format(i, i)) for i, name in enumerate(names)]


EIGHT = gpus(*[H100] * 8)
MIXED = gpus(H100, "NVIDIA L4", H100, "NVIDIA L4")


@pytest.mark.parametrize(
    ("env", "nodes", "expected"),
    [
        ({}, EIGHT, None),  # unset: every GPU visible, the job's known later
        ({"CUDA_VISIBLE_DEVICES": "3"}, EIGHT, [3]),  # one model: CUDA's order is PCI order
        ({"CUDA_VISIBLE_DEVICES": "5,1"}, EIGHT, [5, 1]),  # CUDA device 0 is NVML GPU 5
        ({"CUDA_VISIBLE_DEVICES": ""}, EIGHT, []),  # no GPU for this job
        ({"CUDA_VISIBLE_DEVICES": "2,9,4"}, EIGHT, [2]),  # CUDA stops at the first bad entry
        ({"CUDA_VISIBLE_DEVICES": "2,2"}, EIGHT, [2]),
        ({"CUDA_VISIBLE_DEVICES": "1"}, MIXED, None),  # mixed models, fastest first: unsure
        ({"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, MIXED, [1]),
        ({"CUDA_VISIBLE_DEVICES": "GPU-00000006-aaaa-bbbb-cccc-000000000006"}, EIGHT, [6]),
        ({"CUDA_VISIBLE_DEVICES": "gpu-00000007"}, MIXED + gpus(*[H100] * 8)[4:], [7]),  # a unique prefix
        ({"CUDA_VISIBLE_DEVICES": "GPU-0000000"}, EIGHT, []),  # an ambiguous prefix names nothing
        ({"CUDA_VISIBLE_DEVICES": "MIG-4b0f1c2e-0000-0000-0000-000000000000"}, EIGHT, None),
        ({"CUDA_VISIBLE_DEVICES": "2,3", "LOCAL_WORLD_SIZE": "2"}, EIGHT, [2, 3]),  # torchrun, 2 ranks
        ({"CUDA_VISIBLE_DEVICES": "3", "LOCAL_WORLD_SIZE": "4"}, EIGHT, None),  # a GPU per rank
    ],
)
def test_cuda_visible_devices_names_the_jobs_nvml_gpus(env, nodes, expected):
    assert visible_nvml_indexes(env, nodes) == expected


def test_uuids_match_across_torch_and_nvml_spellings():
    # torch prints a device's UUID bare; NVML's text carries "GPU-" (either case is accepted)
    torch_uuid = "00000005-aaaa-bbbb-cccc-000000000005"
    assert normalize_uuid("GPU-00000005-AAAA-bbbb-cccc-000000000005") == torch_uuid
    assert match_uuids([torch_uuid], EIGHT) == [5]
    assert match_uuids([torch_uuid, "00000002-aaaa-bbbb-cccc-000000000002"], EIGHT) == [5, 2]
    assert match_uuids(["ffffffff-0000-0000-0000-000000000000"], EIGHT) is None  # e.g. a MIG slice
    assert match_uuids([], EIGHT) == []


def test_the_jobs_cuda_devices_on_a_node():
    assert job_cuda_indexes(3, 1, 8) == [3]  # one process: its model's GPU
    assert job_cuda_indexes(0, 4, 8) == [0, 1, 2, 3]  # torchrun, 4 ranks here: cuda:LOCAL_RANK
    assert job_cuda_indexes(0, 4, 1) is None  # each rank sees only its own GPU: the others unknown


def train(steps: int = 30) -> None:
    torch.manual_seed(0)
    model = nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64)
    for _ in range(steps):
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


@pytest.mark.parametrize("visible", ["2", "GPU-00000002"])
def test_a_run_on_a_shared_node_records_only_its_own_gpu(tmp_path, monkeypatch, visible):
    """4 identical GPUs; CUDA_VISIBLE_DEVICES gives the job NVML GPU 2 (its CUDA device 0)."""
    fake = make_fake_pynvml(n_devices=4, names=[H100] * 4)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    libnvml.reset()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    with autotune.profile(run_dir=tmp_path / "run", backend="nvml", quiet=True, sample_hz=50) as prof:
        train()
    summary = prof.summary
    assert [g["index"] for g in summary["gpu"]] == [2]
    assert summary["device"]["nvml_indexes"] == [2]
    store = tmp_path / "run" / STORE_NAME
    assert sorted((d.kind, d.index) for d in read_devices(store)) == [("gpu", 2), ("host", 0)]
    _, samples = read_sample_records(store)
    assert {s.device_index for s in samples if s.kind == "gpu"} == {2}
    # energy per sample counts the job's one GPU: 25 J per NVML read over its span, not four GPUs'
    gpu = summary["gpu"][0]
    watts = gpu["energy_j"] / gpu["duration_s"]
    rate = summary["throughput"]["samples_per_s"]
    parsed = [GpuFigures.parse(g, "gpu") for g in summary["gpu"]]
    assert energy_per_sample(parsed, rate) == pytest.approx(watts / rate)


def test_without_cuda_visible_devices_every_gpu_is_sampled(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml(n_devices=4, names=[H100] * 4))
    libnvml.reset()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with autotune.profile(run_dir=tmp_path / "run", backend="nvml", quiet=True) as prof:
        train(10)
    assert [g["index"] for g in prof.summary["gpu"]] == [0, 1, 2, 3]
    assert prof.summary["device"]["nvml_indexes"] is None


@pytest.mark.gpu
def test_on_gpu_the_models_device_is_matched_to_nvml_by_uuid(tmp_path):
    """torch's UUID text of each visible device matches exactly one NVML GPU."""
    from profilers.runtime.backends.nvml import NvmlBackend
    from profilers.runtime.gpu_match import cuda_uuids

    nvml = NvmlBackend().devices()
    matched = match_uuids(cuda_uuids(range(torch.cuda.device_count())), nvml)
    assert matched is not None and len(set(matched)) == torch.cuda.device_count()
    with autotune.profile(run_dir=tmp_path / "run", quiet=True) as prof:
        model = nn.Linear(256, 256).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(64, 256, device="cuda")
        for _ in range(20):
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert prof.summary["device"]["nvml_indexes"] == [matched[torch.cuda.current_device()]]
    assert [g["index"] for g in prof.summary["gpu"]] == prof.summary["device"]["nvml_indexes"]
