"""Study bookkeeping: baseline trials, skipped trials, Measured attrs, record() order, enqueue on resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.search import Infeasible, Int, Measured, Observation, Space, Study, Trial

LINE = Space(x=Int(1, 50))


def slope(params: dict) -> float:
    return float(params["x"])


def baseline(point: dict | None = None, status: str = "ok") -> Trial:
    value = 12.0 if status == "ok" else None
    return Trial(0, {}, status, value, {"objective": value}, 2.0, None, {"params_used": {"x": 12}}, point)


# --------------------------------------------------------------------------- baseline


def test_a_baseline_without_a_point_is_recorded_but_not_told() -> None:
    study = Study(LINE, searcher="random")
    study.record(baseline())
    assert study.trials == [baseline()]
    assert study.trials[0].baseline and study.trials[0].observation() is None
    assert study.searcher.history == ()
    assert study.next_id == 1 and study.n_run == 1
    assert study.best.id == 0
    study.optimize(slope, n_trials=3)
    assert [t.id for t in study.trials] == [0, 1, 2]
    assert all(t.params for t in study.trials[1:])
    history: tuple[Observation, ...] = study.searcher.history
    assert [o.params for o in history] == [t.params for t in study.trials[1:]]


def test_a_baseline_with_a_point_in_the_space_is_told_there() -> None:
    study = Study(LINE, searcher="random")
    study.record(baseline(point={"x": 12}))
    assert study.searcher.history == (Observation({"x": 12}, 12.0, True),)
    assert study.searcher.is_seen({"x": 12})
    assert study.trials[0].params == {}  # still a baseline: the point is only where it is placed


def test_a_failed_baseline_with_a_point_is_told_as_infeasible() -> None:
    study = Study(LINE, searcher="random")
    study.record(baseline(point={"x": 12}, status="oom"))
    assert study.searcher.history == (Observation({"x": 12}, None, False),)


# --------------------------------------------------------------------------- skipped trials


def test_skipped_trials_do_not_count_toward_n_trials() -> None:
    calls: list[dict] = []

    def skip_the_first_three(params: dict) -> float:
        calls.append(params)
        if len(calls) <= 3:
            raise Infeasible(f"predicted oom at {params['x']}", status="skipped", attrs={"world_size": 1})
        return float(params["x"])

    study = Study(LINE, searcher="random", seed=5)
    study.optimize(skip_the_first_three, n_trials=4)
    assert [t.status for t in study.trials] == ["skipped"] * 3 + ["ok"] * 4
    assert [t.id for t in study.trials] == list(range(7))
    assert study.n_run == 4
    skipped = study.trials[:3]
    assert all(t.value is None and t.error == f"predicted oom at {t.params['x']}" for t in skipped)
    assert all(t.attrs == {"world_size": 1} for t in skipped)
    # the searcher learns the skipped configurations as infeasible and does not propose them again
    assert len({t.params["x"] for t in study.trials}) == 7
    assert [o.feasible for o in study.searcher.history] == [False] * 3 + [True] * 4


def test_a_run_of_skips_stops_the_study() -> None:
    def always_skip(params: dict) -> float:
        raise Infeasible("predicted oom", status="skipped")

    study = Study(LINE, searcher="random")  # 50 configurations: the space would last 50 trials
    study.optimize(always_skip, n_trials=3)
    assert study.n_run == 0
    assert 3 <= len(study.trials) <= 11  # max(n_trials, 10) skips in a row, give or take one
    assert all(t.status == "skipped" for t in study.trials)


def test_skips_between_runs_do_not_stop_the_study() -> None:
    def skip_odd(params: dict) -> float:
        if params["x"] % 2:
            raise Infeasible("odd", status="skipped")
        return float(params["x"])

    study = Study(LINE, searcher="random", seed=2)
    study.optimize(skip_odd, n_trials=20)
    assert study.n_run == 20  # 20 of the 25 even x, however many odd ones were skipped between
    assert all((t.params["x"] % 2 == 0) == t.ok for t in study.trials)
    assert sum(t.status == "skipped" for t in study.trials) == len(study.trials) - 20


# --------------------------------------------------------------------------- results


def test_measured_results_keep_their_attrs() -> None:
    def objective(params: dict) -> Measured:
        x = params["x"]
        return Measured({"objective": 3.0 * x, "peak_memory_bytes": 100.0 * x}, {"run_dir": f"/t/{x}"})

    study = Study(LINE, searcher="random")
    study.optimize(objective, n_trials=3)
    for t in study.trials:
        x = t.params["x"]
        assert isinstance(x, int)
        assert t.ok and t.value == 3.0 * x
        assert t.metrics == {"objective": 3.0 * x, "peak_memory_bytes": 100.0 * x}
        assert t.attrs == {"run_dir": f"/t/{x}"}


def test_a_measured_result_without_the_objective_crashes_but_keeps_its_attrs() -> None:
    study = Study(LINE, searcher="random")
    study.optimize(lambda p: Measured({"loss": 1.0}, {"run_dir": "/t"}), n_trials=1)
    (t,) = study.trials
    assert t.status == "crashed" and "have no 'objective'" in (t.error or "")
    assert t.attrs == {"run_dir": "/t"}


def test_infeasible_attrs_are_kept() -> None:
    def oom(params: dict) -> float:
        raise Infeasible("CUDA out of memory", status="oom", attrs={"run_dir": "/t/0", "peak": 7})

    study = Study(LINE, searcher="random")
    study.optimize(oom, n_trials=1)
    (t,) = study.trials
    assert (t.status, t.error, t.attrs) == ("oom", "CUDA out of memory", {"run_dir": "/t/0", "peak": 7})


# --------------------------------------------------------------------------- record()


def test_record_refuses_an_out_of_order_id(tmp_path: Path) -> None:
    study = Study(LINE, searcher="random", storage=tmp_path / "run.db")
    with pytest.raises(ValueError, match="trial id 1 out of order: the next id is 0"):
        study.record(Trial(1, {"x": 3}, "ok", 3.0, {}, 0.1))
    assert study.trials == [] and study.searcher.history == ()
    assert study.storage is not None and study.storage.read()[1] == []  # nothing stored
    study.record(Trial(0, {"x": 3}, "ok", 3.0, {}, 0.1))
    with pytest.raises(ValueError, match="trial id 0 out of order: the next id is 1"):
        study.record(Trial(0, {"x": 4}, "ok", 4.0, {}, 0.1))
    assert [t.params for t in study.trials] == [{"x": 3}]
    assert len(study.storage.read()[1]) == 1


@pytest.mark.parametrize("name", ["study.jsonl", "run.db"])
def test_enqueued_params_already_run_are_not_rerun_after_resume(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    first = Study(LINE, searcher="random", storage=path)
    first.record(baseline())
    first.enqueue({"x": 7})
    first.optimize(slope, n_trials=3)
    assert first.trials[1].params == {"x": 7}

    resumed = Study(LINE, searcher="random", storage=path)
    resumed.enqueue({"x": 7})  # finished already: dropped
    resumed.enqueue({"x": 44})  # new: runs first
    resumed.optimize(slope, n_trials=6)
    params = [t.params for t in resumed.trials]
    assert params.count({"x": 7}) == 1 and params.count({"x": 44}) == 1
    assert resumed.trials[3].params == {"x": 44}
    assert [t.id for t in resumed.trials] == list(range(6))


def test_a_skip_for_an_impossible_split_is_told_impossible_and_a_predicted_oom_is_not() -> None:
    study = Study(LINE, searcher="random")
    study.record(Trial(0, {"x": 7}, "skipped", None, {}, 0.0, "7 does not divide 16", {"impossible": True}))
    study.record(Trial(1, {"x": 40}, "skipped", None, {}, 0.0, "predicted out of memory", {}))
    impossible, predicted = study.searcher.history
    assert (impossible.feasible, impossible.impossible) == (False, True)
    assert (predicted.feasible, predicted.impossible) == (False, False)
    assert study.n_run == 0
