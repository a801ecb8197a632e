"""Step budgets: the rules on lists of step times, then in real in-process training loops."""

import json
import math
import statistics
import time

import pytest
import torch
from torch import nn

import autotune
from profilers.contract.reader import read_steps
from profilers.runtime.options import ProfileOptions
from profilers.runtime.stopping import (
    AGREE_EVERY_STEPS,
    StepBudgetReached,
    StepBudgets,
    StepTimeStats,
    StopRules,
    decide,
)

MS = 1_000_000


def first_stop(budgets, times_ns, samples=None, first_step=1):
    """Feed measured step times; (step of the first stop, its reason) or (None, None)."""
    for i, t in enumerate(times_ns):
        budgets.observe(t, samples)
        reason, _ = budgets.step_end(first_step + i)
        if reason is not None:
            return first_step + i, reason
    return None, None


def reference_stable_n(times_ns, frac, min_n):
    """The first n at which the 95% half-width over the mean is <= frac, by the statistics module."""
    for n in range(max(2, min_n), len(times_ns) + 1):
        head = times_ns[:n]
        if 1.96 * statistics.stdev(head) / (statistics.fmean(head) * math.sqrt(n)) <= frac:
            return n
    return None


def test_running_statistics_match_the_statistics_module():
    times = [10 * MS, 12 * MS, 9 * MS, 11 * MS, 30 * MS, 10 * MS]
    stats = StepTimeStats()
    for t in times:
        stats.add(t)
    assert stats.mean_ns == pytest.approx(statistics.fmean(times))
    assert stats.std_ns == pytest.approx(statistics.stdev(times))
    assert stats.half_width_ns() == pytest.approx(1.96 * statistics.stdev(times) / math.sqrt(6))
    one = StepTimeStats()
    one.add(5)
    assert one.std_ns is None and one.relative_half_width() is None


