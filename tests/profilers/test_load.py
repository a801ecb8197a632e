"""The machine's load over a run's measured steps (summary ``load``) and how two loads compare."""

from __future__ import annotations

import pytest

from profilers.contract.json_checks import record_json
from profilers.contract.load import (
    LoadFigures,
    RunLoad,
    compare_loads,
    is_loaded,
    load_band_cores,
    load_line,
    load_of,
)
from profilers.contract.records import DeviceSample, StepRecord
from profilers.contract.summarize import job_load, load_over, run_statistics

S = 1_000_000_000


def host(t_s: float, machine_pct: float, own_pct: float) -> DeviceSample:
    return DeviceSample(int(t_s * S), 0, "host", cpu_util_pct=machine_pct, process_cpu_pct=own_pct)


def step(n: int, start_s: float, kind: str = "measured") -> StepRecord:
    return StepRecord(n, 0, int(start_s * S), S, 0, 0, 0, 0, S, 1, None, kind)


def test_the_load_is_the_machines_cpu_less_the_runs_over_the_measured_steps_only():
    """4 cores. Warm-up at 3 cores busy of which 1 ours; measured steps (2 s to 5 s) at 75% busy,
    the run taking 1.2 cores: other processes 3.0 − 1.2 = 1.8 cores; readings outside are left out."""
    samples = [host(1.5, 75, 100)] + [host(t, 75, 120) for t in (2.5, 3.0, 4.0, 5.0)] + [host(6, 0, 0)]
    steps = [step(1, 1.0, "warmup"), *(step(n, n) for n in (2, 3, 4))]
    load = run_statistics(steps, samples, machine_cores=4).load_figures
    assert load == LoadFigures(machine_cores=4, busy_cores=3.0, own_cores=1.2, other_cores=1.8, samples=4)
    assert run_statistics(steps, samples).load_figures is None  # the machine's cores unknown


def test_a_span_shorter_than_one_reading_takes_the_next_reading():
    load = load_over([host(9.0, 50, 100), host(10.3, 100, 100)], (int(10.0 * S), int(10.1 * S)), 2)
    assert load is not None and load.other_cores == 1.0 and load.samples == 1
    assert load_over([host(13.0, 100, 100)], (int(10.0 * S), int(10.1 * S)), 2) is None  # too late


def test_the_other_ranks_on_the_same_host_are_the_jobs_cpu_not_load():
    """Rank 0 sees 2 of 2 cores busy and takes 0.9 itself; rank 1 takes 0.95: other processes 0.15.
    A rank whose CPU is unknown leaves the load unknown rather than counting it as another's."""
    rank0 = LoadFigures(machine_cores=2, busy_cores=2.0, own_cores=0.9, other_cores=1.1, samples=10)
    job = job_load(rank0, [0.9, 0.95])
    assert job is not None and job.own_cores == 1.85 and job.other_cores == 0.15 and job.ranks == 2
    unknown = job_load(rank0, [0.9, None])
    assert unknown is not None and unknown.other_cores is None
    assert load_of({"load": record_json(unknown)}) is None and unknown.known is None


def test_the_band_is_a_quarter_of_the_cores_and_never_under_half_a_core():
    assert load_band_cores(2) == 0.5 and load_band_cores(16) == 4.0 and load_band_cores(None) is None
    assert not is_loaded(RunLoad(0.5, 2)) and is_loaded(RunLoad(0.6, 2))
    line = load_line(RunLoad(1.62, 2))
    assert line is not None and line.startswith("other processes busy on 1.6 of 2 cores during the measured")
    assert "slower than this machine gives when quiet" in line
    assert "slower" not in (load_line(RunLoad(0.1, 2)) or "")


@pytest.mark.parametrize(
    ("a", "b", "b_slower", "explains"),
    [
        (0.1, 1.4, True, True),  # B slower, B under 1.3 cores more: the load can explain it
        (0.1, 1.4, False, False),  # B faster despite more load: the load does not explain it
        (0.1, 0.5, True, False),  # 0.4 cores apart: within the 0.5-core band
        (1.4, 0.1, False, True),  # A slower under more load
    ],
)
def test_the_load_explains_a_difference_only_when_the_slower_side_had_more(a, b, b_slower, explains):
    loads = compare_loads(RunLoad(a, 2), RunLoad(b, 2))
    assert loads.explains(b_slower) is explains


def test_loads_on_machines_of_different_sizes_are_not_compared():
    loads = compare_loads(RunLoad(0.1, 2), RunLoad(3.0, 16))
    assert loads.band_cores is None and not loads.differs and not loads.explains(True)


def test_a_killed_run_of_two_ranks_does_not_count_the_other_rank_as_load(tmp_path):
    """No summary.json: rebuilt from run.db, rank 0's readings alone cannot tell rank 1's CPU from
    another process's, so other_cores is unknown (rank 0's busy and own figures stay)."""

    from profilers.contract.records import DeviceInfo
    from profilers.contract.rundir import load_run
    from profilers.contract.schema import STORE_NAME
    from profilers.runtime.store import RunStore

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for rank in (0, 1):
        store = RunStore(run_dir / STORE_NAME, rank=rank)
        store.set_devices([DeviceInfo(0, "host", "cpu", cpu_cores=2)])
        steps = [StepRecord(n, rank, n * S, S, 0, 0, 0, 0, S, 1, None, "measured") for n in (1, 2, 3)]
        store.add_steps(steps)
        store.add_samples([host(t, 100, 95) for t in (1.5, 2.5, 3.5)])
        store.close()
    load = load_run(run_dir).summary["load"]
    assert load["busy_cores"] == 2.0 and load["own_cores"] == 0.95 and load["other_cores"] is None


def test_a_run_short_of_cpu_is_told_from_one_that_waits_or_shares_fairly():
    from profilers.contract.load import LoadProfile

    # 2 cores; readings of (others, own) in cores for a one-thread run
    profile = LoadProfile(
        2,
        (1.4, 1.3, 0.2, 1.0, 1.6),
        (0.6, 0.55, 0.9, 1.0, 0.3),
    )
    # 1st, 2nd: no idle CPU and 0.6/0.55 < 0.75 of its core: short; 3rd: an idle core (it waits);
    # 4th: full but it has its core; 5th: 1.9 busy is within the 0.25 jitter of 2 cores, 0.3 < 0.75
    assert profile.starved_share(1) == pytest.approx(3 / 5)
    assert profile.starved_share(0) == 0.0
    # two threads could use both cores: at 1.0 it has only half of what it could use
    assert LoadProfile(2, (1.0,), (1.0,)).starved_share(2) == 1.0
