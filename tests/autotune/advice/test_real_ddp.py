"""Communication-bound and straggler rules on real 2-rank gloo DDP runs under torchrun (CPU).

tests/scripts/advice_ddp.py: a 2048-wide MLP trained on 2 samples per rank is all gradient
all-reduce (communication-bound); a 256-wide one where rank 1 sleeps 20 ms before each forward makes
rank 1 a straggler that rank 0 waits for inside its backward pass.
"""

from pathlib import Path

import pytest

from autotune.advice import facts, rules
from autotune.advice.advise import advise
from autotune.advice.thresholds import limit
from profilers.contract.rundir import RunData, load_run
from tests.profile_run import profile_script

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "advice_ddp.py"
SLEEP_MS = 20.0


def torchrun(tmp: Path, *args: str) -> RunData:
    return load_run(profile_script(tmp / "run", SCRIPT, "--steps", "24", *args, ranks=2, cwd=tmp))


@pytest.fixture(scope="module")
def comm_run(tmp_path_factory: pytest.TempPathFactory) -> RunData:
    return torchrun(tmp_path_factory.mktemp("comm"), "--hidden", "2048", "--batch-size", "2")


@pytest.fixture(scope="module")
def straggler_run(tmp_path_factory: pytest.TempPathFactory) -> RunData:
    args = ["--hidden", "256", "--batch-size", "64", "--sleep-rank", "1", "--sleep-ms", str(SLEEP_MS)]
    return torchrun(tmp_path_factory.mktemp("straggler"), *args)


def test_a_wide_model_on_a_tiny_batch_is_communication_bound(comm_run):
    window = comm_run.summary["profile_window"]
    assert window["collective_source"] == "backend_ranges"  # gloo:all_reduce on gloo's worker thread
    assert window["collective_calls"] >= window["steps"]  # at least one gradient all-reduce per step
    rec = rules.comm_bound(comm_run)
    assert rec is not None
    share = window["collective_time_us"] / window["wall_us"]
    assert f"take {100 * share:.1f}% of the profiled window" in rec.evidence[0]
    # the rule's own bar (10%), not a tighter one: on 2 shared cores the share moves with the load
    # (0.14 to over 0.3 seen on this project's machine), and the rule firing is what is claimed
    assert share > limit("comm_bound.share") / 100
    # the 2048-wide MLP's 17.4 MB of gradients cross between the processes in every step: its
    # backward (where DDP waits for the all-reduce) is most of the step on both ranks
    for r in facts.rank_times(comm_run):
        assert r.phase_median_s["backward"] > 0.5 * r.step_median_s
    assert rules.straggler(comm_run) is None  # both ranks do the same work
    # the gradients fit DDP's one default bucket: bigger buckets are not the advice
    model = comm_run.summary["model"]
    assert model["class"] == "DistributedDataParallel" and model["ddp_bucket_cap_bytes"] == 25 * 2**20
    assert model["gradient_bytes"] == 4 * model["trainable_parameters"]  # fp32
    assert 16e6 < model["gradient_bytes"] < 19e6
    assert any("already fit one 25 MiB DDP bucket" in e for e in rec.evidence)
    assert not any("bucket_cap_mb" in a for a in rec.actions)


def test_a_sleeping_rank_is_named_as_the_straggler(straggler_run):
    rec = rules.straggler(straggler_run)
    assert rec is not None and rec.title.startswith("Straggler: rank 1 ")
    times = {r.rank: r for r in facts.rank_times(straggler_run)}
    # rank 1's own work exceeds rank 0's by about the injected sleep; rank 0 waits that long
    assert SLEEP_MS * 0.8 < 1e3 * (times[1].own_s - times[0].own_s) < SLEEP_MS * 1.8
    assert SLEEP_MS * 0.7 < 1e3 * times[0].wait_s < SLEEP_MS * 1.8
    assert "rank 1's data phase is " in rec.evidence[2]
    excess_ms = float(rec.evidence[2].split(" phase is ")[1].split(" ms")[0])
    assert SLEEP_MS <= excess_ms < SLEEP_MS * 1.5
    advice = advise(straggler_run)
    assert "straggler" in {r.rule for r in advice.recommendations}
    comm = next((r for r in advice.recommendations if r.rule == "comm_bound"), None)
    if comm is not None:  # what is left after the wait for rank 1 is taken out
        assert any("waiting for slower ranks" in e for e in comm.evidence)


def test_the_other_rank_is_the_jobs_cpu_not_another_processes(comm_run):
    """Rank 1 trains beside rank 0 on this host: the job's load takes both ranks' CPU out of the
    machine's, so rank 1 never reads as another process busy beside the run."""
    from profilers.contract.reader import read_ranks
    from profilers.contract.schema import STORE_NAME

    load = comm_run.summary["load"]
    ranks = read_ranks(comm_run.run_dir / STORE_NAME)
    owns = [ranks[r].own_cores for r in (0, 1)]
    assert owns[1] > 0.2  # rank 1 trained: counted as other processes, it would be load
    assert load["ranks"] == 2 and load["own_cores"] == pytest.approx(sum(owns), abs=2e-3)
    assert load["other_cores"] == pytest.approx(max(0.0, load["busy_cores"] - sum(owns)), abs=2e-3)
    # the outlier rule's per-reading figure takes rank 1 out the same way: over the measured steps
    # its mean is the summary's within a tenth of the machine (readings of two processes, not aligned)
    steps = [st for st in comm_run.steps if st.rank == 0 and st.kind == "measured"]
    start, end = min(st.start_ns for st in steps), max(st.start_ns + st.duration_ns for st in steps)
    readings = [c for t, c in facts.other_cores(comm_run) if start < t <= end]
    assert readings, "no host reading during the measured steps"
    mean = sum(readings) / len(readings)
    assert mean == pytest.approx(load["other_cores"], abs=0.1 * load["machine_cores"]), (mean, load)
