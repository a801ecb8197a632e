"""The step state machine, driven event by event as the hooks would."""

from profilers.runtime.timeline import BWD_B, BWD_E, DATA_B, DATA_E, FWD_B, FWD_E, OPT_B, OPT_E
from profilers.runtime.tracker import UNKNOWN_MODE_MAX_BACKWARDS, StepTracker


class Collect:
    def __init__(self):
        self.steps = []

    def __call__(self, step):
        self.steps.append(step)
        return False


def iteration(t, samples=8, optimizers=1, micro=1, data=True, optimizer=True):
    if data:
        t.begin(DATA_B)
        t.end(DATA_E)
    for _ in range(micro):
        t.begin(FWD_B, samples, None)
        t.end(FWD_E)
        t.begin(BWD_B)
        t.end(BWD_E)
    if optimizer:
        for _ in range(optimizers):
            t.begin(OPT_B)
            t.end(OPT_E)


def test_optimizer_steps_end_steps_and_the_last_one_closes_at_finish():
    out = Collect()
    t = StepTracker(out)
    for _ in range(5):
        iteration(t)
    assert len(out.steps) == 4  # the 5th closes only when the next iteration (or the end) comes
    t.finish()
    assert [s.number for s in out.steps] == [1, 2, 3, 4, 5]
    assert {s.mode for s in out.steps} == {"optimizer"}
    for s in out.steps:
        assert s.end.code == OPT_E
        assert sum(1 for e in s.events if e.code == FWD_B) == 1
    # consecutive steps share their boundary
    assert all(a.end is b.start for a, b in zip(out.steps, out.steps[1:], strict=False))


def test_two_optimizers_in_one_iteration_make_one_step():
    out = Collect()
    t = StepTracker(out)
    for _ in range(3):
        iteration(t, optimizers=2)
    t.finish()
    assert len(out.steps) == 3


def test_gradient_accumulation_before_the_first_optimizer_step_is_one_step():
    out = Collect()
    t = StepTracker(out)
    for _ in range(4):
        iteration(t, micro=4)
    t.finish()
    assert len(out.steps) == 4
    assert all(sum(1 for e in s.events if e.code == BWD_E) == 4 for s in out.steps)


def test_manual_updates_fall_back_to_backward_passes():
    out = Collect()
    t = StepTracker(out)
    n = UNKNOWN_MODE_MAX_BACKWARDS + 9
    for _ in range(n):
        iteration(t, optimizer=False)
    t.finish()
    assert t.mode == "backward"
    assert len(out.steps) == n
    # split after the fact for the first ones, live after that
    assert not out.steps[0].live
    assert out.steps[-2].live
    # each step ends where the next iteration's data wait begins
    assert all(s.end.code == DATA_B for s in out.steps[:-1])
    assert out.steps[-1].end.code == BWD_E


def test_short_manual_script_is_split_at_the_end():
    out = Collect()
    t = StepTracker(out)
    for _ in range(5):
        iteration(t, optimizer=False, data=False)
    t.finish()
    assert len(out.steps) == 5
    assert all(s.mode == "backward" for s in out.steps)


def test_explicit_steps_take_over():
    out = Collect()
    t = StepTracker(out)
    for _ in range(3):
        iteration(t, micro=2)
        t.explicit_step()
    t.finish()
    assert len(out.steps) == 3
    assert t.mode == "explicit"


def test_partial_iteration_at_the_end_is_dropped():
    out = Collect()
    t = StepTracker(out)
    iteration(t)
    iteration(t)
    t.begin(FWD_B, 8, None)  # an evaluation forward after the last step
    t.end(FWD_E)
    t.finish()
    assert len(out.steps) == 2


def test_slow_callback_moves_the_next_start_after_it():
    seen = []

    def on_step(step):
        seen.append(step)
        return True

    t = StepTracker(on_step)
    iteration(t)
    iteration(t)
    iteration(t)
    t.finish()
    assert seen[1].start is not seen[0].end
    assert seen[1].start.t_ns >= seen[0].end.t_ns


def test_accumulation_over_more_micro_batches_than_the_manual_threshold_is_still_one_step():
    out = Collect()
    retracted = []
    t = StepTracker(out)
    t.on_retract = retracted.append
    micro = UNKNOWN_MODE_MAX_BACKWARDS + 4  # 20 backward passes before each optimizer step
    for _ in range(3):
        iteration(t, micro=micro)
    t.finish()
    assert t.mode == "optimizer"
    # the backward-pass steps closed before the first optimizer step were taken back once
    assert retracted == [micro - 1]
    final = [s for s in out.steps if s.mode == "optimizer"]
    assert [s.number for s in final] == [1, 2, 3]
    for s in final:
        assert sum(1 for e in s.events if e.code == BWD_E) == micro
        assert s.end.code == OPT_E
    assert final[0].start is out.steps[0].start  # step 1 starts where the run's first step did


def test_under_several_ranks_steps_close_at_the_optimizer_step_once_it_is_the_only_one():
    # A pipeline stage's next phase waits for the stage before it: a stop decided at that phase
    # comes after the other stage has gone, so a tracker of several ranks closes at OPT_E.
    out = Collect()
    t = StepTracker(out, eager_after=3)
    for n in range(1, 6):
        iteration(t)
        assert len(out.steps) == (n - 1 if n <= 3 else n)  # lazy for 3 steps, then at the step's end
    t.finish()
    assert [s.number for s in out.steps] == [1, 2, 3, 4, 5]
    assert all(s.end.code == OPT_E for s in out.steps)
    assert all(a.end is b.start for a, b in zip(out.steps, out.steps[1:], strict=False))


def test_two_optimizers_a_step_keep_the_tracker_of_several_ranks_lazy():
    out = Collect()
    t = StepTracker(out, eager_after=3)
    for _ in range(6):
        iteration(t, optimizers=2)
    assert len(out.steps) == 5  # still closed at the next iteration's first phase
    assert all(sum(e.code == OPT_B for e in s.events) == 2 for s in out.steps)
