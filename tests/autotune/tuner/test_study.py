"""Study: directions, metrics, infeasible and crashed trials, JSON Lines storage and resume."""

from __future__ import annotations

import json
import os

import pytest

from autotune.search import (
    BayesSearcher,
    Choice,
    GridSearcher,
    Infeasible,
    Int,
    JsonlStorage,
    Space,
    Study,
    Trial,
)
from autotune.search.structured import StructuredSearcher

LINE = Space(x=Int(1, 50))
SMALL = Space(batch=Int(8, 64, power_of_two=True), precision=Choice("fp32", "bf16"))  # 8 points


def slope(params):
    return float(params["x"])


def throughput(params):
    """Samples/s rising with batch and bf16; out of memory above batch 16 in fp32."""
    batch, precision = params["batch"], params["precision"]
    if precision == "fp32" and batch > 16:
        raise Infeasible(f"CUDA out of memory at batch {batch}", status="oom")
    return {"throughput": batch * (1.8 if precision == "bf16" else 1.0), "peak_memory_bytes": batch << 20}


@pytest.mark.parametrize(("direction", "best_x"), [("maximize", 50), ("minimize", 1)])
def test_directions(direction, best_x):
    study = Study(LINE, direction=direction, searcher="random", seed=0)
    study.optimize(slope, n_trials=50)
    assert len(study.trials) == 50  # all 50 values, none twice
    assert study.best.params == {"x": best_x} and study.best.value == best_x
    assert study.best.id == next(t.id for t in study.trials if t.params == {"x": best_x})


def test_structured_is_the_default_searcher_and_finds_the_slope_end():
    study = Study(LINE, seed=1)
    assert isinstance(study.searcher, StructuredSearcher)
    study.optimize(slope, n_trials=9)
    assert study.best.value >= 45


def test_bayes_finds_the_slope_end():
    study = Study(LINE, searcher="bayes", seed=1)
    assert isinstance(study.searcher, BayesSearcher)
    study.optimize(slope, n_trials=9)
    assert study.best.value >= 45


def test_metrics_dict_with_a_named_objective():
    study = Study(SMALL, searcher="grid", objective="throughput")
    study.optimize(throughput, n_trials=8)
    ok = [t for t in study.trials if t.ok]
    assert {t.status for t in study.trials} == {"ok", "oom"}
    assert all(t.metrics == {"throughput": t.value, "peak_memory_bytes": t.params["batch"] << 20} for t in ok)
    assert study.best.params == {"batch": 64, "precision": "bf16"}
    assert study.best.metrics["peak_memory_bytes"] == 64 << 20


def test_infeasible_trials_are_recorded_and_the_search_goes_on():
    study = Study(SMALL, searcher="random", objective="throughput")
    study.optimize(throughput, n_trials=8)
    oom = [t for t in study.trials if not t.ok]
    assert len(oom) == 2 and all(t.params["precision"] == "fp32" and t.params["batch"] > 16 for t in oom)
    assert all(t.status == "oom" and t.value is None and "out of memory" in t.error for t in oom)
    told = {SMALL.key(o.params): o.feasible for o in study.searcher.history}
    assert all(told[SMALL.key(t.params)] is False for t in oom)
    assert Infeasible("no").status == "infeasible"
    with pytest.raises(ValueError, match="status must be one of"):
        Infeasible("no", status="ok")


def test_crashes_and_bad_results_are_recorded_and_the_search_goes_on(caplog):
    def flaky(params):
        x = params["x"]
        if x == 10:
            raise RuntimeError(f"boom at {x}")
        if x == 14:
            return "fast"
        if x == 22:
            return float("nan")
        if x == 26:
            return {"loss": 1.0}
        if x == 27:
            return {"objective": 1.0, "note": "text"}
        return float(x)

    study = Study(LINE, searcher=GridSearcher(LINE, points_per_dim=50))  # every x once
    study.optimize(flaky, n_trials=50)
    by_x = {t.params["x"]: t for t in study.trials}
    assert by_x[10].status == "crashed" and by_x[10].error == "RuntimeError: boom at 10"
    assert (
        by_x[14].status == "crashed"
        and "must return a number or a dict of metrics, got str" in by_x[14].error
    )
    assert by_x[22].status == "diverged" and by_x[22].error == "the objective is nan"
    assert by_x[26].status == "crashed" and "have no 'objective'" in by_x[26].error
    assert all(t.duration_s >= 0 for t in study.trials)
    assert by_x[27].status == "crashed" and by_x[27].error == "metric 'note' must be a number, got str 'text'"
    assert study.best.value == 50 and sum(t.ok for t in study.trials) == 45
    assert "trial" in caplog.text and "crashed: RuntimeError: boom" in caplog.text


def test_best_without_an_ok_trial_says_why():
    def always_crash(params):
        raise ValueError("bad config file")

    study = Study(SMALL, searcher="random")
    with pytest.raises(ValueError, match="no trial finished ok \\(no trials yet\\)"):
        _ = study.best
    study.optimize(always_crash, n_trials=3)
    with pytest.raises(
        ValueError, match=r"no trial finished ok \(3 crashed\); first error: ValueError: bad config"
    ):
        _ = study.best


def test_exhausted_space_stops_early_and_callbacks_see_each_trial():
    seen = []
    searcher = BayesSearcher(SMALL, n_initial_points=2, n_candidates=100)
    study = Study(SMALL, searcher=searcher, objective="throughput")
    study.optimize(throughput, n_trials=20, callbacks=[lambda s, t: seen.append((len(s.trials), t.id))])
    assert len(study.trials) == 8 == SMALL.size
    assert seen == [(i + 1, i) for i in range(8)]


