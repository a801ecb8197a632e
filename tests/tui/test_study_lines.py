"""The Trials screen's record says what the terminal and the report say of how a study's trials ran."""

from profilers.contract.study.summary import TuningSummary
from profilers.contract.study.trials import placement_line, starved_line
from tui.model import trials_info


def _study() -> TuningSummary:
    trials = [
        {"id": 0, "status": "ok", "baseline": True, "params": {}, "throughput": 500.0, "starved_share": 0.9,
         "executor": "local", "node": "n1", "devices": None},
        {"id": 1, "status": "ok", "params": {"b": 64}, "throughput": 900.0, "starved_share": 0.1,
         "busy_before": 0.8, "executor": "local", "node": "n1", "devices": "cpu:0"},
        {"id": 2, "status": "busy", "params": {"b": 128}, "throughput": None, "starved_share": 0.8,
         "executor": "local", "node": "n1", "devices": "cpu:1"},
        {"id": 3, "status": "ok", "params": {"b": 256}, "throughput": 950.0, "starved_share": 0.2,
         "executor": "local", "node": "n1", "devices": "cpu:1"},
    ]  # fmt: skip
    data = {"schema": 1, "kind": "tune", "trials": trials, "best": trials[3], "baseline": trials[0],
            "stopped": None, "parallel": 2, "executor": "local",
            "anchors": [{"round": 1, "role": "anchor", "status": "busy"}],
            "threads": {"threads_per_rank": 1, "device_kind": "cpu"}}  # fmt: skip
    return TuningSummary.parse(data, "summary.json")


def test_the_trials_screen_says_how_the_trials_ran_and_how_much_ran_short_of_cpu():
    study = _study()
    info = trials_info(study, study.trials)
    assert info.starved == starved_line(study)
    assert info.starved == (
        "3 of 4 trials ran short of CPU for most of their measured steps (other processes held the cores "
        "their threads needed): trial 1 measured again once the machine was calmer; trial 2 left out, "
        "never compared (busy); trial 0 kept as measured (the baseline: the search's ratios are taken "
        "against it, so they read high); "
        "1 anchor left out, short of CPU (busy)"
    )
    assert info.placement == placement_line(study.trials, 2, "local", 1)
    assert info.placement is not None and "up to 2 at once" in info.placement
    # never measured again: the top trial is the search's highest, not a best to apply
    assert info.best_label == "highest in the search"


def test_every_trial_status_has_its_colour_on_the_dashboard() -> None:
    from profilers.contract.schema import TrialStatus
    from tui.draw import STATUS_STYLES

    assert set(TrialStatus) <= set(STATUS_STYLES)
    assert STATUS_STYLES["busy"] == STATUS_STYLES[TrialStatus.BUSY]  # a stored string finds its member's
