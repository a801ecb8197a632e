"""Decisions a user acts on, from real studies beside busy processes: no best and no "apply" that the
measurements do not carry, and ratios that carry the spread between processes."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from profilers.contract.spread import AnchorRun, search_ratio
from profilers.contract.summarize import t975
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


@pytest.mark.slow
def test_a_search_measured_short_of_cpu_says_so_in_every_view(tmp_path):
    """A busy loop pinned to each core, each in a session of its own (the kernel's autogroups share the
    CPU by session: a loop in the test's own session would leave a trial's session its core): the
    search's trial, pinned to its slot's one core by --parallel, gets about half of it, below 3/4 of
    what its thread could use, with no idle CPU. The terminal, summary.json and the report say how
    much of the search was measured so (the dashboard: tests/tui/test_study_lines.py)."""
    from profilers.contract.study import starved_line
    from profilers.contract.summaries import TuningSummary

    space = tmp_path / "space.toml"
    space.write_text('[space.batch_size]\ntype = "choice"\nchoices = [64]\narg = "--batch-size={value}"\n')
    run_dir = tmp_path / "study"
    cores = sorted(os.sched_getaffinity(0))
    # 3,000 steps of about 0.4-0.7 ms (quiet): a second or more of measured steps, 10 host readings
    # or more each (a share over fewer than 5 is not given)
    long = ["--trial-steps", "3000", "--stable-within", "0", "--warmup-steps", "2", "--trial-timeout", "240"]
    pinned_loop = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"
    loops = [
        subprocess.Popen([sys.executable, "-c", pinned_loop, str(c)], start_new_session=True) for c in cores
    ]
    try:
        out = _autotune(
            "tune", "--space", str(space), "--trials", "2", "--run-dir", str(run_dir), *long,
            "--parallel", str(len(cores)), "--confirm-rounds", "0", "--anchor-every", "0",
            str(SCRIPTS / "train_unmodified.py"),
        )  # fmt: skip
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    trial = summary["trials"][1]
    assert trial["load_cores"] == 1 and trial["starved_share"] > 0.5, trial  # pinned, half a core
    line = starved_line(TuningSummary.parse(summary, "summary.json").trials)
    assert line is not None and "trial" in line and "1" in line.split("(trial")[1].split(")")[0]
    assert f"Busy machine: {line}" in " ".join(out.stderr.split())
    assert _autotune("report", str(run_dir), "--format", "md").returncode == 0
    assert f"| busy machine | {line}" in (run_dir / "report.md").read_text()


def test_a_study_started_beside_busy_processes_fits_its_threads_to_the_free_cores(tmp_path, monkeypatch):
    """Threads beyond the cores other processes leave free collapse a step (two threads beside two
    busy loops on 2 cores: 497 and 52,000 samples/s from two processes of one configuration). As
    many busy loops as cores leave none free: one thread per process, and the note says why."""
    from autotune.tuner.trials import TrialSettings
    from autotune.tuner.tune import TuneConfig, Tuner

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
    from autotune.tuner.confirm import ConfirmRun

    store = tmp_path / "run.db"
    for index in (2, 3):
        run = ConfirmRun(index, index, "anchor", "ok", 100.0, None, 0.0, 1.0, f"trials/anchor-{index:02d}")
        confirm.store(store, run)
    anchors = Anchors(tmp_path, store, every=1, baseline_ranks=1)
    searched = SimpleNamespace(baseline=False, status="ok")
    trials = [SimpleNamespace(baseline=True, status="ok"), *[searched] * 4]
    assert anchors.claim(trials, 1) == 4
    assert anchors.claim(trials, 1) == 5  # 4 still running
    assert anchors.claim(trials, 0) is None  # a trial on fewer ranks than the baseline's: none
