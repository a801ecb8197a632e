"""The rules on real CPU runs made by the profiler here: a known cause injected, its figure measured.

Each script (tests/scripts/advice_*.py) injects one cause with a known size; the test checks the rule
fires and that its evidence carries figures consistent with what was injected, and the same loop
without the cause (or the plain tests/scripts/train_unmodified.py) is the negative. This machine is
shared: a busy neighbour can stall a process for ~100 ms, so bounds are one-sided where contention
can only push a figure one way.
"""

import re
from pathlib import Path

import pytest

from autotune.advice import facts, rules
from autotune.advice.advise import advise
from profilers.contract.rundir import RunData, load_run
from profilers.runtime.heap import live_bytes_reader
from tests.hogs import busy_loops
from tests.profile_run import profile_script

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def profile(tmp: Path, script: str, *args: str) -> RunData:
    """Run ``autotune profile`` on a test script and load its run directory."""
    return load_run(profile_script(tmp / "run", SCRIPTS / script, *args, timeout=180))


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> RunData:
    return profile(tmp_path_factory.mktemp("plain"), "train_unmodified.py", "--steps", "40")


ITEM_MS, BATCH = 1.0, 8


@pytest.fixture(scope="module")
def input_bound_run(tmp_path_factory: pytest.TempPathFactory) -> RunData:
    args = ["--steps", "30", "--batch-size", str(BATCH), "--item-sleep-ms", str(ITEM_MS)]
    return profile(tmp_path_factory.mktemp("input"), "advice_input_bound.py", *args)


@pytest.mark.slow
def test_input_bound_measures_the_injected_data_wait(input_bound_run):
    rec = rules.input_bound(input_bound_run)
    assert rec is not None
    d = facts.data_wait(input_bound_run)
    injected = BATCH * ITEM_MS / 1e3  # each batch sleeps at least this long in __getitem__
    assert injected <= d.data_median_s < injected * 1.6 + 0.004
    assert d.dataloader_iter == "_SingleProcessDataLoaderIter"
    wait_ms, _step_ms = map(
        float, re.search(r": ([\d.]+) ms of the ([\d.]+) ms median step", rec.evidence[0]).groups()
    )
    assert wait_ms == pytest.approx(d.data_median_s * 1e3, abs=0.05)
    assert f"{100 * d.data_share:.1f}% of the measured step time" in rec.evidence[0]
    # at least 8 ms of sleep per step; the rest (the MLP step, the loader's own Python) took 4.5-5.4 ms
    # quiet and 13.7 ms beside two busy processes on 2 cores (measured): with up to 3x that, the share
    # stays above 8 / (8 + 16.5) = 0.33 (quiet it is 0.62-0.69; 0.45 was seen under load)
    assert d.data_share > 0.3
    assert rec.speedup_estimate == pytest.approx(1 / (1 - d.data_share))
    assert "num_workers=0" in rec.evidence[1]
    idle = facts.idle_cores(input_bound_run)
    if idle is not None and idle[0] < 1.0:  # a busy machine: no core for a loader worker to run on
        assert f"{idle[0]:.1f} of its {idle[1]} cores idle" in rec.evidence[2]
        assert not any("num_workers" in a for a in rec.actions) and "cheaper" in rec.actions[0]
    else:
        assert "num_workers=N" in rec.actions[0]


@pytest.mark.slow
def test_the_plain_script_is_not_input_or_comm_bound(plain):
    advice = advise(plain)
    fired = {r.rule for r in advice.recommendations}
    checked = {t.rule for t in advice.rules_checked}
    assert {"input_bound", "comm_bound"} <= checked
    assert not fired & {"input_bound", "comm_bound", "memory_growth", "straggler"}
    # its batches are random tensors made on the training thread: a real, but tiny, data phase
    assert facts.data_wait(plain).data_median_s < 0.2e-3
    assert facts.window(plain).collective_share == 0.0


@pytest.fixture(scope="module")
def leak_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunData, RunData]:
    leak = profile(tmp_path_factory.mktemp("leak"), "advice_leak.py", "--steps", "40")
    # The flat loop runs longer: glibc's heap keeps growing for the first few dozen steps of any
    # loop of 1 MiB tensors (seen without the profiler too), then settles; a leak does not.
    flat = profile(tmp_path_factory.mktemp("flat"), "advice_leak.py", "--steps", "80", "--no-leak")
    return leak, flat


needs_glibc = pytest.mark.skipif(live_bytes_reader() is None, reason="this C library has no mallinfo2")


@pytest.mark.slow
@needs_glibc
def test_memory_growth_finds_the_kept_activations(leak_runs):
    leak, _ = leak_runs
    rec = rules.memory_growth(leak)
    assert rec is not None, facts.memory_trend(leak)
    t = facts.memory_trend(leak)
    assert t.source == "host resident memory (RSS)"
    # each step keeps the output's graph: at least two 2048×128 fp32 ReLU outputs (1 MiB each) and
    # the 2048×64 input; the heap around them cannot be given back either, so RSS grows a bit faster
    kept = 2 * 2048 * 128 * 4 + 2048 * 64 * 4
    assert 0.8 * kept < t.bytes_per_step < 2.5 * kept
    assert t.second_half_ratio > 0.5
    # the live C allocations at step ends grow by what is kept (the tensors and their graph's
    # nodes), so the leak is shown beyond RSS: HIGH, on that line
    heap = facts.heap_trend(leak)
    assert heap is not None and heap.source == facts.HEAP_SOURCE
    assert 0.8 * kept < heap.bytes_per_step < 1.5 * kept
    assert rec.severity == "high" and rec.evidence[0].startswith(facts.HEAP_SOURCE)
    assert "losses.append(loss)" in rec.actions[0]


