"""The CUDA path: CUDA-event timing without host syncs, CUDA memory, NVML aggregates, MFU.

Runs wherever a CUDA device is present (skipped otherwise; AUTOTUNE_REQUIRE_GPU=1 makes a missing
GPU a failure).
"""

import time

import pytest
import torch
from torch import nn

import autotune

pytestmark = pytest.mark.gpu
LEAN = {"deep_profile": False, "count_flops": False, "quiet": True}  # step timing alone


def cuda_loop(steps, batch=256, width=2048):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, width)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, width, device="cuda")
    torch.cuda.synchronize()
    marks = []
    for _ in range(steps):
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        marks.append(time.perf_counter())
    torch.cuda.synchronize()
    marks.append(time.perf_counter())
    return marks


def test_cuda_run_is_timed_with_events_and_reports_cuda_memory(tmp_path):
    steps = 100  # at 200 Hz, enough NVML readings inside the measured steps however fast the GPU
    with autotune.profile(run_dir=tmp_path / "run", quiet=True, sample_hz=200) as prof:
        marks = cuda_loop(steps)
    s = prof.summary
    assert s["steps"] == steps
    assert s["device"]["kind"] == "cuda"
    assert s["device"]["name"] == torch.cuda.get_device_name()
    assert s["memory"]["cuda_peak_allocated_bytes"] >= 3 * 2048 * 2048 * 4  # weights + Adam state
    assert s["peak_memory_bytes"] == s["memory"]["cuda_peak_allocated_bytes"]
    assert sum(s["phases"].values()) == pytest.approx(1.0, abs=1e-6)
    # GPU-timeline step time agrees with the loop's own wall clock over the measured steps
    own = (marks[-1] - marks[-14]) / 13
    assert s["step_time_s"]["mean"] == pytest.approx(own, rel=0.25)
    assert s["throughput"]["samples_per_s"] == pytest.approx(256 / s["step_time_s"]["mean"], rel=0.01)
    # forward 2 matmuls, backward 2 weight grads + 1 input grad (x needs none): 5 x 2*B*w*w
    assert s["flops_per_step"] == pytest.approx(5 * 2 * 256 * 2048 * 2048, rel=0.02)
    if s["gpu"] is not None:  # NVML present
        gpu = s["gpu"][0]
        assert gpu["util_pct"]["max"] > 0
        assert gpu["mem_used_bytes_max"] > 0
        assert gpu["span"] == "measured_steps"  # power and energy over the steps samples/s covers
        assert [g["index"] for g in s["gpu"]] == s["device"]["nvml_indexes"]  # the job's GPU alone
    if s["peak_flops_per_s"] is not None:
        assert 0 < s["mfu"] < 1


def test_profiler_adds_no_host_device_sync_inside_steps(tmp_path):
    torch.manual_seed(0)
    model = nn.Linear(512, 512).cuda()  # a copy from pageable memory syncs: before the checked steps
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 512, device="cuda")
    with autotune.profile(run_dir=tmp_path / "run", **LEAN) as prof:
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(20):
                loss = model(x).square().mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    assert prof.summary["steps"] == 20
    assert prof.summary["warnings"] == []


def test_bf16_autocast_is_detected_for_mfu(tmp_path):
    with autotune.profile(run_dir=tmp_path / "run", deep_profile=False, quiet=True) as prof:
        model = nn.Linear(1024, 1024).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(128, 1024, device="cuda")
        for _ in range(12):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x).float().square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert prof.summary["precision"] == "bf16"


def test_cuda_losses_are_recorded_without_a_host_sync(tmp_path):
    torch.manual_seed(0)
    model = nn.Linear(512, 512).cuda()  # a copy from pageable memory syncs: before the checked steps
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 512, device="cuda")
    own = []
    with autotune.profile(run_dir=tmp_path / "run", **LEAN) as prof:
        torch.cuda.set_sync_debug_mode("error")  # the recorder thread's reads would raise here too
        try:
            for _ in range(20):
                loss = model(x).square().mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                own.append(loss.detach().clone())  # read after the run: no sync inside it
        finally:
            torch.cuda.set_sync_debug_mode(0)
    assert prof.summary["warnings"] == []
    assert prof.summary["loss"]["per_step"] == pytest.approx([v.item() for v in own], rel=1e-6)


def nan_loop(done, nan_at, sync_every_step):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2048, 2048), nn.GELU(), nn.Linear(2048, 2048)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(256, 2048, device="cuda")
    for i in range(1, 1000):
        loss = model(x).square().mean()
        if i >= nan_at:
            loss = loss * float("nan")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if sync_every_step:  # as a loop that logs loss.item() does
            torch.cuda.synchronize()
        done.append(i)


