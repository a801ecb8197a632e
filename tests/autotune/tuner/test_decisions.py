"""Decisions a user acts on, from real studies beside busy processes: no best and no "apply" that the
measurements do not carry, and ratios that carry the spread between processes."""

import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profilers.contract.intervals import t975
from profilers.contract.study.spread import AnchorRun, search_ratio
from tests.hogs import busy_loops

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
FAST = ["--trial-steps", "14", "--warmup-steps", "2", "--min-measured-steps", "5", "--trial-timeout", "120"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _autotune(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args], capture_output=True, text=True, env=ENV, timeout=timeout
    )


@pytest.mark.slow
def test_a_knob_the_script_never_reads_gets_no_best_no_apply_and_a_ratio_across_processes(tmp_path):
    """The issue's case: a space parameter the script never reads. Trial 1 ran the baseline's own
    configuration, so the study names no best and advises to keep the settings, everywhere; before
    trial 1 the baseline ran again in trial 1's slot (anchor 1), and trial 1's ratio carries the
    spread between the baseline's two processes. Beside two busy processes."""
    space = tmp_path / "space.toml"
    space.write_text('[space.warp_drive]\ntype = "choice"\nchoices = [1, 2]\n')
    run_dir = tmp_path / "study"
    with busy_loops(2):
        out = _autotune(
            "tune", "--space", str(space), "--trials", "2", "--run-dir", str(run_dir), *FAST,
            str(SCRIPTS / "train_unmodified.py"),
        )  # fmt: skip
    assert out.returncode == 1, out.stderr[-3000:]  # stopped: the knob was never read
    assert "never read 'warp_drive'" in out.stderr
    assert "No best" in out.stderr and "Best (trial" not in out.stderr, out.stderr[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["best"] is None and summary["no_effect"] is True
    assert summary["verdict"]["status"] == "no_effect" and summary["verdict"]["action"] == "keep"
    # the anchor: the baseline's configuration again, in trial 1's slot, before it
    (anchor,) = summary["anchors"]
    trial1 = summary["trials"][1]
    assert anchor["role"] == "anchor" and anchor["best_id"] == 1 and anchor["status"] == "ok"
    assert anchor["ended_at"] <= trial1["started_at"]
    assert (run_dir / anchor["run_dir"] / "summary.json").is_file()  # a process of its own, profiled
    assert summary["process_spread"]["processes"] == 2
    # trial 1's ratio, computed again from what the summary stores
    base = summary["trials"][0]
    anchors = [
        AnchorRun(0, base["throughput"], tuple(base["throughput_ci95"]), base["started_at"],
                  base["ended_at"]),
        AnchorRun(1, anchor["samples_per_s"], tuple(anchor["samples_per_s_ci95"]), anchor["started_at"],
                  anchor["ended_at"]),
    ]  # fmt: skip
    when = (trial1["started_at"] + trial1["ended_at"]) / 2
    again = search_ratio(trial1["throughput"], trial1["throughput_ci95"], when, anchors)
    assert trial1["anchor"] == again.anchor == 1  # the anchor that ran just before it
    assert trial1["speedup_vs_baseline"] == pytest.approx(again.ratio)
    assert trial1["speedup_vs_baseline_ci95"] == pytest.approx(list(again.ci95))
    # its interval holds at least the spread between the baseline's two processes, on both sides (t, 1 df)
    low, high = trial1["speedup_vs_baseline_ci95"]
    half_log = math.log(high / low) / 2
    assert half_log >= t975(1) * math.sqrt(2) * summary["process_spread"]["log_sd"] * 0.999
    # the report says the same: no best configuration, keep the settings, nothing to apply
    assert _autotune("report", str(run_dir), "--format", "json").returncode == 0
    report = json.loads((run_dir / "report.json").read_text())
    recs = report["advice"]["recommendations"]
    assert not any(r["title"].startswith("Apply") for r in recs)
    (keep,) = [r for r in recs if r["rule"] == "apply_tuned"]
    assert keep["title"] == "Keep the current settings: nothing tuned had an effect" and keep["params"] == {}
    assert _autotune("report", str(run_dir), "--format", "md").returncode == 0
    assert "| best configuration | none: nothing the study tuned had an effect |" in (
        (run_dir / "report.md").read_text()
    )


#: 3,000 steps of about 0.4-0.7 ms (quiet): a second or more of measured steps, 10 host readings or
#: more each (a share over fewer than 5 is not given)
LONG = ["--trial-steps", "3000", "--stable-within", "0", "--warmup-steps", "2", "--trial-timeout", "240"]
#: A busy loop pinned to one core (argv[1]). Each runs in a session of its own: the kernel's autogroups
#: share the CPU by session, and a loop in the test's own session would leave a trial's session its core.
#: With argv[2] it waits for that file before it starts, with argv[3] it ends once that file exists.
PINNED_LOOP = """import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
start, end = (sys.argv[2:] + [None, None])[:2]
while start and not os.path.exists(start):
    time.sleep(0.02)
while not (end and os.path.exists(end)):
    pass
"""


def _pinned_loops(*files):
    return [
        subprocess.Popen(
            [sys.executable, "-c", PINNED_LOOP, str(c), *map(str, files)], start_new_session=True
        )
        for c in sorted(os.sched_getaffinity(0))
    ]


def _stop(loops):
    for loop in loops:
        loop.kill()
        loop.wait()


def _one_trial_space(tmp_path):
    space = tmp_path / "space.toml"
    space.write_text('[space.batch_size]\ntype = "choice"\nchoices = [64]\narg = "--batch-size={value}"\n')
    return space


def _one_trial_study(tmp_path, loops, *flags):
    """A study of the baseline and one trial in ``tmp_path / "study"``, the ``loops`` stopped after it:
    its output, summary.json and the trial's entry."""
    run_dir = tmp_path / "study"
    try:
        out = _autotune(
            "tune", "--space", str(_one_trial_space(tmp_path)), "--trials", "2", "--run-dir", str(run_dir),
            *LONG, "--confirm-rounds", "0", "--anchor-every", "0", *flags,
            str(SCRIPTS / "train_unmodified.py"),
        )  # fmt: skip
    finally:
        _stop(loops)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    return out, summary, summary["trials"][1]


@pytest.mark.slow
def test_a_trial_on_a_machine_that_stays_too_busy_is_left_out_never_compared_and_every_view_says_so(tmp_path):
    """A busy loop on each core for the whole study: the search's trial, pinned to its slot's one core by
    --parallel, gets about half of it (below 3/4 of what its thread could use, no idle CPU). The
    machine stays busy through --calm-wait, so the trial is "busy": no figure compared, no best, no
    "apply", and the terminal, summary.json and the report say how much of the search was left out
    (the dashboard: tests/tui/test_study_lines.py)."""
    from profilers.contract.study.summary import TuningSummary
    from profilers.contract.study.trials import starved_line

    run_dir = tmp_path / "study"
    loops = _pinned_loops()
    out, summary, trial = _one_trial_study(tmp_path, loops, "--parallel", str(len(loops)), "--calm-wait", "3")
    assert trial["status"] == "busy" and trial["load_cores"] == 1 and trial["starved_share"] > 0.5, trial
    assert trial["speedup_vs_baseline"] is None and trial["objective"] is None
    waited = re.search(r"the machine stayed busy (\d+) s", trial["error"])
    assert "too busy to measure" in trial["error"] and waited and int(waited[1]) >= 3, trial["error"]
    assert (run_dir / trial["run_dir"] / "summary.json").exists()  # its figures kept
    assert summary["best"]["id"] == 0 and summary["verdict"]["status"] == "too_busy"
    line = starved_line(TuningSummary.parse(summary, "summary.json"))
    assert line is not None and "trial 1 left out, never compared (busy)" in line, line
    assert f"Busy machine: {line}" in " ".join(out.stderr.split())
    assert _autotune("report", str(run_dir), "--format", "md").returncode == 0
    report = (run_dir / "report.md").read_text()
    assert f"| busy machine | {line}" in report
    advice = [line for line in report.splitlines() if "Apply the tuned" in line or "Measure again" in line]
    assert advice and "Measure again with the machine calmer" in advice[0], advice


@pytest.mark.slow
def test_a_trial_too_busy_to_measure_runs_again_once_the_machine_is_calmer_and_that_run_counts(tmp_path):
    """Busy loops on every core from the end of the baseline to the end of trial 1's first run: that run
    (one unpinned thread beside a loop on each core: about half a core) is too busy to measure. The
    loops gone, the machine is calm, the trial runs again, and its second run is its figure; the first
    is kept beside it."""
    from profilers.contract.study.summary import TuningSummary
    from profilers.contract.study.trials import starved_line

    run_dir = tmp_path / "study"
    trials = run_dir / "trials"
    loops = _pinned_loops(trials / "trial-0000" / "summary.json", trials / "trial-0001" / "summary.json")
    out, summary, trial = _one_trial_study(tmp_path, loops, "--calm-wait", "120")
    first = json.loads((trials / "trial-0001-busy" / "summary.json").read_text())
    assert trial["busy_before"] is not None and trial["busy_before"] > 0.5, trial
    assert first["throughput"]["samples_per_s"] != trial["throughput"]  # another run's figure
    line = starved_line(TuningSummary.parse(summary, "summary.json"))
    if trial["status"] == "busy":
        # another process of this shared machine took the CPU back during the second run: that run is
        # still the trial's, said so, and left out
        assert "when measured once more" in trial["error"] and "trial 1 left out" in (line or ""), trial
        return
    assert trial["status"] == "ok" and trial["starved_share"] <= 0.5, trial  # calm: loops gone
    assert trial["speedup_vs_baseline"] is not None
    assert line is not None and "trial 1 measured again once the machine was calmer" in line, line
    assert "measured again once calmer" in " ".join(out.stderr.split())


def test_a_study_started_beside_busy_processes_fits_its_threads_to_the_free_cores(tmp_path, monkeypatch):
    """Threads beyond the cores other processes leave free collapse a step (two threads beside two
    busy loops on 2 cores: 497 and 52,000 samples/s from two processes of one configuration). As
    many busy loops as cores leave none free: one thread per process, and the note says why."""
    from autotune.tuner.config import TuneConfig
    from autotune.tuner.trials import TrialSettings
    from autotune.tuner.tune import Tuner

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cores = len(os.sched_getaffinity(0))
    notes: list[str] = []
    settings = TrialSettings(str(SCRIPTS / "train_unmodified.py"))
    tuner = Tuner(TuneConfig(settings), tmp_path, on_note=notes.append)
    with busy_loops(cores):
        tuner._settle_threads()
    assert tuner.config.settings.threads_per_rank == 1
    assert "1 thread per process in every trial" in notes[0] and "other processes kept" in notes[0], notes


def test_an_anchor_index_is_never_one_stored_or_running(tmp_path):
    """Anchors 2 and 3 stored, anchor 1 lost with a killed study: the next is 4, then 5 while 4 runs
    (seen: a resumed study stored a second anchor 2 over the first's folder)."""
    from types import SimpleNamespace

    from autotune.tuner import confirm
    from autotune.tuner.anchors import Anchors
    from profilers.contract.study.summary import Confirmation

    store = tmp_path / "run.db"
    for index in (2, 3):
        run = Confirmation(index, index, "anchor", "ok", 100.0, None, 0.0, 1.0, f"trials/anchor-{index:02d}")
        confirm.store(store, run)
    anchors = Anchors(tmp_path, store, every=1, baseline_ranks=1)
    searched = SimpleNamespace(baseline=False, status="ok")
    trials = [SimpleNamespace(baseline=True, status="ok"), *[searched] * 4]
    assert anchors.claim(trials, 1) == 4
    assert anchors.claim(trials, 1) == 5  # 4 still running
    assert anchors.claim(trials, 0) is None  # a trial on fewer ranks than the baseline's: none


def test_a_probe_of_the_cpu_a_run_would_get_finds_a_core_shared_with_a_busy_loop():
    """A busy loop pinned to core 0 in a session of its own: a probe pinned there gets about half of it
    (0.49-0.53 measured here), below the 3/4 a run needs not to be short of CPU, whatever else runs;
    and waiting for calm on that core gives up after its time."""
    from autotune.tuner.host_load import cpu_share_now, wait_for_calm
    from profilers.contract.load import STARVED_FRACTION

    core = min(os.sched_getaffinity(0))
    loop = subprocess.Popen([sys.executable, "-c", PINNED_LOOP, str(core)], start_new_session=True)
    try:
        assert cpu_share_now([core], 1) < STARVED_FRACTION
        calm, share = wait_for_calm([core], 1, timeout_s=1.0, poll_s=0.1)
        assert not calm and share is not None and share < STARVED_FRACTION
        started = time.monotonic()  # a study that stops stops the wait: not 60 s
        calm, _ = wait_for_calm([core], 1, timeout_s=60.0, stop=lambda: True)
        assert not calm and time.monotonic() - started < 30
    finally:
        _stop([loop])
    assert cpu_share_now([10_000], 1) is None  # a probe that cannot run says so, and no traceback


@pytest.mark.slow
def test_a_trial_stopped_early_too_soon_for_host_readings_is_judged_by_its_whole_run(tmp_path):
    """A trial stopped early as below the best, its measured steps too few for 5 host readings (seen:
    nanoGPT's batch 4 stopped at 0.37x the best beside busy processes, and never marked), is judged by
    its whole run as one reading: one unpinned thread beside a busy loop pinned to each core, each in a
    session of its own, gets about half a core with no idle CPU: too busy to measure."""
    from autotune.tuner.trials import TrialSettings, run_trial

    # steps of about 25 ms (batch 2048): a preemption of a few ms moves their spread little, so the
    # throughput's interval closes at the 5th measured step (CV 0.09-0.18 seen beside the loops); at
    # batch 8 steps of 0.3 ms with one 9 ms preemption (CV 2.3) kept it open to the end of the budget
    settings = TrialSettings(
        str(SCRIPTS / "train_unmodified.py"), script_args=("--batch-size", "2048"), max_steps=14,
        warmup_steps=2, min_measured_steps=5, threads_per_rank=1, calm_wait_s=0, timeout_s=120,
    )  # fmt: skip
    loops = _pinned_loops()
    try:
        # below any best; a machine busier still can keep the throughput's interval open to the end
        # of the budget (a lower step-time bound at 0): then the trial did not stop early, and runs again
        for attempt in range(3):
            outcome = run_trial(settings, None, {}, tmp_path / f"trial{attempt}", stop_below=1e12)
            if outcome.status != "ok" or outcome.figures.stop_reason == "below_threshold":
                break
    finally:
        _stop(loops)
    assert outcome.status == "ok" and outcome.figures.stop_reason == "below_threshold", outcome.error
    readings = outcome.figures.raw["load"]["samples"]
    assert readings < 5, readings  # too few for the per-reading share
    assert outcome.starved_share == 1.0 and outcome.busy, (outcome.starved_share, outcome.other_load_cores)


@pytest.mark.slow
def test_the_study_objective_raises_busy_for_a_trial_the_machine_was_too_busy_to_measure(tmp_path):
    """autotune.Study's objective never hands the searcher a figure measured short of CPU: a trial beside
    a busy loop pinned to each core, each in a session of its own (one thread, about half a core, for
    more than half of its host readings), raises Infeasible("busy"); a stale first run kept aside by an
    earlier attempt of the trial is cleared first."""
    from autotune.search.records import Infeasible
    from autotune.search.space import Space
    from autotune.tuner.trials import TrialSettings, study_objective

    settings = TrialSettings(
        str(SCRIPTS / "train_unmodified.py"), max_steps=3000, warmup_steps=2, threads_per_rank=1,
        calm_wait_s=0, timeout_s=240, stable_within=None,
    )  # fmt: skip
    batch = {"type": "choice", "choices": [64], "arg": "--batch-size={value}"}
    space = Space.from_dict({"batch_size": batch})
    stale = tmp_path / "trial-0001-busy"  # the objective's first trial is trial-0001
    stale.mkdir()
    objective = study_objective(settings, space, tmp_path)
    loops = _pinned_loops()
    try:
        with pytest.raises(Infeasible) as raised:
            objective({"batch_size": 64})
    finally:
        _stop(loops)
    assert raised.value.status == "busy" and "too busy to measure" in raised.value.reason, raised.value.reason
    assert "--calm-wait 0" in raised.value.reason and not stale.exists()