def test_interrupt_propagates_and_records_nothing():
    def interrupted(params):
        raise KeyboardInterrupt

    study = Study(LINE, searcher="random")
    with pytest.raises(KeyboardInterrupt):
        study.optimize(interrupted, n_trials=3)
    assert study.trials == []


def test_enqueued_baseline_runs_first_once(tmp_path):
    path = tmp_path / "study.jsonl"
    baseline = {"x": 7}
    study = Study(LINE, searcher="random", storage=path)
    study.enqueue(baseline)
    study.optimize(slope, n_trials=3)
    assert study.trials[0].params == baseline
    resumed = Study(LINE, searcher="random", storage=path)
    resumed.enqueue(baseline)  # already run: skipped
    resumed.optimize(slope, n_trials=5)
    assert [t.params for t in resumed.trials].count(baseline) == 1
    with pytest.raises(ValueError, match="missing"):
        study.enqueue({"y": 1})


# --------------------------------------------------------------------------- storage


def test_resume_continues_to_the_total_without_repeating(tmp_path, monkeypatch):
    path = tmp_path / "study.jsonl"
    syncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (syncs.append(fd), real_fsync(fd)))

    first = Study(LINE, seed=3, storage=path)
    first.optimize(slope, n_trials=5)
    assert len(syncs) == 1 + 2 * 5  # the study line, then every trial's claim and its end
    resumed = Study(LINE, seed=3, storage=path)
    assert resumed.trials == first.trials
    resumed.optimize(slope, n_trials=10)
    assert [t.id for t in resumed.trials] == list(range(10))
    assert len({t.params["x"] for t in resumed.trials}) == 10  # the first 5 not repeated

    # the same as a study that was never interrupted (the searcher is rebuilt by replay)
    straight = Study(LINE, seed=3)
    straight.optimize(slope, n_trials=10)
    assert [t.params for t in straight.trials] == [t.params for t in resumed.trials]

    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records[0]["record"] == "study" and records[0]["space"] == LINE.to_dict()
    claims = [r for r in records[1:] if r["record"] == "claim"]
    assert [(c["id"], c["params"]) for c in claims] == [(t.id, t.params) for t in resumed.trials]
    assert [Trial.from_dict(r) for r in records[1:] if r["record"] == "trial"] == resumed.trials


def test_truncated_last_line_is_ignored_with_a_warning(tmp_path):
    path = tmp_path / "study.jsonl"
    Study(LINE, searcher="random", storage=path).optimize(slope, n_trials=3)
    with path.open("ab") as f:  # kill -9 in the middle of writing trial 3
        f.write(b'{"record": "trial", "id": 3, "params": {"x": 1')
    with pytest.warns(UserWarning, match="ignoring a truncated last line"):
        resumed = Study(LINE, searcher="random", storage=path)
    assert len(resumed.trials) == 3
    resumed.optimize(slope, n_trials=5)
    records = [json.loads(line) for line in path.read_text().splitlines()]  # the partial line is gone
    trials = [r["id"] for r in records if r["record"] == "trial"]
    assert trials == [0, 1, 2, 3, 4] and len(records) == 1 + 2 * 5  # each trial claimed, then ended


def test_damaged_line_before_the_end_is_an_error(tmp_path):
    path = tmp_path / "study.jsonl"
    Study(LINE, searcher="random", storage=path).optimize(slope, n_trials=3)
    lines = path.read_text().splitlines()
    lines[2] = lines[2][:20]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="line 3 is damaged"):
        Study(LINE, searcher="random", storage=path)


def test_resume_refuses_another_study(tmp_path):
    path = tmp_path / "study.jsonl"
    Study(LINE, searcher="random", storage=path).optimize(slope, n_trials=2)
    with pytest.raises(ValueError, match="direction 'maximize', this one 'minimize'"):
        Study(LINE, direction="minimize", storage=path)
    with pytest.raises(ValueError, match="another space"):
        Study(Space(x=Int(1, 60)), storage=path)
    with pytest.raises(ValueError, match="objective"):
        Study(LINE, storage=path, objective="throughput")
    # delivery fields do not change the search: resuming with a new arg template is fine
    assert len(Study(Space(x=Int(1, 50, arg="--x={value}")), storage=path).trials) == 2


def test_storage_interface_is_pluggable():
    class MemoryStorage:
        def __init__(self):
            self.meta, self.trials = None, []

        def read(self):
            return self.meta, list(self.trials)

        def write_meta(self, meta):
            self.meta = dict(meta)

        def append(self, trial):
            self.trials.append(trial)

    store = MemoryStorage()
    Study(LINE, searcher="random", storage=store).optimize(slope, n_trials=4)
    assert store.meta["searcher"] == "random" and len(store.trials) == 4
    assert len(Study(LINE, searcher="random", storage=store).trials) == 4
    assert isinstance(JsonlStorage("x.jsonl").path, os.PathLike)
    with pytest.raises(ValueError, match="another space or direction"):
        Study(LINE, searcher=GridSearcher(SMALL))


def test_a_resumed_study_keeps_the_searcher_it_was_stored_with(tmp_path):
    path = tmp_path / "study.db"
    Study(LINE, searcher="bayes", seed=1, storage=path).optimize(slope, n_trials=3)
    resumed = Study(LINE, seed=1, storage=path)
    assert isinstance(resumed.searcher, BayesSearcher) and len(resumed.trials) == 3
    assert isinstance(Study(LINE, seed=1, storage=tmp_path / "new.db").searcher, StructuredSearcher)
