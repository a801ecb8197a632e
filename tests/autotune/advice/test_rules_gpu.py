"""Every profile rule on constructed H200 runs: one change that fires it, the healthy run that must not.

The healthy run (``h200_run()``) fires nothing; each test changes the figure its rule reads to a
realistic bad value and checks the evidence carries this run's numbers.
"""

import dataclasses
import math
import re

import pytest

from autotune.advice import facts, rules
from autotune.advice.advise import PROFILE_RULES
from autotune.advice.thresholds import limit
from tests.autotune.advice.gpu_runs import GIB, GPU_IDLE, HW_THERMAL, SW_POWER_CAP, h200_run, healthy_window

HEALTHY = h200_run()


@pytest.mark.parametrize("rule", PROFILE_RULES, ids=lambda r: r.id)
def test_the_healthy_h200_run_fires_nothing(rule):
    assert rule.check(HEALTHY) is None


def test_input_bound_fires_with_the_data_share_and_its_bound():
    rec = rules.input_bound(h200_run(data_ms=lambda rank, step: 30.0))
    measured = 32 * 120.0  # the ±1.5% wobble averages out
    share = 32 * 30.0 / measured
    assert rec.rule == "input_bound" and rec.severity == "high"
    assert "25.0% of the measured step time: 30.0 ms of the 12" in rec.evidence[0]
    assert rec.speedup_estimate == pytest.approx(1 / (1 - share), rel=0.01)
    assert "worker processes" in rec.evidence[1]  # the window saw _MultiProcessingDataLoaderIter
    assert any("non_blocking" in a for a in rec.actions)


def test_input_bound_ignores_waits_no_loader_setting_removes():
    # 15% of a 1 ms step, but only 0.15 ms: under the 0.2 ms hand-over floor
    run = h200_run(step_ms=lambda rank, step: 1.0, data_ms=lambda rank, step: 0.15)
    assert rules.input_bound(run) is None


def test_low_gpu_util_fires_below_p95_70():
    rec = rules.low_gpu_util(h200_run(util_pct=lambda t: 45 + 5 * math.sin(3 * t)))
    assert rec.rule == "low_gpu_util"
    assert "GPU 0 (NVIDIA H200): utilization p5 4" in rec.evidence[0]
    assert "p95 50%" in rec.evidence[0] and "NVML readings during the measured steps" in rec.evidence[0]


def test_gpu_util_swings_fire_when_p5_is_near_zero_and_p95_high():
    run = h200_run(util_pct=lambda t: 2.0 if int(t * 10) % 3 == 0 else 99.0)
    rec = rules.gpu_util_swings(run)
    assert rec.rule == "gpu_util_swings" and "p5 2%" in rec.evidence[0] and "p95 99%" in rec.evidence[0]
    assert rules.low_gpu_util(run) is None


def test_host_bound_fires_on_many_short_kernels_while_the_gpu_idles():
    window = healthy_window(kernel_median_us=6.2, kernel_mean_us=9.1, kernel_busy_us=3 * 37_500.0)
    rec = rules.host_bound(h200_run(window=window))
    busy = 37_500 / 121_000
    assert rec.rule == "host_bound"
    assert f"{100 * busy:.1f}% of the profiled window" in rec.evidence[0]
    assert "1,400 kernels per step, median 6.2 µs" in rec.evidence[0]
    assert rec.speedup_estimate == pytest.approx(1 / busy)


def test_host_bound_fires_when_the_host_is_busy_all_the_time():
    window = healthy_window(kernel_busy_us=3 * 50_000.0, cpu_op_self_us=3 * 118_000.0)
    assert rules.host_bound(h200_run(window=window)) is not None


def test_host_bound_needs_short_kernels_or_a_busy_host():
    # the GPU idles 60%, but its kernels are long and the host is mostly idle too (waiting on data)
    window = healthy_window(kernel_busy_us=3 * 48_000.0, cpu_op_self_us=3 * 40_000.0)
    assert rules.host_bound(h200_run(window=window)) is None


