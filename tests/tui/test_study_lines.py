"""The Trials screen's record says what the terminal and the report say of how a study's trials ran."""

from profilers.contract.study import placement_line, starved_line
from profilers.contract.summaries import TuningSummary
from tui.model import trials_info


def _study() -> TuningSummary:
    trials = [
        {"id": 0, "status": "ok", "baseline": True, "params": {}, "throughput": 500.0, "starved_share": 0.9,
         "executor": "local", "node": "n1", "devices": None},
        {"id": 1, "status": "ok", "params": {"b": 64}, "throughput": 900.0, "starved_share": 0.1,
         "executor": "local", "node": "n1", "devices": "cpu:0"},
        {"id": 2, "status": "ok", "params": {"b": 128}, "throughput": 950.0, "starved_share": 0.8,
         "executor": "local", "node": "n1", "devices": "cpu:1"},
    ]  # fmt: skip
    data = {"schema": 1, "kind": "tune", "trials": trials, "best": trials[2], "baseline": trials[0],
            "stopped": None, "parallel": 2, "executor": "local",
            "threads": {"threads_per_rank": 1, "device_kind": "cpu"}}  # fmt: skip
    return TuningSummary.parse(data, "summary.json")


def test_the_trials_screen_says_how_the_trials_ran_and_how_much_ran_short_of_cpu():
    study = _study()
    info = trials_info(study, study.trials)
    assert info.starved == starved_line(study.trials)
    assert info.starved is not None and info.starved.startswith(
        "2 of 3 trials ran short of CPU for most of their measured steps (trials 0, 2)"
    )
    assert info.placement == placement_line(study.trials, 2, "local", 1)
    assert info.placement is not None and "up to 2 at once" in info.placement
    # never measured again: the top trial is the search's highest, not a best to apply
    assert info.best_label == "highest in the search"
