from profilers.runtime.timeline import (
    BWD_B,
    BWD_E,
    DATA_B,
    DATA_E,
    EVAL_B,
    EVAL_E,
    FWD_B,
    FWD_E,
    OPT_B,
    OPT_E,
    phase_durations,
)


def test_phases_of_a_plain_step_sum_to_its_duration():
    times = [
        (DATA_B, 100),
        (DATA_E, 130),
        (FWD_B, 140),
        (FWD_E, 200),
        (BWD_B, 210),
        (BWD_E, 330),
        (OPT_B, 340),
        (OPT_E, 380),
    ]
    out = phase_durations(times, 100, 380)
    # data = lead-in until the first forward (includes the DataLoader wait and the 10 ns after it)
    assert out == {"data": 40, "forward": 60, "backward": 120, "optimizer": 40, "eval": 0, "other": 20}
    assert sum(out.values()) == 280


def test_gradient_accumulation_sums_intervals_and_counts_later_data_waits():
    times = [
        (FWD_B, 10),
        (FWD_E, 20),
        (BWD_B, 20),
        (BWD_E, 40),
        (DATA_B, 40),
        (DATA_E, 55),  # second micro-batch fetched mid-step
        (FWD_B, 55),
        (FWD_E, 65),
        (BWD_B, 65),
        (BWD_E, 85),
        (OPT_B, 90),
        (OPT_E, 100),
    ]
    out = phase_durations(times, 0, 100)
    assert out == {"data": 10 + 15, "forward": 20, "backward": 40, "optimizer": 10, "eval": 0, "other": 5}


def test_trailing_time_after_backward_is_the_manual_update():
    times = [(FWD_B, 5), (FWD_E, 15), (BWD_B, 15), (BWD_E, 35)]
    out = phase_durations(times, 0, 50, trailing="optimizer")
    assert out == {"data": 5, "forward": 10, "backward": 20, "optimizer": 15, "eval": 0, "other": 0}
    assert phase_durations(times, 0, 50)["other"] == 15


def test_open_interval_runs_to_the_end_and_no_activity_is_all_data():
    assert phase_durations([(FWD_B, 10)], 0, 30) == {
        "data": 10,
        "forward": 20,
        "backward": 0,
        "optimizer": 0,
        "eval": 0,
        "other": 0,
    }
    assert phase_durations([], 0, 30) == {
        "data": 30,
        "forward": 0,
        "backward": 0,
        "optimizer": 0,
        "eval": 0,
        "other": 0,
    }


def test_out_of_range_times_are_clamped_and_never_negative():
    out = phase_durations([(FWD_B, -50), (FWD_E, 500)], 0, 100)
    assert out["forward"] == 100
    assert all(v >= 0 for v in out.values())
    assert sum(out.values()) == 100


def test_forward_and_backward_inside_an_optimizer_closure_are_forward_and_backward():
    # optimizer.step(closure): LBFGS and Lightning run the forward and backward inside the step
    times = [(OPT_B, 10), (FWD_B, 12), (FWD_E, 30), (BWD_B, 31), (BWD_E, 70), (OPT_E, 80)]
    out = phase_durations(times, 0, 80)
    assert out == {"data": 10, "forward": 18, "backward": 39, "optimizer": 2 + 1 + 10, "eval": 0, "other": 0}
    assert sum(out.values()) == 80


def test_evaluation_is_its_own_phase_and_does_not_end_the_data_lead_in():
    times = [
        (EVAL_B, 5),
        (EVAL_E, 45),
        (FWD_B, 50),
        (FWD_E, 60),
        (BWD_B, 60),
        (BWD_E, 80),
        (OPT_B, 80),
        (OPT_E, 90),
    ]
    out = phase_durations(times, 0, 100)
    assert out == {"data": 5 + 5, "forward": 10, "backward": 20, "optimizer": 10, "eval": 40, "other": 10}


def test_an_end_without_its_begin_and_a_phase_left_open_inside_another():
    # FWD_E with no FWD_B is ignored; a DATA_B left open inside the optimizer closes with it
    times = [(FWD_E, 5), (OPT_B, 10), (DATA_B, 20), (OPT_E, 30)]
    out = phase_durations(times, 0, 40)
    assert out == {"data": 10 + 10, "forward": 0, "backward": 0, "optimizer": 10, "eval": 0, "other": 10}


def test_the_evaluation_loops_own_work_between_its_phases_is_evaluation():
    # an evaluation loop: fetch (eval), forward (eval), its own bookkeeping, again; then training
    times = [
        (EVAL_B, 0), (EVAL_E, 10), (EVAL_B, 12), (EVAL_E, 20),  # fetch, 2 ns of loop, forward
        (EVAL_B, 25), (EVAL_E, 30),  # 5 ns of loop, next fetch
        (DATA_B, 40), (DATA_E, 45),  # 10 ns after the last evaluation: the lead-in, data
        (FWD_B, 45), (FWD_E, 55), (OPT_B, 55), (OPT_E, 60),
    ]  # fmt: skip
    out = phase_durations(times, 0, 60)
    assert out["eval"] == 10 + 2 + 8 + 5 + 5
    assert out["data"] == 10 + 5
    assert out["forward"] == 10 and out["optimizer"] == 5
    assert sum(out.values()) == 60