def test_fp32_on_an_h200_fires_with_the_datasheet_peaks():
    rec = rules.precision_fp32(h200_run(precision="fp32", window=healthy_window(tensor_core_fraction=0.0)))
    assert rec.rule == "precision_fp32" and rec.severity == "high"
    assert "989.5 TFLOP/s in bf16 against 67 in fp32 (14.8x" in rec.evidence[0]
    assert "0.0% of GPU kernel time ran in tensor-core kernels" in rec.evidence[-1]
    assert any("precision='bf16'" in a for a in rec.actions)


def test_fp32_rule_does_not_fire_in_bf16_or_on_an_unknown_gpu():
    assert rules.precision_fp32(h200_run(precision="bf16")) is None
    assert rules.precision_fp32(h200_run(precision="fp32", device_name="NVIDIA Future X1")) is None


def test_reduced_precision_without_tensor_core_kernels_fires():
    rec = rules.precision_no_tensor_cores(h200_run(window=healthy_window(tensor_core_fraction=0.002)))
    assert rec.rule == "precision_no_tensor_cores" and "0.2% of GPU kernel time" in rec.evidence[0]
    assert (
        rules.precision_no_tensor_cores(
            h200_run(precision="fp32", window=healthy_window(tensor_core_fraction=0.0))
        )
        is None
    )


def test_memory_high_fires_above_90_percent():
    rec = rules.memory_high(h200_run(mem_used_bytes=lambda t: 137 * GIB))
    assert rec.rule == "memory_high"
    assert "held 137.0 GiB of 140.4 GiB at its peak (97.6%)" in rec.evidence[0]


def test_memory_low_fires_below_half_allocated():
    rec = rules.memory_low(h200_run(peak_allocated_bytes=21 * GIB))
    assert rec.rule == "memory_low" and "21.0 GiB of GPU 0's 140.4 GiB (15.0%" in rec.evidence[0]
    assert rules.memory_low(h200_run(peak_allocated_bytes=None)) is None  # unknown, not low


def test_comm_bound_counts_exposed_collective_time_on_gpus():
    window = healthy_window(
        collective_calls=3 * 24,
        collective_time_us=3 * 36_300.0,
        collective_exposed_us=3 * 21_780.0,
        collective_source="device_kernels",
    )
    rec = rules.comm_bound(h200_run(world=8, window=window))
    assert rec.rule == "comm_bound"
    assert "collectives (NCCL kernels) take 30.0% of the profiled window" in rec.evidence[0]
    assert "18.0% of the window is collective time no compute kernel hides" in rec.evidence[1]
    assert rec.speedup_estimate == pytest.approx(1 / (1 - 0.18))


def test_comm_bound_suggests_larger_buckets_only_for_gradients_of_several():
    window = healthy_window(
        collective_calls=3 * 24,
        collective_time_us=3 * 36_300.0,
        collective_exposed_us=3 * 21_780.0,
        collective_source="device_kernels",
    )
    run = h200_run(world=8, window=window)
    big = {
        "class": "DistributedDataParallel",
        "gradient_bytes": 7 * 2**30,
        "ddp_bucket_cap_bytes": 25 * 2**20,
    }
    rec = rules.comm_bound(dataclasses.replace(run, summary={**run.summary, "model": big}))
    assert "the gradients (7.0 GiB) make 287 all-reduces of 25 MiB buckets" in rec.evidence
    assert rec.actions[0].startswith(
        "fewer, larger all-reduces: DistributedDataParallel(model, bucket_cap_mb=256"
    )
    small = {**big, "gradient_bytes": 470_000}
    rec = rules.comm_bound(dataclasses.replace(run, summary={**run.summary, "model": small}))
    assert not any("bucket_cap_mb" in a for a in rec.actions)
    assert any("(459.0 KiB) already fit one 25 MiB DDP bucket" in e for e in rec.evidence)