@pytest.mark.slow
@needs_glibc
def test_a_loop_that_keeps_floats_does_not_leak(leak_runs):
    _, flat = leak_runs
    t = facts.memory_trend(flat)
    assert t is not None and t.samples >= 6
    assert rules.memory_growth(flat) is None
    # RSS alone is not bounded here: glibc's dynamic mmap threshold moves the freed 1 MiB tensors
    # into the heap, where the profiler's small allocations fragment it, so RSS climbs 0.09-0.72 MB
    # a step before it settles (0.04-0.06 MB with MALLOC_MMAP_THRESHOLD_ fixed; flat without the
    # profiler). It stays under the leak's (at least 0.8 x 2.5 MiB a step, the test above); what
    # tells the two apart is the live bytes.
    assert abs(t.bytes_per_step) < 0.8 * (2 * 2048 * 128 * 4 + 2048 * 64 * 4)
    heap = facts.heap_trend(flat)  # nothing is kept: the live bytes at step ends do not move
    assert heap is not None and abs(heap.bytes_per_step) < 4096


@pytest.mark.slow
@needs_glibc
def test_resident_memory_the_allocator_keeps_is_low_and_says_so(tmp_path):
    """tests/scripts/advice_heap.py: glibc told never to trim, four freed scratch buffers each 320 KiB
    larger a step grow RSS by ~1.25 MiB a step while no live allocation grows: the rule says the
    allocator keeps freed memory, LOW, and names the flat live line."""
    run = profile(tmp_path, "advice_heap.py", "--steps", "80")
    t, heap = facts.memory_trend(run), facts.heap_trend(run)
    assert t is not None and heap is not None
    assert t.bytes_per_step > 2**20  # 4 × 320 KiB of newly touched heap a step, less nothing
    assert abs(heap.bytes_per_step) < 2**20 / 100  # nothing is kept
    rec = rules.memory_growth(run)
    assert rec is not None and rec.severity == "low", rec
    assert rec.title.endswith("live allocations do not")
    assert any(e.startswith(facts.HEAP_SOURCE + " stays at") for e in rec.evidence)
    assert "jemalloc" in rec.actions[1]


SLOW = (15, 25, 35)


@pytest.mark.slow
def test_step_outliers_find_the_slow_steps(tmp_path):
    args = [
        "--steps",
        "40",
        "--step-ms",
        "5",
        "--slow-steps",
        ",".join(map(str, SLOW)),
        "--slow-factor",
        "10",
    ]
    run = profile(tmp_path, "advice_outliers.py", *args)
    rec = rules.step_outliers(run)
    assert rec is not None
    o = facts.step_outliers(run)
    assert set(SLOW) <= set(o.steps)
    slow = dict(zip(o.steps, o.durations_s, strict=True))
    assert all(slow[s] >= 0.050 for s in SLOW)  # each slept 10 × 5 ms
    assert o.excess_s >= 3 * 0.045 - 3 * o.median_s
    assert "15 (" in rec.evidence[0] and "25 (" in rec.evidence[0] and "35 (" in rec.evidence[0]


@pytest.mark.slow
def test_steady_steps_have_no_costly_outliers(tmp_path):
    # A neighbour's burst can stall this shared machine for ~100 ms, which is a real outlier; the loop
    # gets three tries to show a quiet run is left alone, or that what it sees is host contention.
    found = []
    for attempt in range(3):
        run = profile(tmp_path / str(attempt), "advice_outliers.py", "--steps", "40", "--step-ms", "5")
        rec = rules.step_outliers(run)
        if rec is None or (rec.severity == "low" and "host contention" in rec.title):
            return
        found.append(rec.evidence[1])
    pytest.fail(f"outliers in three quiet runs: {found}")


@pytest.mark.slow
def test_outliers_beside_busy_processes_are_host_contention_and_low(tmp_path):
    # two busy loops injected on a 2-core machine: the steady loop's slow steps are theirs
    with busy_loops(2):
        run = profile(tmp_path, "advice_outliers.py", "--steps", "60", "--step-ms", "5")
    o = facts.step_outliers(run)
    assert o is not None
    # what was injected: close to 2 cores busy besides the training, seen in the host readings (the
    # outlier figures have it only when some steps stood out: beside more load every step can be slow)
    loads = [cores for _, cores in facts.other_cores(run)]
    assert loads and sum(loads) / len(loads) >= 1.0
    if o.other_cores_rest is not None:
        assert o.other_cores_rest >= 1.0
    rec = rules.step_outliers(run)
    if rec is not None:  # the scheduler made some steps slow: said to be the machine's, never pressing
        assert rec.severity == "low" and "host contention" in rec.title, rec.title
