"""summary.json arithmetic, checked against values computed by hand."""

import dataclasses

import pytest

from profilers.contract.figures import RankEntry, Throughput
from profilers.contract.intervals import quantile
from profilers.contract.records import DeviceSample, StepRecord
from profilers.contract.summarize import (
    gpu_aggregates,
    job_throughput,
    select_measured,
    step_statistics,
)


def step(n, duration_ms, kind="measured", samples=32, tokens=None, phases=(1, 2, 4, 2, 1)):
    unit = duration_ms * 1_000_000 // sum(phases)
    parts = [p * unit for p in phases]
    parts[-1] += duration_ms * 1_000_000 - sum(parts)
    return StepRecord(
        n, 0, n * 10**9, duration_ms * 1_000_000, *parts, samples=samples, tokens=tokens, kind=kind
    )


def test_quantile_interpolates():
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert quantile([10.0], 0.9) == 10.0
    assert quantile([0.0, 10.0], 0.1) == pytest.approx(1.0)


def test_statistics_use_measured_steps_only():
    steps = [step(1, 500, "warmup"), step(2, 400, "flops"), step(3, 300, "trace")]
    steps += [step(4 + i, d) for i, d in enumerate([20, 30, 40, 50, 60])]
    out = step_statistics(steps)
    assert out.measured_steps == 5
    assert out.step_time.median_s == pytest.approx(0.040)
    assert out.step_time.p10_s == pytest.approx(0.024)
    assert out.step_time.p90_s == pytest.approx(0.056)
    # 5 steps x 32 samples over 0.2 s
    assert out.throughput.samples_per_s == pytest.approx(800.0)
    assert out.throughput.tokens_per_s is None
    assert out.phases["backward"] == pytest.approx(0.4, abs=1e-3)
    assert sum(out.phases.values()) == pytest.approx(1.0, abs=1e-9)


def test_phase_shares_come_from_the_steps_that_timed_their_phases():
    """A CUDA run times phases on the GPU in some steps only; the others' host split (here all
    data wait, as a GPU-bound loop's host would show) never enters the phase figures."""
    timed = [step(n, 40, phases=(1, 2, 4, 2, 1)) for n in range(1, 4)]
    host_split = [step(n, 40, phases=(9, 0, 0, 0, 1)) for n in range(4, 20)]
    untimed = [dataclasses.replace(s, phases_timed=False) for s in host_split]
    out = step_statistics(timed + untimed)
    assert out.measured_steps == 19  # every step's duration counts
    assert out.phases["data"] == pytest.approx(0.1, abs=1e-3)  # the timed steps' split alone
    assert out.phases["backward"] == pytest.approx(0.4, abs=1e-3)
    untimed_only = step_statistics(untimed)  # none timed (a CPU run's are all timed): their own split
    assert untimed_only.phases["data"] == pytest.approx(0.9, abs=1e-3)


def test_tokens_and_override():
    steps = [step(i, 50, tokens=32 * 128) for i in range(1, 5)]
    out = step_statistics(steps)
    assert out.throughput.tokens_per_s == pytest.approx(4 * 32 * 128 / 0.2)
    assert step_statistics(steps, samples_per_step=10).throughput.samples_per_s == pytest.approx(200.0)


def test_short_runs_fall_back_to_what_exists():
    only_warmup = [step(1, 10, "warmup"), step(2, 20, "warmup")]
    assert select_measured(only_warmup) == only_warmup
    assert step_statistics([]).step_time.median_s is None and step_statistics([]).measured_steps == 0


def test_gpu_aggregates_from_samples():
    rows = [
        DeviceSample(
            t_ns=i * 100_000_000,
            device_index=0,
            kind="gpu",
            gpu_util_pct=u,
            mem_used_bytes=m,
            mem_total_bytes=1000,
            power_mw=p,
            energy_mj=e,
            throttle_reasons=t,
        )
        for i, (u, m, p, e, t) in enumerate(
            [(10, 100, 100_000, 5_000, 0), (90, 300, 300_000, 25_000, 4), (50, 200, 200_000, 45_000, 0)]
        )
    ]
    rows.append(DeviceSample(t_ns=0, device_index=0, kind="host", rss_bytes=5))
    out = gpu_aggregates(rows, {0: "Test GPU"})
    g = out[0]
    assert g.name == "Test GPU"
    assert g.samples == 3
    assert g.util.mean == pytest.approx(50.0)
    assert g.util.p50 == 50.0
    assert g.mem_used_bytes_max == 300
    assert g.power_w_mean == pytest.approx(200.0)
    assert g.energy_j == pytest.approx(40.0)
    assert g.duration_s == pytest.approx(0.2)
    assert g.throttle_reasons == ("sw_power_cap",)  # NVML bit 0x4
    assert g.pcie_rx_kbps_mean is None
    assert gpu_aggregates([rows[-1]], {}) == ()


