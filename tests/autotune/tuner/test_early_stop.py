"""Losers stopped early, on evidence: below the best's lower bound less the spread between processes."""

from __future__ import annotations

import json
import math

import pytest

from autotune.search.records import Trial
from autotune.tuner.early_stop import SHARE, SPREAD, best_result, reference_trials, stop_floor, stop_words
from autotune.tuner.objectives import Scoring
from autotune.tuner.trial_facts import TrialFacts
from profilers.contract.intervals import t975
from profilers.contract.study.spread import ProcessSpread
from tests.autotune.tuner.test_tune_cli import FAST, SCRIPTS, space_file, tune
from tests.hogs import busy_loops


def trial(trial_id: int, rate: float, low: float, world: int = 1, stop: str | None = None) -> Trial:
    facts = TrialFacts(world_size=world, throughput_ci95=(low, rate * 1.1), stop_reason=stop)
    metrics = {"samples_per_s": rate, "objective": rate}
    return Trial(
        trial_id, {} if trial_id == 0 else {"x": trial_id}, "ok", rate, metrics, 3.0, None, facts.to_attrs()
    )


def spread(log_sd: float | None, processes: int) -> ProcessSpread:
    return ProcessSpread(processes, 90.0, 110.0, log_sd, False)


def test_the_floor_is_the_best_lower_bound_less_twice_the_spread():
    trials = [trial(0, 100.0, 95.0), trial(1, 200.0, 190.0), trial(2, 150.0, 140.0)]
    floor = stop_floor(Scoring("throughput"), trials, 1, spread(0.05, 3), share=0.5)
    assert floor is not None and floor.rule == SPREAD and floor.best_id == 1
    # the trial's upper bound below the best's lower bound × e^(−√2·t·s), t at 2 degrees of freedom
    assert floor.samples_per_s == pytest.approx(190.0 * math.exp(-math.sqrt(2) * t975(2) * 0.05))
    # a wider spread, a lower floor: fewer trials stopped where the machine is noisier
    wide = stop_floor(Scoring("throughput"), trials, 1, spread(0.2, 3), share=0.5)
    assert wide is not None and wide.samples_per_s < floor.samples_per_s / 2


def test_until_the_spread_is_measured_the_floor_is_the_share_of_the_best():
    trials = [trial(0, 100.0, 95.0), trial(1, 200.0, 190.0)]
    for one_process in (spread(None, 1), None):
        floor = stop_floor(Scoring("throughput"), trials, 1, one_process, share=0.5)
        assert floor is not None and (floor.rule, floor.samples_per_s) == (SHARE, 100.0)
    assert stop_floor(Scoring("throughput"), trials, 1, spread(0.05, 3), share=0) is None  # --early-stop 0


def test_a_trial_stopped_early_is_never_the_reference_nor_a_result():
    stopped = trial(3, 500.0, 20.0, stop="below_threshold")  # few steps: a wide, partial interval
    trials = [trial(0, 100.0, 95.0), trial(1, 200.0, 190.0), stopped]
    assert [t.id for t in reference_trials(trials)] == [0, 1]
    assert best_result(trials).id == 1  # type: ignore[union-attr]  # its partial 500/s is no result
    floor = stop_floor(Scoring("throughput"), trials, 1, spread(0.05, 3), share=0.5)
    assert floor is not None and floor.best_id == 1


def test_the_cost_floor_is_at_the_same_cost_per_sample_and_energy_has_none():
    trials = [trial(0, 100.0, 95.0, world=1)]
    cost = stop_floor(Scoring("cost", 2.0), trials, 4, spread(0.05, 3), share=0.5, maximize=False)
    expected = 4 * 95.0 * math.exp(-math.sqrt(2) * t975(2) * 0.05)  # 4 devices at the best's cost
    assert cost is not None and cost.samples_per_s == pytest.approx(expected)
    assert stop_floor(Scoring("energy"), trials, 1, spread(0.05, 3), share=0.5) is None


def test_the_words_say_the_floor_and_what_it_stands_on():
    assert stop_words(123.4, SPREAD, 2, 5) == (
        "stopped early after 5 measured steps: its upper bound fell below 123 samples/s, trial 2's lower "
        "bound less the spread between processes; partial figures, never a result"
    )
    assert "the --early-stop share of trial 0's" in stop_words(50.0, SHARE, 0, 5)


EXTRA_SPACE = """
[space.extra]
type = "choice"
choices = [0, 1000]
arg = "--extra={value}"
"""


@pytest.mark.slow
def test_a_losing_trial_stops_before_its_budget_and_a_close_one_does_not(tmp_path):
    """The baseline (no extra work), a trial as fast (no extra work either, set through the option)
    and a loser (about 200 times slower), beside a busy process. The baseline's configuration runs
    again before each trial (--anchor-every 1); seed 0's grid runs the loser second, so its floor
    carries the spread of three processes (t = 4.3): the loser stops unless that spread is above
    0.87 (±140% between processes); no spread puts the floor above a trial as fast as the best.
    Whatever else runs may leave a trial short of CPU (status `busy`: left out of the comparison,
    at once with --calm-wait 0); its steps and why they stopped are kept, and judged here alike."""
    run_dir = tmp_path / "study"
    space = space_file(tmp_path, EXTRA_SPACE)
    script = str(SCRIPTS / "loop_extra_work.py")
    with busy_loops(1):
        out = tune(
            "--space", space, "--trials", "3", "--searcher", "grid", "--run-dir", str(run_dir),
            "--anchor-every", "1", *FAST, "--stable-within", "0", "--calm-wait", "0", script,
        )  # fmt: skip
    assert out.returncode in (0, 1), out.stderr[-3000:]  # 1: no best when every search trial was busy
    summary = json.loads((run_dir / "summary.json").read_text())
    by_extra = {t["params"].get("extra"): t for t in summary["trials"]}
    losing, close = by_extra[1000], by_extra[0]
    assert losing["status"] in ("ok", "busy") and losing["stop_reason"] == "below_threshold", losing
    assert losing["stop_rule"] == "spread" and summary["process_spread"]["processes"] >= 2
    reference = next(t for t in summary["trials"] if t["id"] == losing["stop_best_id"])
    assert losing["stop_floor_samples_per_s"] < reference["throughput_ci95"][0]

    def run_of(entry: dict) -> dict:  # the trial's own profile (a busy trial's figures live there only)
        return json.loads((run_dir / entry["run_dir"] / "summary.json").read_text())

    def measured_steps(entry: dict) -> int:
        return run_of(entry)["measured_steps"]

    # its estimate, under its own bound
    assert run_of(losing)["throughput"]["samples_per_s"] < losing["stop_floor_samples_per_s"]

    assert measured_steps(losing) == 5  # --min-measured-steps
    assert close["stop_reason"] == "max_steps", close  # its whole budget, as the baseline's
    assert measured_steps(close) == measured_steps(summary["trials"][0]) > 5
    if summary["best"] is not None:
        assert summary["best"]["id"] != losing["id"]
    if losing["status"] == "ok":  # a busy one is said as busy
        assert "stopped early after 5 measured steps: its upper bound fell below" in " ".join(
            out.stderr.split()
        )
