"""Loading run directories: real runs, killed runs, and every kind of broken directory."""

import json
import shutil

import pytest

from profilers.contract.rundir import RunDirError, load_run
from profilers.contract.summarize import step_statistics


def test_a_finished_profile_run_loads_with_its_store(profile_run):
    run = load_run(profile_run)
    summary = json.loads((profile_run / "summary.json").read_text())
    assert run.kind == "profile" and run.finished and run.notes == ()
    assert len(run.steps) == summary["steps"] == 400
    assert len(run.samples) == summary["host"]["samples"]
    assert [op.name for _, op in run.ops] == [op["name"] for op in summary["top_ops"]]
    assert run.devices[0].kind == "host"
    assert run.name == "train_unmodified"


def test_a_killed_run_is_rebuilt_from_its_store_without_losing_steps(profile_run, tmp_path):
    killed = tmp_path / "killed"
    shutil.copytree(profile_run, killed)
    (killed / "summary.json").unlink()
    run = load_run(killed)
    original = json.loads((profile_run / "summary.json").read_text())
    assert not run.finished
    assert "did not finish" in run.notes[0] and "400 steps" in run.notes[0]
    assert run.summary["steps"] == 400
    assert run.summary["stop_reason"] == "killed"
    # The same measured steps give the same statistics as the run's own summary.
    assert run.figures is not None and run.figures.step_time == step_statistics(run.steps).step_time
    assert run.summary["step_time_s"]["median"] == pytest.approx(original["step_time_s"]["median"], rel=1e-12)
    assert run.summary["host"]["samples"] == original["host"]["samples"]


@pytest.mark.slow  # the study_run fixture runs a real study
def test_a_study_loads_its_best_trials_profile(study_run):
    run = load_run(study_run)
    summary = json.loads((study_run / "summary.json").read_text())
    assert run.kind == "tune" and run.finished
    assert len(run.trials) == len(summary["trials"])
    assert run.profile is not None
    assert summary["best"]["run_dir"] == f"trials/trial-{summary['best']['id']:04d}"  # relative to the study
    assert run.profile.run_dir == study_run / summary["best"]["run_dir"]
    assert run.profile.steps, "the best trial's steps are loaded"
    assert run.name == "tune train_unmodified.py"


@pytest.mark.slow  # the study_run fixture runs a real study
def test_a_studys_trial_entries_are_typed_and_still_read_as_the_summarys(study_run):
    run = load_run(study_run)
    summary = json.loads((study_run / "summary.json").read_text())
    for entry, raw in zip(run.trials, summary["trials"], strict=True):
        assert dict(entry) == raw  # every key the tuner wrote, as written
        assert (entry.id, entry.status, entry.params) == (raw["id"], raw["status"], raw["params"])
        assert entry.get("speedup_vs_baseline") == raw.get("speedup_vs_baseline")
        assert entry.samples_per_s == raw["throughput"] and entry.ok == (raw["status"] == "ok")


@pytest.mark.slow  # the study_run fixture runs a real study
def test_a_study_whose_trial_runs_are_gone_still_loads(study_run, tmp_path):
    copy = tmp_path / "study"
    shutil.copytree(study_run, copy, ignore=shutil.ignore_patterns("trials"))
    summary = json.loads((copy / "summary.json").read_text())
    summary["best"]["run_dir"] = str(copy / "trials" / "trial-0001")
    (copy / "summary.json").write_text(json.dumps(summary))
    run = load_run(copy)
    assert run.profile is None
    assert "cannot be read" in run.notes[0] and "no such directory" in run.notes[0]


def _summary(directory, data):
    (directory / "summary.json").write_text(json.dumps({"schema": 1, **data}))
    return directory


BAD_RATE = {"kind": "tune", "trials": [{"id": 2, "status": "ok", "throughput": "fast"}]}
BAD_BEST = {"kind": "tune", "trials": [], "best": {"id": 1, "status": "ok", "params": 3}}


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda d: d / "absent", "no such directory"),
        (lambda d: (d / "file.txt").write_text("x") and d / "file.txt", "not a directory"),
        (lambda d: d, "not a run directory"),
        (lambda d: (d / "summary.json").write_text('{"schema": 1, "name": "x", "ste') and d, "half-written"),
        (lambda d: (d / "summary.json").write_text("[1, 2]") and d, "not a summary"),
        (lambda d: (d / "summary.json").write_text('{"name": "x"}') and d, "no schema version"),
        (
            lambda d: (d / "summary.json").write_text('{"schema": 99, "name": "x"}') and d,
            "newer gpu-autotune",
        ),
        (lambda d: (d / "summary.json").write_bytes(b"\xff\xfe\x00garbage") and d, "half-written"),
        (lambda d: (d / "run.db").write_bytes(b"not a database" * 100) and d, "corrupt or unreadable run"),
        (
            lambda d: (d / "summary.json").write_text('{"schema": 1, "kind": "tune", "trials": 3}') and d,
            "without its list of trials",
        ),
        (
            lambda d: (d / "summary.json").write_text('{"schema": 7, "kind": "tune", "trials": []}') and d,
            "newer gpu-autotune",
        ),
        # figures of the wrong type: refused where read, naming the entry and the field
        (lambda d: _summary(d, {"kind": "tune", "trials": [{"id": "x"}]}), "has no id (a whole number)"),
        (
            lambda d: _summary(d, {"kind": "tune", "trials": [{"id": 0, "status": "fine"}]}),
            "trial 0: unknown status 'fine'",
        ),
        (lambda d: _summary(d, BAD_RATE), "trial 2: 'throughput' must be a number or null"),
        (lambda d: _summary(d, BAD_BEST), "best, trial 1: 'params' must be an object"),
        (lambda d: _summary(d, {"name": "x", "steps": "12"}), "'steps' must be a number or null, not '12'"),
        (
            lambda d: _summary(d, {"name": "x", "phases": {"forward": "most"}}),
            "phases.forward must be a number",
        ),
        (
            lambda d: _summary(d, {"name": "x", "gpu": [{"name": "H100"}]}),
            "a GPU entry must be an object with its index",
        ),
        (
            lambda d: _summary(d, {"name": "x", "gpu": [{"index": 1, "util_pct": {"p95": "high"}}]}),
            "gpu[1].util_pct: 'p95' must be a number or null, not 'high'",
        ),
        (
            lambda d: _summary(d, {"name": "x", "gpu": [{"index": 0, "mem_used_envelope": {"peaks": 3}}]}),
            "gpu[0].mem_used_envelope: must be {readings, span_ns",
        ),
        (
            lambda d: _summary(d, {"name": "x", "host": {"rss_peak_bytes": [1]}}),
            "host: 'rss_peak_bytes' must be a number or null",
        ),
    ],
)
def test_a_broken_directory_is_one_clear_error(tmp_path, make, expected):
    target = make(tmp_path)
    with pytest.raises(RunDirError) as info:
        load_run(target)
    message = str(info.value)
    assert expected in message
    assert "\n" not in message


def test_an_empty_store_of_a_run_that_never_stepped_is_an_error(tmp_path):
    from profilers.runtime.store import RunStore

    RunStore(tmp_path / "run.db").close()
    with pytest.raises(RunDirError, match="recorded no steps yet"):
        load_run(tmp_path)