@pytest.mark.parametrize("sync_every_step", [True, False])
def test_a_nan_loss_on_cuda_stops_the_run_soon_after(tmp_path, sync_every_step):
    from profilers.runtime.session import StepBudgetReached

    done = []
    prof = autotune.profile(
        run_dir=tmp_path / "run", deep_profile=False, quiet=True, stop_on_non_finite_loss=True, max_steps=900
    )
    with pytest.raises(StepBudgetReached), prof:
        nan_loop(done, 20, sync_every_step)
    s = prof.summary
    assert s["stop_reason"] == "non_finite_loss"
    assert s["loss"]["first_non_finite_step"] == 20
    assert s["steps"] == len(done)
    # Read off the training thread once the GPU computed it: a few steps late when the loop waits
    # for the GPU each step; without that, also as far as the host ran ahead of the GPU.
    assert 20 <= s["steps"] <= (30 if sync_every_step else 900), s["steps"]


def conv_loop(steps):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 3, 64, 64, device="cuda")
    for _ in range(steps):
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_fp32_conv_nets_are_told_apart_from_tf32_convolutions(tmp_path):
    """torch's default runs fp32 convolutions in TF32 on Ampere+: named tf32; prepare("fp32") turns
    it off and the run is fp32."""
    major, _ = torch.cuda.get_device_capability()
    torch.set_float32_matmul_precision("highest")
    before = torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = True  # torch's default
        with autotune.profile(run_dir=tmp_path / "a", deep_profile=False, quiet=True) as default:
            conv_loop(10)
        torch.backends.cudnn.allow_tf32 = False  # what autotune.prepare(precision="fp32") sets
        with autotune.profile(run_dir=tmp_path / "b", deep_profile=False, quiet=True) as strict:
            conv_loop(10)
    finally:
        torch.backends.cudnn.allow_tf32 = before
    assert default.summary["precision"] == ("tf32" if major >= 8 else "fp32")
    assert strict.summary["precision"] == "fp32"


def test_the_deep_window_sees_the_kernels_of_a_gpu_bound_loop(tmp_path):
    """Work queued before the window runs before it (a synchronize): the window's kernels keep the
    GPU busy most of its wall time, so no false host-bound verdict."""
    with autotune.profile(run_dir=tmp_path / "run", count_flops=False, quiet=True, warmup_steps=3) as prof:
        cuda_loop(20, batch=1024, width=4096)
    window = prof.summary["profile_window"]
    assert window is not None and window["kernels"] > 0
    assert window["kernel_busy_us"] / window["wall_us"] > 0.5, window


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_a_model_on_the_second_gpu_is_timed_and_measured_there(tmp_path):
    """model.to("cuda:1") without set_device: events, memory and name are cuda:1's."""
    assert torch.cuda.current_device() == 0
    with autotune.profile(run_dir=tmp_path / "run", deep_profile=False, quiet=True) as prof:
        model = nn.Linear(4096, 4096).to("cuda:1")
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(512, 4096, device="cuda:1")
        for _ in range(20):
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    s = prof.summary
    assert s["device"]["index"] == 1
    assert s["memory"]["cuda_peak_allocated_bytes"] >= 4096 * 4096 * 4
    assert torch.cuda.max_memory_allocated(0) < 4096 * 4096 * 4  # nothing of it on GPU 0
    assert s["step_time_s"]["median"] > 0


def test_the_stop_below_rule_judges_gpu_step_times_not_enqueue_times(tmp_path):
    """A GPU-bound loop the host queues far faster than it runs: a floor at 3x the GPU's real rate
    fires right after the minimum of measured steps (enqueue times alone would pass it)."""
    from profilers.runtime.session import StepBudgetReached

    options = {"deep_profile": False, "count_flops": False, "quiet": True}
    with autotune.profile(run_dir=tmp_path / "free", **options) as free:
        cuda_loop(30, batch=2048, width=4096)
    rate = free.summary["throughput"]["samples_per_s"]
    prof = autotune.profile(
        run_dir=tmp_path / "floor",
        **options,
        stop_below_samples_per_s=3 * rate,
        min_measured_steps=8,
        max_steps=200,
    )
    with pytest.raises(StepBudgetReached), prof:
        cuda_loop(200, batch=2048, width=4096)
    assert prof.summary["stop_reason"] == "below_threshold"
    # warm-up, the minimum, then GPU times read in batches: seen within READ_EVERY_STEPS_UNDER_BUDGETS
    # steps and built into records on the recorder thread
    assert prof.summary["steps"] <= 3 + 8 + 6