def test_well_overlapped_collectives_are_not_comm_bound():
    window = healthy_window(
        collective_calls=72,
        collective_time_us=3 * 36_300.0,
        collective_exposed_us=3 * 4_000.0,
        collective_source="device_kernels",
    )
    assert rules.comm_bound(h200_run(world=8, window=window)) is None


def _straggling(extra_ms: float):
    # every rank's step takes 120 + extra ms (DDP couples them); rank 2 loads its data extra_ms longer,
    # the others wait as long inside their backward pass
    return h200_run(
        world=4,
        step_ms=lambda rank, step: 120.0 + extra_ms,
        data_ms=lambda rank, step: 1.5 + (extra_ms if rank == 2 else 0.0),
        backward_ms=lambda rank, step: 70.0 + (0.0 if rank == 2 else extra_ms),
    )


def test_straggler_names_the_slow_rank_and_its_phase():
    rec = rules.straggler(_straggling(40.0))
    assert rec.rule == "straggler"
    assert rec.title == "Straggler: rank 2 works 1.3x longer than rank 0"
    assert "rank 2 works 160.0 ms per step, the fastest rank (0) 120.0 ms (1.33x" in rec.evidence[0]
    assert "rank 0 waits 40.0 ms per step in its backward pass" in rec.evidence[1]
    assert "rank 2's data phase is 40.0 ms longer" in rec.evidence[2]
    assert rec.speedup_estimate == pytest.approx(160 / 120)


def test_small_rank_skew_is_not_a_straggler():
    assert rules.straggler(_straggling(10.0)) is None  # 1.08x
    assert rules.straggler(h200_run(world=4)) is None


def test_ranks_slow_in_turns_are_not_stragglers_whatever_their_medians():
    # each rank loads 50 ms longer in some steps (a busy machine): rank 0 in 3 steps of 5, rank 1 in
    # the other 2, so their medians are 170 and 120 ms (1.42x) while step by step neither leads
    def heavy(rank: int, step: int) -> bool:
        return step % 5 in ((0, 1, 2) if rank == 0 else (3, 4))

    run = h200_run(
        world=2,
        step_ms=lambda rank, step: 120.0 + 50.0 * heavy(rank, step),
        data_ms=lambda rank, step: 1.5 + 50.0 * heavy(rank, step),
        backward_ms=lambda rank, step: 70.0,
    )
    own = {r.rank: r.own_s for r in facts.rank_times(run)}
    assert own[0] / own[1] == pytest.approx(170 / 120)  # what a ratio of medians would call a straggler
    low, mean, high = facts.own_work_ratio(run, 0, 1)
    assert low < 1.0 < high and mean < limit("straggler.ratio")
    assert rules.straggler(run) is None


def _with_gloo_window(run, step_ms: float, collectives_ms: float, calls: int = 6):
    """``run`` with a profiled window of 3 ``step_ms`` steps, ``collectives_ms`` of each in gloo's ranges."""
    window = healthy_window(
        wall_us=3 * step_ms * 1e3,
        collective_calls=calls,
        collective_time_us=3 * collectives_ms * 1e3,
        collective_source="backend_ranges",
    )
    return dataclasses.replace(run, summary={**run.summary, "profile_window": window})


def test_comm_bound_leaves_out_the_wait_for_a_straggler():
    run = _with_gloo_window(_straggling(40.0), 160.0, 48.0, calls=72)
    assert rules.comm_bound(run) is None  # 40 ms of the 48 ms collective time is waiting for rank 2
    alone = _with_gloo_window(h200_run(world=4), 160.0, 48.0, calls=72)
    assert rules.comm_bound(alone) is not None  # the same 30% with no straggler