def test_a_steady_run_is_stable_as_soon_as_the_minimum_is_measured():
    times = [10 * MS + (1 if i % 2 else -1) * MS // 100 for i in range(50)]  # +-1%
    budgets = StepBudgets(StopRules(stable_within=0.03, min_measured_steps=8))
    assert first_stop(budgets, times) == (8, "stable")


@pytest.mark.parametrize("frac", [0.1, 0.05, 0.04])
def test_a_noisy_run_stops_where_the_interval_first_gets_narrow_enough(frac):
    noise = [7, 13, 9, 11, 15, 5, 10, 12, 8, 10]  # a 25% coefficient of variation
    times = [noise[i % len(noise)] * MS + i for i in range(400)]
    expected = reference_stable_n(times, frac, 8)
    assert expected is not None and expected > 8
    budgets = StepBudgets(StopRules(stable_within=frac, min_measured_steps=8))
    assert first_stop(budgets, times) == (expected, "stable")


def test_max_steps_still_caps_a_run_that_never_gets_stable():
    times = [(5 if i % 2 else 15) * MS for i in range(100)]
    budgets = StepBudgets(StopRules(max_steps=30, stable_within=0.001))
    assert first_stop(budgets, times) == (30, "max_steps")


def test_below_threshold_fires_right_after_the_minimum_and_never_at_zero():
    times = [10 * MS] * 7 + [11 * MS] + [10 * MS] * 40  # 32 samples / 10 ms = 3200 samples/s
    absurd = StepBudgets(StopRules(stop_below_samples_per_s=1e9, min_measured_steps=8))
    assert first_stop(absurd, times, samples=32) == (8, "below_threshold")
    zero = StepBudgets(StopRules(stop_below_samples_per_s=0.0, min_measured_steps=8))
    assert first_stop(zero, times, samples=32) == (None, None)
    # optimistic: 32 samples over the lower end of the interval, a bit above 3200/s
    near = StepBudgets(StopRules(stop_below_samples_per_s=3200.0, min_measured_steps=8))
    assert first_stop(near, times, samples=32) == (None, None)
    above = StepBudgets(StopRules(stop_below_samples_per_s=3400.0, min_measured_steps=8))
    assert first_stop(above, times, samples=32) == (8, "below_threshold")


def test_below_threshold_is_inactive_without_samples_per_step():
    budgets = StepBudgets(StopRules(stop_below_samples_per_s=1e9, min_measured_steps=8))
    assert first_stop(budgets, [10 * MS] * 30, samples=None) == (None, None)


def test_a_non_finite_loss_stops_at_once_and_comes_first():
    budgets = StepBudgets(StopRules(max_steps=5, stable_within=0.5, stop_on_non_finite_loss=True))
    budgets.note_non_finite(5)
    assert budgets.step_end(5) == ("non_finite_loss", False)
    quiet = StepBudgets(StopRules(max_steps=5))
    quiet.note_non_finite(3)
    assert quiet.step_end(3) == (None, False)  # not asked for


def test_the_decision_over_several_ranks():
    rules = StopRules(stable_within=0.05, stop_below_samples_per_s=1000.0, stop_on_non_finite_loss=True)
    # [stable, optimistic samples/s, known, non-finite] summed over 2 ranks
    assert decide([2, 3000, 2, 0], 2, rules) == "stable"
    assert decide([1, 3000, 2, 0], 2, rules) is None  # one rank still noisy
    assert decide([1, 900, 2, 0], 2, rules) == "below_threshold"  # the job's sum is below
    assert decide([0, 900, 1, 0], 2, rules) is None  # one rank's figure is still unknown
    assert decide([2, 900, 2, 1], 2, rules) == "non_finite_loss"  # any rank


class FakeRanks:
    """The agreement of this rank with others whose views are fixed."""

    def __init__(self, others, fail=False):
        self.others = others
        self.fail = fail
        self.calls = []

    def __call__(self, values):
        self.calls.append(list(values))
        if self.fail:
            raise RuntimeError("injected timeout")
        return [v + sum(o[i] for o in self.others) for i, v in enumerate(values)]


def test_several_ranks_decide_only_at_agreed_steps_with_everyone():
    steady = [10 * MS] * 40
    other_stable = [1.0, 0.0, 0.0, 0.0]
    agree = FakeRanks([other_stable])
    budgets = StepBudgets(StopRules(stable_within=0.05, min_measured_steps=3), world_size=2, agree=agree)
    step, reason = first_stop(budgets, steady)
    assert (step, reason) == (AGREE_EVERY_STEPS, "stable")
    assert len(agree.calls) == 1
    rules = StopRules(stable_within=0.05, min_measured_steps=3)
    budgets = StepBudgets(rules, world_size=2, agree=FakeRanks([]))
    slow = [budgets.step_end(n)[1] for n in range(1, 9)]
    assert slow == [n % AGREE_EVERY_STEPS == 0 for n in range(1, 9)]  # only agreements wait
    noisy_other = FakeRanks([[0.0, 0.0, 0.0, 0.0]])
    budgets = StepBudgets(rules, world_size=2, agree=noisy_other)
    assert first_stop(budgets, steady) == (None, None)
    sick_other = FakeRanks([[0.0, 0.0, 0.0, 1.0]])
    budgets = StepBudgets(StopRules(stop_on_non_finite_loss=True), world_size=2, agree=sick_other)
    assert [budgets.step_end(n)[0] for n in range(1, 5)] == [None, None, None, "non_finite_loss"]


def test_a_failed_agreement_stands_the_early_rules_down_but_not_max_steps():
    faults = []
    budgets = StepBudgets(
        StopRules(max_steps=10, stable_within=0.5, min_measured_steps=2),
        world_size=2,
        agree=FakeRanks([], fail=True),
        on_fault=lambda part, exc: faults.append(part),
    )
    assert first_stop(budgets, [10 * MS] * 20) == (10, "max_steps")
    assert faults == ["step budgets (rank agreement)"]


def test_bad_budget_options_are_one_clear_error():
    for bad in ({"stable_within": 0}, {"stable_within": 1.5}, {"stop_below_samples_per_s": -1.0},
                {"stop_below_samples_per_s": math.nan}, {"min_measured_steps": 1}):  # fmt: skip
        with pytest.raises(ValueError, match=next(iter(bad))):
            ProfileOptions(**bad).validate()


# -- in real training loops --------------------------------------------------------------------------
FAST = {"quiet": True, "deep_profile": False, "count_flops": False, "warmup_steps": 3}


def train(steps, nan_at=None, log=None, wait_s=0.0):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(32, 32), torch.randint(0, 4, (32,))
    for i in range(1, steps + 1):
        time.sleep(wait_s)  # a data loader's wait
        loss = nn.functional.cross_entropy(model(x), y)
        if nan_at is not None and i >= nan_at:
            loss = loss * float("nan")
        opt.zero_grad()
        loss.backward()
        opt.step()
        if log is not None:
            log.append(i)


def profiled(tmp_path, steps, nan_at=None, wait_s=0.0, **options):
    done = []
    stopped = False
    try:
        with autotune.profile(run_dir=tmp_path / "run", **FAST, **options) as prof:
            train(steps, nan_at, done, wait_s)
    except StepBudgetReached:
        stopped = True
    return prof.summary, done, stopped


def test_a_nan_loss_stops_the_run_at_the_end_of_that_step(tmp_path):
    s, done, stopped = profiled(tmp_path, 40, nan_at=7, stop_on_non_finite_loss=True, max_steps=30)
    assert stopped
    assert done == list(range(1, 8))  # the loop finished step 7, then stopped
    assert s["stop_reason"] == "non_finite_loss"
    assert s["stopped_by_budget"] is True
    assert s["steps"] == 7
    assert s["loss"]["first_non_finite_step"] == 7
    assert s["loss"]["non_finite_steps"] == 1
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert on_disk["stop_reason"] == "non_finite_loss"


def test_without_the_flag_a_nan_loss_is_only_counted(tmp_path):
    s, done, stopped = profiled(tmp_path, 12, nan_at=7)
    assert not stopped and len(done) == 12
    assert s["stop_reason"] is None and s["stopped_by_budget"] is False
    assert s["loss"]["non_finite_steps"] == 6
    assert s["loss"]["first_non_finite_step"] == 7


def test_stable_within_stops_a_steady_loop_before_max_steps(tmp_path):
    # A step that waits 4 ms (a sleeper is woken on time beside busy processes) and computes ~0.5 ms.
    # One stall of 300 ms keeps the mean's interval wider than 30% for 1.96 * 300 / (0.3 * 4.5 n + 300)
    # > 1, i.e. until n = 370 steps (1.7 s); a stall among ~0.5 ms steps alone kept it open past
    # 1,000 steps, so the loop waits.
    s, done, stopped = profiled(tmp_path, 5000, wait_s=0.004, stable_within=0.3, max_steps=3000)
    assert stopped
    assert s["stop_reason"] == "stable"
    assert 3 + 8 <= s["steps"] < 3000
    assert s["measured_steps"] >= 8
    assert s["steps"] == len(done)


def test_stop_below_an_absurd_threshold_stops_right_after_the_minimum(tmp_path):
    # Room for a noisy machine: one 100x stall among 57 steps of ~0.5 ms keeps the lower end of the
    # mean's interval below 0 (mean/sd 0.21 < 1.96/sqrt(57)); over 400 steps it cannot (0.11 needed).
    # A quiet run stops after 5 measured steps either way.
    s, _, stopped = profiled(tmp_path, 400, stop_below_samples_per_s=1e12, min_measured_steps=5)
    assert stopped
    assert s["stop_reason"] == "below_threshold"
    # Right after the minimum of measured steps, unless the step times are so noisy that the lower
    # end of their interval is still <= 0 (an infinite optimistic throughput): worked out again
    # from the stored step times (host times on the CPU, the rule's own clock).
    times = [r.duration_ns for r in read_steps(tmp_path / "run" / "run.db") if r.kind == "measured"]
    n = next(
        n
        for n in range(5, len(times) + 1)
        if statistics.fmean(times[:n]) - 1.96 * statistics.stdev(times[:n]) / math.sqrt(n) > 0
    )
    assert s["measured_steps"] == n
    assert s["steps"] == 3 + n


def test_stop_below_zero_never_fires_and_max_steps_ends_the_run(tmp_path):
    s, _, stopped = profiled(tmp_path, 60, stop_below_samples_per_s=0.0, max_steps=20)
    assert stopped
    assert s["stop_reason"] == "max_steps"
    assert s["steps"] == 20


def test_a_script_that_ends_on_its_own_has_no_stop_reason(tmp_path):
    s, _, stopped = profiled(tmp_path, 15, stable_within=1e-4, stop_on_non_finite_loss=True, max_steps=50)
    assert not stopped
    assert s["steps"] == 15
    assert s["stop_reason"] is None


def test_gpu_losses_are_watched_through_the_records_the_recorder_built():
    from types import SimpleNamespace

    from profilers.contract.records import StepRecord
    from profilers.runtime.timeline import BWD_B, OPT_E, ClosedStep, Event

    on_gpu = SimpleNamespace(device=SimpleNamespace(type="cuda"))  # never read on this thread

    def closed(n):
        events = [Event(BWD_B, 1, loss=on_gpu)]
        return ClosedStep(n, Event(OPT_E, 0), Event(OPT_E, 10 * MS), events, "optimizer")

    def record(n, loss):
        return StepRecord(n, 0, 0, 10 * MS, 10 * MS, 0, 0, 0, 0, 32, None, "measured", loss)

    budgets = StepBudgets(StopRules(stop_on_non_finite_loss=True))
    records = [record(1, 2.0), record(2, 1.9)]
    assert budgets.at_step_end(closed(4), "measured", records) == (None, False)
    records += [record(3, math.nan)]  # step 3's value arrived two steps late
    assert budgets.at_step_end(closed(5), "measured", records) == ("non_finite_loss", False)
    assert budgets.first_non_finite_step == 3


def test_the_recorder_builds_queued_steps_at_once_when_asked():
    import time

    from profilers.contract.records import StepRecord
    from profilers.runtime.recorder import Recorder

    built = []

    def build():
        built.append(time.monotonic())
        return StepRecord(1, 0, 0, 1, 1, 0, 0, 0, 0, None, None, "warmup")

    recorder = Recorder(None, [], 0, lambda part, exc: None, flush_interval_s=60)
    recorder.start()
    try:
        recorder.prompt_steps = True
        queued = time.monotonic()
        recorder.add_step(build)
        deadline = queued + 5
        while not built and time.monotonic() < deadline:
            time.sleep(0.005)
        assert built and built[0] - queued < 1.0  # not at the flush, a minute later
        assert len(recorder.steps) == 1
    finally:
        recorder.stop()


def test_cuda_timed_steps_are_judged_by_their_gpu_times_not_the_hosts_enqueue_times():
    """The host queues each step in 1 ms while the GPU runs it in 10 ms +- 5 %: the stop rules see
    the 10 ms steps (from the records, as they resolve), so 32-sample steps give 3,200 samples/s,
    not 32,000, and a floor of 10,000 samples/s fires."""
    from types import SimpleNamespace

    from profilers.contract.records import StepRecord
    from profilers.runtime.timeline import FWD_E, OPT_E, ClosedStep, Event

    pending = SimpleNamespace()  # a CUDA event: this step is resolved later, on the recorder thread

    def closed(n):
        start, end = Event(OPT_E, (n - 1) * MS, pending), Event(OPT_E, n * MS, pending)
        return ClosedStep(n, start, end, [Event(FWD_E, n * MS - 1, pending, samples=32)], "optimizer")

    def record(n):
        gpu_ns = 10 * MS + (1 if n % 2 else -1) * MS // 2
        return StepRecord(n, 0, 0, gpu_ns, 0, 0, 0, 0, gpu_ns, 32, None, "measured")

    budgets = StepBudgets(StopRules(stop_below_samples_per_s=10_000.0, min_measured_steps=8))
    records: list[StepRecord] = []
    reason = None
    for n in range(1, 40):
        if n > 2:
            records.append(record(n - 2))  # resolved two steps late
        reason, _ = budgets.at_step_end(closed(n), "measured", records)
        if reason is not None:
            break
    assert reason == "below_threshold"
    assert n == 8 + 2  # the 8th GPU time arrives at step 10
    assert budgets.stats.n == 8
    assert budgets.stats.mean_ns == pytest.approx(10 * MS, rel=0.01)
    # the same steps timed on the host (no CUDA event) are observed at once, by the host's times
    host = StepBudgets(StopRules(stop_below_samples_per_s=10_000.0, min_measured_steps=8))
    for n in range(1, 12):
        step = closed(n)._replace(start=Event(OPT_E, (n - 1) * MS), end=Event(OPT_E, n * MS))
        assert host.at_step_end(step, "measured", [])[0] is None  # 1 ms steps: 32,000 samples/s
    assert host.stats.n == 11 and host.stats.mean_ns == pytest.approx(MS)
