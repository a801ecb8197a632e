"""profile_window: the deep-profile window summed up (kernels, CPU ops, collectives, DataLoader).

window_stats() is pure: fake CUDA events check the kernel, tensor-core and overlap arithmetic
against figures computed by hand; real torch.profiler windows on the CPU (one process, and a
2-rank gloo DDP job under torchrun) check what torch really records.
"""

import gzip
import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import autotune
from profilers.contract.figures import ProfileWindow
from profilers.contract.json_checks import record_json
from profilers.runtime.deep import DeepProfiler, top_ops, window_stats
from profilers.traces.gpu_time import classify
from tests.profile_run import profile_script

ROOT = Path(__file__).resolve().parents[2]


def ev(name, start, end, device="CUDA", self_cpu=0.0, is_async=False):
    return SimpleNamespace(
        name=name,
        device_type=SimpleNamespace(name=device),
        time_range=SimpleNamespace(start=start, end=end),
        self_cpu_time_total=self_cpu,
        is_async=is_async,
    )


def test_cuda_kernels_tensor_cores_and_exposed_nccl_time():
    events = [
        ev("aten::mm", 0, 100, "CPU", self_cpu=60.0),
        ev("cudaLaunchKernel", 10, 15, "CPU", self_cpu=5.0),
        ev("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 20, 60),  # tensor cores
        ev("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", 60, 64),
        ev("nvjet_tst_192x192_64x3_2x1_v_bz_coopA_NNT", 64, 84),  # Hopper cuBLAS GEMM
        ev("Memcpy HtoD (Pageable -> Device)", 84, 94),  # not a kernel
        ev("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 50, 110),
        ev("nccl:all_reduce", 45, 50, "CPU", self_cpu=5.0),
    ]
    w = window_stats(events, steps=1, cuda=True)
    assert w.kernels == 3
    assert w.kernel_time_us == 40 + 4 + 20
    assert w.kernel_median_us == 20 and w.kernel_mean_us == pytest.approx(64 / 3)
    assert w.kernel_busy_us == 64  # 20-84, no gaps
    assert w.tensor_core_fraction == pytest.approx(60 / 64)
    assert w.collective_source == "device_kernels" and w.collective_calls == 1
    assert w.collective_time_us == 60  # 50-110
    assert w.collective_exposed_us == 110 - 84  # compute kernels cover 50-84 of it
    assert w.cpu_op_self_us == 65.0  # the nccl:all_reduce range is collective time, not an op
    assert w.wall_us == 100  # CPU events 0-100


def test_cpu_window_has_no_kernel_fields_and_prefers_backend_ranges_over_ops():
    events = [
        ev("c10d::allreduce_", 10, 12, "CPU", self_cpu=2.0),
        ev("gloo:all_reduce", 12, 40, "CPU", is_async=True),
        ev("gloo:all_reduce", 30, 50, "CPU", is_async=True),
        ev("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 0, 8, "CPU", self_cpu=8.0),
    ]
    w = window_stats(events, steps=2, cuda=False)
    assert w.kernels is None and w.tensor_core_fraction is None and w.collective_exposed_us is None
    assert w.collective_source == "backend_ranges" and w.collective_time_us == 38  # union of 12-50
    assert w.dataloader_iter == "_MultiProcessingDataLoaderIter" and w.dataloader_us == 8
    assert w.cpu_op_self_us == 10.0 and w.steps == 2
    assert window_stats([], steps=1, cuda=True).kernels == 0


def test_a_real_cpu_window_from_torch_profiler():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = DataLoader(TensorDataset(torch.randn(64, 32), torch.randint(0, 4, (64,))), batch_size=16)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for x, y in data:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    w = window_stats(prof.events(), steps=4, cuda=False)
    assert w.dataloader_iter == "_SingleProcessDataLoaderIter"
    assert 0 < w.dataloader_us < w.wall_us
    assert 0 < w.cpu_op_self_us <= 1.05 * w.wall_us  # one thread: self times cannot pass the window
    assert w.collective_time_us == 0.0 and w.collective_source is None
    assert ProfileWindow(**json.loads(json.dumps(record_json(w)))) == w


SLEEP_S = 0.03


def test_the_window_marks_its_steps_and_their_python_time_is_no_op_time(tmp_path):
    """Each step of the window is a ProfilerStep range numbered from the training's step (5 here),
    as trace tools expect. The ranges span the window, so its wall time holds the 3 × 30 ms each
    step sleeps outside any op; that time, the ranges' self time, is no op's: on this one thread the
    ops' self time fits in the wall time less the sleeps, however slow a busy machine makes either."""
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    window = DeepProfiler(cuda=False)
    window.start(5)
    for step in range(3):
        model(torch.randn(16, 32)).sum().backward()
        time.sleep(SLEEP_S)
        if step < 2:
            window.next_step()
    prof = window.stop()
    prof.export_chrome_trace(str(tmp_path / "window.json"))
    events = json.loads((tmp_path / "window.json").read_text())["traceEvents"]
    marks = sorted(e["name"] for e in events if str(e.get("name")).startswith("ProfilerStep"))
    assert marks == ["ProfilerStep#5", "ProfilerStep#6", "ProfilerStep#7"]
    w = window_stats(prof.events(), steps=3, cuda=False)
    assert w.wall_us >= 3 * SLEEP_S * 1e6
    assert 0 < w.cpu_op_self_us <= w.wall_us - 3 * SLEEP_S * 1e6
    assert not any(row.name.startswith("ProfilerStep") for row in top_ops(prof, cuda=False))


def _train(steps):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        loss = nn.functional.cross_entropy(model(torch.randn(16, 32)), torch.randint(0, 4, (16,)))
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_summary_json_has_profile_window_and_null_without_a_window(tmp_path):
    with autotune.profile(run_dir=tmp_path / "on", quiet=True) as prof:
        _train(14)
    window = json.loads((tmp_path / "on" / "summary.json").read_text())["profile_window"]
    assert window == prof.summary["profile_window"]
    assert window["steps"] == 3  # profile_steps
    assert window["wall_us"] > 0 and window["cpu_op_self_us"] > 0 and window["kernels"] is None
    with autotune.profile(run_dir=tmp_path / "off", quiet=True, deep_profile=False):
        _train(14)
    assert json.loads((tmp_path / "off" / "summary.json").read_text())["profile_window"] is None


@pytest.mark.slow
def test_a_two_rank_gloo_ddp_window_has_collective_time(tmp_path):
    script = ROOT / "tests" / "scripts" / "loop_ddp.py"
    run_dir = profile_script(
        tmp_path / "run", script, "--steps", "16", "--batch-size", "32", ranks=2, cwd=tmp_path
    )
    window = json.loads((run_dir / "summary.json").read_text())["profile_window"]
    assert window["collective_source"] == "backend_ranges"  # gloo:all_reduce, recorded on gloo's thread
    assert window["collective_calls"] >= 3  # one gradient all-reduce (one bucket) per profiled step
    assert 0 < window["collective_time_us"] < window["wall_us"]


@pytest.mark.gpu
def test_a_real_cuda_window_counts_kernels_and_sees_tensor_cores(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    with autotune.profile(run_dir=tmp_path / "run", quiet=True) as prof:
        for _ in range(14):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(torch.randn(256, 1024, device="cuda")).float().pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    w = prof.summary["profile_window"]
    assert w["kernels"] > 3 * 10 and 0 < w["kernel_busy_us"] <= w["wall_us"]
    assert w["kernel_median_us"] > 0 and w["kernel_time_us"] >= w["kernel_busy_us"]
    # every GEMM kernel of a bf16 autocast step is named as a tensor-core kernel (the share of all kernel
    # time depends on the GPU: on an H200 these GEMMs take a few µs and were 11% of it, beside the
    # elementwise and AdamW kernels)
    trace = next((tmp_path / "run" / "traces").glob("*.json.gz"))
    with gzip.open(trace) as f:
        names = {e["name"] for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"}
    gemms = {n for n in names if classify(n)[2]}
    assert gemms and {n for n in gemms if not classify(n)[1]} == set()
    assert w["tensor_core_fraction"] > 0
    assert w["collective_calls"] == 0 and w["collective_exposed_us"] is None


def test_gpu_user_annotations_are_no_kernels_and_cpu_ops_do_not_list_their_kernels_again():
    annotation = ev("Optimizer.step#AdamW.step", 0, 200)  # a record_function range, on the GPU
    annotation.is_user_annotation = True
    events = [
        ev("aten::mm", 0, 100, "CPU", self_cpu=60.0),
        annotation,
        ev("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 20, 60),
    ]
    w = window_stats(events, steps=1, cuda=True)
    assert w.kernels == 1 and w.kernel_time_us == 40  # (was 2 kernels and 240 µs)
    assert w.kernel_busy_us == 40
    assert w.tensor_core_fraction == pytest.approx(1.0)

    def avg(key, device, self_dev, user=False):
        return SimpleNamespace(
            key=key, count=3, self_device_time_total=self_dev, device_time_total=self_dev,
            self_cpu_time_total=1.0, cpu_time_total=1.0, flops=0,
            device_type=SimpleNamespace(name=device), is_user_annotation=user,
        )  # fmt: skip

    prof = SimpleNamespace(
        key_averages=lambda: [
            avg("Optimizer.step#AdamW.step", "CUDA", 500.0, user=True),
            avg("aten::mm", "CPU", 120.0),  # its kernel's time, again
            avg("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "CUDA", 120.0),
        ]
    )
    ops = top_ops(prof, cuda=True)
    assert [(o.name, o.device) for o in ops] == [("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "cuda")]
