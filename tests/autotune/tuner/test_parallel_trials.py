"""Trials at once: devices handed out without overlap, a batch of proposals kept apart, the study's
store the single truth (claims before a trial starts, ends recorded once)."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from autotune.search import Choice, Int, Space, Study
from autotune.search.searchers import BayesSearcher, GridSearcher
from autotune.tuner.devices import DevicePool


def test_gpus_go_to_one_trial_at_a_time_and_a_trial_waits_for_as_many_as_it_has_ranks():
    pool = DevicePool(4, gpus=[0, 1, 2])
    one, two = pool.acquire(1), pool.acquire(2)
    assert one.gpus == (0,) and two.gpus == (1, 2)
    assert two.env == {"CUDA_VISIBLE_DEVICES": "1,2"} and two.label == "cuda:1,2"
    got = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire(2)))
    waiter.start()
    time.sleep(0.2)
    assert not got  # one GPU is free, the trial needs two: it waits
    pool.release(one)
    time.sleep(0.2)
    assert not got
    pool.release(two)
    waiter.join(5)
    assert got and len(got[0].gpus) == 2
    pool.release(got[0])
    assert pool.acquire(8).gpus == (0, 1, 2)  # more ranks than GPUs: all of them, once all are free


def test_cpu_cores_are_cut_into_one_slot_per_trial():
    pool = DevicePool(2, cpus=[0, 1, 2, 3, 5])
    a, b = pool.acquire(1), pool.acquire(4)
    assert (a.cpus, b.cpus) == ((0, 1), (2, 3)) and a.env == {"AUTOTUNE_TRIAL_CPUS": "0,1"}
    pool.release(a)
    assert pool.acquire(1).cpus == (0, 1)
    assert DevicePool(3, cpus=[0, 1]).cpu_slots == [(0,), (1,), (0,)]  # more trials than cores: shared


def test_proposals_made_while_others_run_are_kept_apart_and_the_history_is_unchanged():
    space = Space(x=Int(1, 64), kind=Choice("a", "b"))
    searcher = BayesSearcher(space, seed=1, n_initial_points=3)
    for x, kind, value in ((2, "a", 1.0), (30, "b", 5.0), (60, "a", 2.0), (40, "b", 4.0)):
        searcher.tell({"x": x, "kind": kind}, value)
    first = searcher.ask()
    pending = [first]
    for _ in range(3):
        pending.append(searcher.ask_pending(pending))
    assert len({(p["x"], p["kind"]) for p in pending}) == 4  # four different points, not one four times
    assert len(searcher.history) == 4 and searcher.ask() == first  # the lies are gone
    grid = GridSearcher(Space(x=Int(1, 3)), seed=0)
    a = grid.ask()
    b = grid.ask_pending([a])
    assert a != b and grid.ask_pending([a, b]) not in (a, b)


def sleepy(params):
    time.sleep(0.3)
    return float(params["x"])


def test_a_parallel_study_overlaps_its_trials_and_finds_what_a_sequential_one_finds(tmp_path):
    space = Space(x=Choice(1, 2, 3, 4, 5, 6))
    spans = {}

    def timed(params):
        start = time.monotonic()
        value = sleepy(params)
        spans[params["x"]] = (start, time.monotonic())
        return value

    parallel = Study(space, searcher="grid", storage=tmp_path / "p.db")
    parallel.optimize(timed, n_trials=6, parallel=3)
    sequential = Study(space, searcher="grid")
    sequential.optimize(sleepy, n_trials=6)
    assert [t.id for t in parallel.trials] == list(range(6))
    assert parallel.best.params == sequential.best.params == {"x": 6}
    intervals = sorted(spans.values())
    overlaps = sum(1 for a, b in itertools.pairwise(intervals) if b[0] < a[1])
    assert overlaps >= 3  # 3 at a time: most trials start before the one before them ended
    # every trial was claimed with its configuration before it ran, and ended once
    claims = parallel.storage.claims()
    assert {i: c["params"] for i, c in claims.items()} == {t.id: t.params for t in parallel.trials}
    assert Study(space, searcher="grid", storage=tmp_path / "p.db").unfinished == {}


def test_claimed_trials_that_never_ended_run_again_under_their_ids_on_resume(tmp_path):
    space = Space(x=Int(1, 8))
    first = Study(space, searcher="grid", storage=tmp_path / "s.db")
    first.optimize(sleepy, n_trials=2)
    # a study killed with two trials in flight: claimed, never recorded
    first._claim(2, {"x": 7})
    first._claim(3, {"x": 8})
    resumed = Study(space, searcher="grid", storage=tmp_path / "s.db")
    assert sorted(resumed.unfinished) == [2, 3] and resumed.next_id == 4
    ran = []
    resumed.optimize(lambda p: ran.append(p["x"]) or float(p["x"]), n_trials=5, parallel=2)
    assert sorted(ran[:2]) == [7, 8]  # the claimed trials first, under their own ids
    assert resumed.trials[:2] == first.trials
    assert [(t.id, t.params["x"]) for t in resumed.trials[2:4]] == [(2, 7), (3, 8)]
    assert [t.id for t in resumed.trials] == [0, 1, 2, 3, 4] and len(ran) == 3


def test_an_error_in_a_callback_stops_the_running_trials_first():
    aborted = []
    release = threading.Event()

    def slow(params):
        release.wait(10)
        return 1.0

    def stop(study, trial):
        raise RuntimeError("the study stops")

    def fast_then_slow(params):
        return 1.0 if params["x"] == 1 else slow(params)

    study = Study(Space(x=Int(1, 4)), searcher="grid")
    study.searcher = GridSearcher(study.space, shuffle=False)
    with pytest.raises(RuntimeError, match="the study stops"):
        study.optimize(fast_then_slow, n_trials=4, parallel=2, callbacks=[stop],
                       on_abort=lambda: (aborted.append(True), release.set()))  # fmt: skip
    assert aborted == [True]