def test_step_outliers_fire_with_the_slow_steps_and_their_cost():
    slow = {15, 25, 35}
    rec = rules.step_outliers(h200_run(step_ms=lambda rank, step: 1200.0 if step in slow else 120.0))
    assert rec.rule == "step_outliers"
    assert (
        "3 of 32 measured steps" in rec.evidence[0]
        and "15 (1200.0 ms), 25 (1200.0 ms), 35" in rec.evidence[0]
    )
    excess, total = 3 * 1.08, 29 * 0.12 + 3 * 1.2
    assert f"{100 * excess / total:.1f}% of the measured time" in rec.evidence[1]
    assert "they recur every 10 steps" in rec.evidence[2]
    assert rec.speedup_estimate == pytest.approx(total / (total - excess))


def test_with_many_outliers_the_costliest_are_the_ones_shown():
    # ten mild outliers first (steps 10-19, 1.5x), then three costly ones late (30, 33, 36, 10x):
    # the evidence names the eight slowest, the three costly ones among them, and counts the rest
    def step_ms(rank: int, step: int) -> float:
        return 1200.0 if step in (30, 33, 36) else 180.0 if 10 <= step < 20 else 120.0

    rec = rules.step_outliers(h200_run(step_ms=step_ms))
    assert "13 of 32 measured steps" in rec.evidence[0]
    assert "30 (1200.0 ms), 33 (1200.0 ms), 36 (1200.0 ms)" in rec.evidence[0]
    assert rec.evidence[0].endswith("and 5 shorter ones")


def test_a_cheap_outlier_is_not_worth_a_recommendation():
    # one step twice as long costs 3% of the measured time
    assert rules.step_outliers(h200_run(step_ms=lambda rank, step: 240.0 if step == 20 else 120.0)) is None


def test_memory_growth_fires_on_a_steady_leak():
    rec = rules.memory_growth(h200_run(mem_used_bytes=lambda t: 60 * GIB + t * 2 * GIB))
    assert rec.rule == "memory_growth" and rec.severity == "high"
    grows = re.match(
        r"GPU 0 memory in use \(NVML\) grows ([\d.]+) MiB per step over 32 measured", rec.evidence[0]
    )
    assert float(grows.group(1)) == pytest.approx(2 * 1024 * 0.120, rel=0.02)  # 2 GiB/s, 120 ms steps
    assert "more steps" in rec.evidence[2]
    assert any("loss.item()" in a for a in rec.actions)


def test_a_warmup_allocation_is_not_a_leak():
    assert rules.memory_growth(h200_run(mem_used_bytes=lambda t: 60 * GIB if t < 1.6 else 75 * GIB)) is None


def test_thermal_throttling_fires_high_with_the_clock_bound():
    run = h200_run(
        throttle_mask=lambda t: HW_THERMAL if int(t * 10) % 5 < 2 else 0,
        sm_clock_mhz=lambda t: 1_410 if int(t * 10) % 5 < 2 else 1_980,
    )
    rec = rules.throttling(run)
    assert rec.rule == "throttling" and rec.severity == "high"
    assert "hw_thermal_slowdown 4" in rec.evidence[0] and "1980 MHz at most" in rec.evidence[0]
    assert rec.speedup_estimate == pytest.approx(1980 / (0.6 * 1980 + 0.4 * 1410), rel=0.03)


def test_idle_reasons_and_rare_power_caps_are_not_throttling():
    assert rules.throttling(h200_run(throttle_mask=lambda t: GPU_IDLE)) is None
    assert (
        rules.throttling(h200_run(throttle_mask=lambda t: SW_POWER_CAP if int(t * 10) % 20 == 0 else 0))
        is None
    )