def test_the_job_throughput_sums_the_ranks_and_scales_rank_0s_interval():
    own = Throughput(100.0, None, (90.0, 110.0))
    entries = [RankEntry(rank=0, samples_per_s=100.0), RankEntry(rank=1, samples_per_s=90.0)]
    out = job_throughput(own, entries)
    assert out.samples_per_s == 190.0 and out.tokens_per_s is None
    assert out.samples_per_s_ci95 == pytest.approx((171.0, 209.0))  # rank 0's, × 190/100
    assert out.per_rank_samples_per_s == (100.0, 90.0) and out.ranks_per_replica == 1
    # two ranks of one tensor-parallel replica train on the same samples
    assert job_throughput(own, entries, ranks_per_replica=2).samples_per_s == 95.0
    # a rank without a figure leaves the job's unknown
    assert job_throughput(own, [*entries, RankEntry(rank=2)]).samples_per_s is None


def test_t975_and_the_intervals_match_known_values():
    from profilers.contract.intervals import mean_interval, rate_interval, ratio_interval, t975

    assert t975(1) == 12.706 and t975(4) == 2.776 and t975(30) == 2.042
    assert t975(60) == pytest.approx(2.000, abs=0.002) and t975(120) == pytest.approx(1.980, abs=0.002)
    # 2, 4, 6: mean 4, s = 2, half = 4.303 * 2 / sqrt(3)
    low, high = mean_interval([2.0, 4.0, 6.0])
    assert (low, high) == pytest.approx((4 - 4.303 * 2 / 3**0.5, 4 + 4.303 * 2 / 3**0.5))
    assert mean_interval([1.0]) is None
    # 10 samples per step over steps of 0.1, 0.1, 0.1 s: no spread, the interval is the rate itself
    assert rate_interval(100.0, [0.1, 0.1, 0.1]) == pytest.approx([100.0, 100.0])
    lo, hi = rate_interval(100.0, [0.09, 0.1, 0.11])
    assert lo < 100.0 < hi
    assert rate_interval(100.0, [0.01, 1.0]) == [
        pytest.approx(100 * 0.505 / (0.505 + 12.706 * 0.7 / 2**0.5 * 1.0), rel=1e-2),
        None,
    ]
    low, centre, high = ratio_interval([0.5, 2.0])
    assert centre == pytest.approx(1.0) and low * high == pytest.approx(1.0)
    with pytest.raises(ValueError):
        ratio_interval([1.2])


def test_gpu_rates_cover_the_measured_steps_and_peaks_the_whole_session():
    """Start-up (and torch.compile) at 60 W idle, then 300 W while the measured steps run: joules
    per sample must use the 300 W, as samples/s covers those steps only."""
    import dataclasses

    from profilers.contract.summarize import measured_span_ns

    def sample(t_s, power_w, energy_j, mem, temp):
        return DeviceSample(
            t_ns=int(t_s * 1e9),
            device_index=3,
            kind="gpu",
            gpu_util_pct=0.0 if power_w < 100 else 95.0,
            mem_used_bytes=mem,
            power_mw=power_w * 1000,
            energy_mj=energy_j * 1000,
            temperature_c=temp,
        )

    idle = [sample(t, 60, 60 * t, 9_000, 70) for t in range(0, 10)]  # 10 s of start-up
    busy = [sample(10 + t, 300, 600 + 300 * t, 5_000, 60) for t in range(0, 11)]  # 10 s training
    steps = [dataclasses.replace(step(i + 1, 1000), start_ns=int((10 + i) * 1e9)) for i in range(10)]
    span = measured_span_ns(steps)
    assert span == (int(10e9), int(20e9))
    (whole,) = gpu_aggregates(idle + busy, {})
    (measured,) = gpu_aggregates(idle + busy, {}, span_ns=span)
    assert whole.span == "session" and measured.span == "measured_steps"
    assert whole.power_w_mean == pytest.approx((10 * 60 + 11 * 300) / 21)
    assert measured.power_w_mean == pytest.approx(300.0)
    assert measured.energy_j / measured.duration_s == pytest.approx(300.0)
    assert measured.util.min == 95.0
    # peaks are the session's: the start-up's memory and temperature are real
    assert measured.mem_used_bytes_max == 9_000 and measured.temperature_c_max == 70
    # only the job's GPUs
    assert gpu_aggregates(idle + busy, {}, devices=[0, 1]) == ()
