"""The figures behind the rules, on constructed H200 runs whose answers are known by construction."""

import dataclasses
import statistics
from pathlib import Path

import pytest

from autotune.advice import facts
from profilers.contract.rundir import RunData
from tests.autotune.advice.gpu_runs import GIB, HW_THERMAL, SW_POWER_CAP, h200_run, healthy_window


def test_data_wait_is_rank0s_measured_data_phase():
    run = h200_run(data_ms=lambda rank, step: 30.0)
    d = facts.data_wait(run)
    assert d.measured_steps == 32
    assert d.data_median_s == pytest.approx(0.030, abs=1e-6)
    measured = [s for s in run.steps if s.kind == "measured"]
    assert d.data_share == pytest.approx(
        sum(s.data_ns for s in measured) / sum(s.duration_ns for s in measured)
    )
    assert d.dataloader_iter == "_MultiProcessingDataLoaderIter"


def test_data_wait_falls_back_to_summary_phases_without_steps():
    run = h200_run(data_ms=lambda rank, step: 30.0)
    bare = dataclasses.replace(run, steps=())
    d = facts.data_wait(bare)
    assert d.data_share == pytest.approx(run.summary["phases"]["data"])
    assert d.step_median_s == pytest.approx(run.summary["step_time_s"]["median"])


def test_gpu_utilization_quantiles_use_only_the_measured_steps():
    # 0% during warm-up and the traced steps (first ~0.96 s), 90% after
    run = h200_run(util_pct=lambda t: 0.0 if t < 0.97 else 90.0)
    (u,) = facts.gpu_utilization(run)
    assert u.index == 0 and u.name == "NVIDIA H200"
    assert u.p5_pct == u.p95_pct == 90.0
    assert u.samples == pytest.approx(38, abs=2)  # 3.84 s of measured steps at 10 Hz


def test_job_gpus_leave_out_gpus_of_the_node_the_job_did_not_use():
    run = h200_run()
    assert facts.job_gpus(run) == [0]
    summary = dict(run.summary, device=dict(run.summary["device"], index=3))
    assert facts.job_gpus(dataclasses.replace(run, summary=summary)) == [3]
    assert facts.job_gpus(h200_run(world=4)) == [0, 1, 2, 3]
    assert facts.job_gpus(dataclasses.replace(run, summary=dict(run.summary, device={"kind": "cpu"}))) == []


def test_outliers_use_median_and_mad_so_slow_steps_cannot_hide_themselves():
    slow = {12, 19, 26, 33}
    run = h200_run(step_ms=lambda rank, step: 800.0 if step in slow else 120.0 * (1 + 0.01 * (step % 5)))
    o = facts.step_outliers(run)
    durations = [s.duration_ns / 1e9 for s in run.steps if s.kind == "measured"]
    assert o.median_s == pytest.approx(statistics.median(durations))
    assert set(o.steps) == slow
    assert o.excess_s == pytest.approx(sum(0.8 - o.median_s for _ in slow))
    # mean + 3 standard deviations: the four slow steps inflate the bar above themselves
    naive = statistics.fmean(durations) + 3 * statistics.pstdev(durations)
    assert not [d for d in durations if d > naive]
    assert o.threshold_s < 0.135  # 3σ above a median of 122 ms


def test_outliers_need_enough_measured_steps():
    assert facts.step_outliers(h200_run(steps=15)) is None  # 7 measured steps


def test_memory_trend_tells_a_leak_from_a_warmup_allocation():
    leak = facts.memory_trend(h200_run(mem_used_bytes=lambda t: 60 * GIB + t * 2 * GIB))
    assert leak.source == "GPU 0 memory in use (NVML)"
    assert leak.second_half_ratio == pytest.approx(1.0, abs=0.05)
    # 2 GiB/s at 120 ms per step is 0.24 GiB per step
    assert leak.bytes_per_step == pytest.approx(0.24 * GIB, rel=0.03)
    assert leak.growth_pct == pytest.approx(100 * leak.growth_bytes / leak.start_bytes)
    warm = facts.memory_trend(h200_run(mem_used_bytes=lambda t: 60 * GIB if t < 1.6 else 70 * GIB))
    assert warm.growth_pct > 5  # the line rises...
    assert warm.second_half_ratio < 0.2  # ...but the second half is flat