def test_a_recommendations_figures_are_its_evidence_as_numbers_in_report_json():
    """CI reads the figures, not the sentences: the same data share, step times and bound as numbers."""
    import json

    from autotune.advice.records import AdviceSection
    from autotune.report.build import build_report
    from autotune.report.jsonout import render_json

    rec = rules.input_bound(h200_run(data_ms=lambda rank, step: 30.0))
    f = rec.figures
    assert f["data_share"] == pytest.approx(0.25, rel=0.02)
    assert f["data_median_s"] == pytest.approx(0.030, rel=0.02)
    assert f["step_median_s"] == pytest.approx(0.120, rel=0.02)
    assert f["speedup_bound"] == rec.speedup_estimate
    data = json.loads(render_json(build_report(HEALTHY, AdviceSection((rec,), ()))))
    assert data["advice"]["recommendations"][0]["figures"]["data_share"] == pytest.approx(f["data_share"])
    util = rules.low_gpu_util(h200_run(util_pct=lambda t: 45 + 5 * math.sin(3 * t)))
    (gpu,) = util.figures["gpus"]
    assert gpu["index"] == 0 and gpu["p95_pct"] == pytest.approx(50.0, abs=0.5)


def test_comm_bound_keeps_the_jitter_between_equal_ranks():
    # every rank does the same work; rank 0's backward runs 10 ms (6% of the 160 ms step) above the
    # fastest rank's by the machine's jitter: 1.07x, no straggler, so none of it is taken out of the
    # 13% collective share (taking it out left 7%, under the 10% bar, and hid the communication)
    jitter = h200_run(
        world=2,
        step_ms=lambda rank, step: 160.0,
        backward_ms=lambda rank, step: 80.0 + (10.0 if rank == 0 else 0.0),
    )
    jitter = _with_gloo_window(jitter, 160.0, 21.0, calls=72)
    assert rules.straggler(jitter) is None
    assert {r.rank: r.wait_s for r in facts.rank_times(jitter)}[0] == pytest.approx(0.010)
    rec = rules.comm_bound(jitter)
    assert rec is not None and rec.figures["straggler_wait_share"] == 0.0
    assert rec.figures["net_share"] == pytest.approx(21 / 160)
    assert not any("waiting for slower ranks" in e for e in rec.evidence)


def test_a_window_the_profiler_slowed_says_by_how_much():
    # the run's steps take 120 ms; the profiled window's 3 steps took 480 ms each (4x, as torch.profiler
    # makes the short CPU ops of a small model on a busy CPU), 21% of it in collectives
    run = h200_run(world=2, step_ms=lambda rank, step: 120.0)
    rec = rules.comm_bound(_with_gloo_window(run, 480.0, 100.0))
    assert rec is not None and rec.figures["window_slowdown"] == pytest.approx(4.0)
    slowed_by = "100.0 ms of each 480.0 ms profiled step, 4.0x the unprofiled steps' 120.0 ms median"
    assert slowed_by in rec.evidence[0]
    # a window as fast as the other steps says nothing of it
    rec = rules.comm_bound(_with_gloo_window(run, 125.0, 30.0))
    assert rec is not None and rec.figures["window_slowdown"] == pytest.approx(125 / 120)
    assert rec.evidence[0].endswith("30.0 ms of each 125.0 ms profiled step")


def test_comm_bound_is_capped_by_the_phases_collectives_run_in():
    # the profiler slowed the window 6x and each rank waited there for the other's profiled work:
    # 90% of the window in collectives, while a 120 ms measured step spends 20 ms loading data and 7 ms
    # after the optimizer step: at most 93 ms (77.5%) of it can be collective time
    run = h200_run(
        world=2,
        step_ms=lambda rank, step: 120.0,
        data_ms=lambda rank, step: 20.0,
        backward_ms=lambda rank, step: 35.0,
    )
    run = _with_gloo_window(run, 720.0, 648.0)
    phases = {r.rank: r.phase_median_s for r in facts.rank_times(run)}[0]
    ceiling = sum(phases[p] for p in ("forward", "backward", "optimizer")) / 0.120
    rec = rules.comm_bound(run)
    assert rec is not None and rec.figures["net_share"] == pytest.approx(0.9)
    assert rec.figures["share_used"] == pytest.approx(ceiling) and ceiling == pytest.approx(0.775, abs=1e-6)
    assert rec.speedup_estimate == pytest.approx(1 / (1 - ceiling))  # not 10x
    assert rec.title == f"Communication-bound: up to {100 * ceiling:.1f}% of the step in collectives"
    assert any(e.startswith("an unprofiled step cannot hold more") for e in rec.evidence)


def test_host_bound_reads_the_kernels_against_the_unprofiled_steps():
    # the run's steps take 120 ms; the profiler doubled the window's (240 ms: its cost is on the host),
    # while the GPU's kernels took as long as ever
    run = h200_run(step_ms=lambda rank, step: 120.0)
    short = {"kernel_median_us": 6.2, "kernel_mean_us": 9.1, "wall_us": 3 * 240_000.0}

    def with_kernels_ms(busy_ms: float):
        window = healthy_window(kernel_busy_us=3 * busy_ms * 1e3, **short)
        return dataclasses.replace(run, summary={**run.summary, "profile_window": window})

    rec = rules.host_bound(with_kernels_ms(55.0))
    assert rec is not None and "22.9% of the profiled window (3 steps of 240.0 ms, 2.0x" in rec.evidence[0]
    assert rec.figures["busy_share_used"] == pytest.approx(55 / 120)
    assert rec.title == "Host-bound: the GPU is busy 45.8% of the step"
    assert rec.speedup_estimate == pytest.approx(120 / 55)  # not 240 / 55
    assert any("are 45.8% of the unprofiled steps' 120.0 ms median" in e for e in rec.evidence)
    # 70 ms of kernels: 29% of the slowed window, but 58% of a real step, over the 50% bar
    assert rules.host_bound(with_kernels_ms(70.0)) is None


def test_input_bound_without_a_profiled_window_does_not_claim_no_loader_ran():
    # seen: "no DataLoader ran in the profiled window" for an HF Trainer's tuning trial, which has no window
    run = h200_run(data_ms=lambda rank, step: 30.0)
    summary = {k: v for k, v in run.summary.items() if k != "profile_window"}
    rec = rules.input_bound(dataclasses.replace(run, summary=summary))
    assert "this run had no profiled window, so how its batches are loaded was not seen" in rec.evidence
    assert not any("no DataLoader ran" in line for line in rec.evidence)
    # a trial's profile ran without the window though its user never said --no-deep-profile: the
    # action does not ask to run "without" it, and names only options autotune profile has
    assert any("autotune profile" in a for a in rec.actions)
    assert not any("without --" in a for a in rec.actions), rec.actions
    from tests.autotune.report.test_trace_report import _profile_options

    named = {m for a in rec.actions for m in re.findall(r"(?<![\w-])--[a-z][a-z-]*", a)}
    assert named <= _profile_options(), named


def test_input_bound_suggests_workers_only_with_idle_cores():
    # seen: "raise num_workers" on a 2-core machine already at 100%
    run = h200_run(data_ms=lambda rank, step: 30.0)
    devices = [
        dataclasses.replace(d, info=dataclasses.replace(d.info, cpu_cores=2)) if d.kind == "host" else d
        for d in run.devices
    ]
    busy = [s._replace(cpu_util_pct=97.0) if s.kind == "host" else s for s in run.samples]
    rec = rules.input_bound(dataclasses.replace(run, devices=devices, samples=busy))
    assert "the CPU has 0.1 of its 2 cores idle on average" in rec.evidence[-2]
    assert not any("num_workers" in a for a in rec.actions) and any("cheaper" in a for a in rec.actions)
    idle = [s._replace(cpu_util_pct=40.0) if s.kind == "host" else s for s in run.samples]
    rec = rules.input_bound(dataclasses.replace(run, devices=devices, samples=idle))
    assert any("num_workers" in a for a in rec.actions)  # 1.2 cores idle: a worker has one to run on