def test_throttling_shares_count_only_power_and_thermal_reasons():
    run = h200_run(throttle_mask=lambda t: (HW_THERMAL | SW_POWER_CAP) if int(t * 10) % 4 == 0 else 1)
    (t,) = facts.throttling(run)
    assert t.share == pytest.approx(0.25, abs=0.05)
    assert set(t.reasons) == {"hw_thermal_slowdown", "sw_power_cap"}  # gpu_idle (bit 1) is not one
    assert t.sm_clock_max_mhz == 1980


def test_window_shares_and_missing_window():
    w = facts.window(h200_run(window=healthy_window(collective_time_us=3 * 30_250.0)))
    assert w.step_us == pytest.approx(121_000.0)
    assert w.gpu_busy_share == pytest.approx(113_700 / 121_000)
    assert w.collective_share == pytest.approx(0.25)
    assert w.kernels_per_step == 1400
    assert facts.window(dataclasses.replace(h200_run(), summary={"profile_window": None})) is None


def test_rank_times_take_the_allreduce_wait_out_of_the_fast_ranks():
    # rank 1 loads data 40 ms longer; the others wait for it in their backward pass
    run = h200_run(
        world=2,
        step_ms=lambda rank, step: 160.0,
        data_ms=lambda rank, step: 41.5 if rank == 1 else 1.5,
        backward_ms=lambda rank, step: 60.0 if rank == 1 else 100.0,
    )
    times = {r.rank: r for r in facts.rank_times(run)}
    assert times[1].wait_s == 0.0 and times[1].own_s == pytest.approx(0.160)
    assert times[0].wait_s == pytest.approx(0.040, abs=1e-6)
    assert times[0].own_s == pytest.approx(0.120, abs=1e-6)


def test_nothing_raises_on_an_empty_run(tmp_path):
    empty = RunData(run_dir=tmp_path, kind="profile", summary={})
    assert facts.data_wait(empty) is None
    assert facts.gpu_utilization(empty) == ()
    assert facts.device_memory(empty) == ()
    assert facts.step_outliers(empty) is None
    assert facts.memory_trend(empty) is None
    assert facts.throttling(empty) == ()
    assert facts.window(empty) is None
    assert facts.rank_times(empty) == ()


def _two_rank_cpu_run(rss_growth_per_step: dict[int, int]) -> RunData:
    """A 2-rank CPU run of 40 measured 50 ms steps; each rank's RSS sampled at 10 Hz into run.db."""
    from profilers.contract.records import DeviceSample, StepRecord

    t0, step_ns = 1_800_000_000 * 10**9, 50_000_000
    steps = tuple(
        StepRecord(
            n, rank, t0 + (n - 1) * step_ns, step_ns, 0, step_ns // 2, step_ns // 2, 0, 0, 8, None, "measured"
        )
        for rank in (0, 1)
        for n in range(1, 41)
    )
    samples, ranks = [], []
    for i in range(20):  # 2 s at 10 Hz
        t = t0 + i * 100_000_000
        for rank in (0, 1):
            rss = 500 * 2**20 + rss_growth_per_step[rank] * (2 * i)  # two steps per reading
            samples.append(DeviceSample(t, 0, "host", rss_bytes=rss, host_mem_total_bytes=24 * 2**30))
            ranks.append(rank)
    summary = {"schema": 1, "device": {"kind": "cpu", "name": "cpu", "count": 2}}
    return RunData(
        Path("/nonexistent"),
        "profile",
        summary,
        steps=steps,
        samples=tuple(samples),
        sample_ranks=tuple(ranks),
    )


def test_memory_trend_of_a_multi_rank_cpu_run_is_rank_0s():
    leak_on_1 = facts.memory_trend(_two_rank_cpu_run({0: 0, 1: 4 * 2**20}))
    assert leak_on_1 is not None and leak_on_1.bytes_per_step == pytest.approx(0, abs=1)
    leak_on_0 = facts.memory_trend(_two_rank_cpu_run({0: 4 * 2**20, 1: 0}))
    assert leak_on_0 is not None and leak_on_0.bytes_per_step == pytest.approx(4 * 2**20, rel=0.05)
