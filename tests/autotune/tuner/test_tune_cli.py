"""``autotune tune`` end to end: real trials of real scripts in subprocesses, the run store, resume."""

import itertools
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profilers.contract.fields import documented_keys, meaning_of
from profilers.contract.schema import resolve_trial_dir
from profilers.contract.study.summary import TuningSummary

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
UNMODIFIED = str(SCRIPTS / "train_unmodified.py")
#: Short trials, no re-measurement, and no plan prior (its fake-tensor traces cost ~9 s of CPU a study
#: here; tests/autotune/tuner/test_plan_memory.py tests the studies it orders).
FAST = ["--trial-steps", "12", "--warmup-steps", "2", "--min-measured-steps", "5", "--trial-timeout", "120",
        "--confirm-rounds", "0", "--no-plan-prior"]  # fmt: skip
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def tune(*args: str, timeout: float = 300, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autotune", "tune", *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=timeout,
        cwd=cwd,
    )


def space_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "space.toml"
    path.write_text(text)
    return str(path)


BATCH_SPACE = """
[space.batch_size]
type = "int"
low = 8
high = 128
power_of_two = true
arg = "--batch-size={value}"
"""


FAR_SPACE = """
[space.batch_size]
type = "choice"
choices = [8, 12, 128]
arg = "--batch-size={value}"
"""


def stored_trials(run_dir: Path) -> list[dict]:
    with sqlite3.connect(run_dir / "run.db") as conn:
        rows = conn.execute("SELECT record FROM trials ORDER BY id").fetchall()
    return [json.loads(r[0]) for r in rows]


def check_bill(summary: dict, terminal: str, run_dir: Path) -> None:
    """The study's bill: every process's wall time on its devices at $3, a confirmed saving paying it
    back at 8 h a day; the same sentence on the terminal and in the report (the dashboard's: tests/tui)."""
    bill = summary["bill"]
    runs = summary["trials"] + summary["anchors"] + summary["confirmations"]
    seconds = sum(r["duration_s"] for r in runs)  # one rank each
    assert bill["processes"] == 4 + 1 + 10 and bill["processes_without_time"] == 0
    assert bill["device_hours"] == pytest.approx(seconds / 3600)
    assert bill["usd"] == pytest.approx(3 * seconds / 3600) and bill["price_source"] == "--price-per-gpu-hour"
    assert sum(t["cost_usd"] for t in summary["trials"]) == pytest.approx(3 * bill["trials_device_hours"])
    share = 1 - 1 / summary["verdict"]["speedup"]  # one device each: the re-measured speedup's saving
    assert bill["saving_share"] == pytest.approx(share) and share > 0.5
    assert bill["saving_usd_per_day"] == pytest.approx(share * 8 * 3)
    assert bill["payback_training_hours"] == pytest.approx(bill["device_hours"] / share)
    assert bill["payback_days"] == pytest.approx(bill["payback_training_hours"] / 8)
    assert bill["pays_back_in_month"] is True  # a minute of CPU against a 2× speed-up
    from autotune.report.markdown import md_text

    sentence = TuningSummary.parse(summary, "summary.json").bill.sentence()
    assert f"Cost: {sentence}" in " ".join(terminal.split())
    for fmt in ("md", "json"):
        report = subprocess.run(
            [sys.executable, "-m", "autotune", "report", str(run_dir), "--format", fmt, "--output", "-"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert report.returncode == 0, report.stderr
        if fmt == "json":  # priced again at the same price and usage: the same figures
            assert json.loads(report.stdout)["overview"]["bill"] == pytest.approx(bill)
        else:
            parsed = TuningSummary.parse(summary, "summary.json").bill
            assert md_text(parsed.cost_words()) in report.stdout
            assert md_text(parsed.payback_words()) in report.stdout


@pytest.mark.slow
def test_unmodified_script_tuned_through_its_arguments_beats_its_baseline(tmp_path):
    run_dir = tmp_path / "study"
    space = space_file(tmp_path, BATCH_SPACE)
    out = tune(
        "--space", space, "--trials", "4", "--searcher", "grid", "--run-dir", str(run_dir), *FAST,
        "--confirm-rounds", "5", "--price-per-gpu-hour", "3", "--usage-hours-per-day", "8",
        UNMODIFIED,  # 5 rounds: t(4); 3 (t(2) = 4.3) held 1 beside two busy loops
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    trials = summary["trials"]
    check_bill(summary, out.stderr, run_dir)
    assert [t["id"] for t in trials] == [0, 1, 2, 3]
    assert trials[0]["baseline"] and trials[0]["params"] == {}
    assert all(t["status"] == "ok" for t in trials), [t["error"] for t in trials]
    # the argument reached the script: the profiler counted that many samples in each step
    for t in trials[1:]:
        assert t["run_dir"] == f"trials/trial-{t['id']:04d}"  # relative to the study
        step = json.loads((resolve_trial_dir(run_dir, t["run_dir"]) / "summary.json").read_text())
        per_step = step["throughput"]["samples_per_s"] * step["step_time_s"]["mean"]
        assert per_step == pytest.approx(t["params"]["batch_size"], rel=0.05)
    best = summary["best"]
    assert best["params"]["batch_size"] >= 32
    # against the anchor nearest in time: the baseline trial (0) or a re-run of its configuration
    anchors = [summary["baseline"]["throughput"]] + [a["samples_per_s"] for a in summary["anchors"]]
    assert len(anchors) == 2 and summary["process_spread"]["processes"] == 2  # anchor 1 before trial 1
    assert best["speedup_vs_baseline"] == pytest.approx(best["throughput"] / anchors[best["anchor"]])
    assert best["speedup_vs_baseline"] > 2  # batch 8 is far too small for this model on a CPU
    # measured again, interleaved with the baseline, 5 rounds: a real speedup holds
    assert best["speedup_confirmation_rounds"] == 5 and len(summary["confirmations"]) == 10
    assert best["confirmed"] is True and best["speedup_ci95"][0] > 1
    assert all(t["throughput_ci95"][0] <= t["throughput"] for t in trials)
    assert len(stored_trials(run_dir)) == 4
    # one verdict: the re-measured figure, in summary.json and on the terminal alike
    verdict = summary["verdict"]
    assert verdict["status"] == "confirmed" and verdict["recommend"] is True
    assert verdict["speedup"] == best["speedup_geomean"]
    assert verdict["search_speedup"] == best["speedup_vs_baseline"]
    assert "Best (trial" in out.stderr and f"Verdict: {verdict['headline']}" in " ".join(out.stderr.split())
    # like-for-like: every trial ran with the same threads per process, recorded with it
    assert {t["threads_per_rank"] for t in trials} == {summary["threads"]["threads_per_rank"]}
    # the reference documents every key written (docs/reference/tune-summary.md is made from the table)
    assert sorted(set(summary) - documented_keys(TuningSummary)) == []
    assert sorted(documented_keys(TuningSummary, always_only=True) - set(summary)) == []
    trials_doc = meaning_of(TuningSummary, "trials")
    assert [k for k in trials[0] if f"`{k}`" not in trials_doc] == []


@pytest.mark.slow
def test_a_study_in_a_relative_run_dir_reports_whole_from_anywhere(tmp_path):
    # `autotune demo` and every study without --run-dir live under the relative runs/
    space = space_file(tmp_path, BATCH_SPACE)
    out = tune(
        "--space",
        space,
        "--trials",
        "2",
        "--searcher",
        "grid",
        "--run-dir",
        "runs/study",
        *FAST,
        UNMODIFIED,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved = tmp_path / "moved"
    (tmp_path / "runs" / "study").rename(moved)
    for study, cwd in ((moved, tmp_path), (Path("../moved"), elsewhere)):
        report = subprocess.run(
            [sys.executable, "-m", "autotune", "report", str(study), "--format", "json", "--output", "-"],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=120,
            cwd=cwd,
            check=False,
        )
        assert report.returncode == 0, report.stderr
        data = json.loads(report.stdout)
        notes = data["overview"]["notes"]
        assert not [n for n in notes if "cannot be read" in n], notes
        assert data["steps"]["median_s"] > 0  # the best trial's own profile is in it
        assert "steps" not in data["missing"]


@pytest.mark.slow
def test_a_diverging_configuration_is_diverged_and_the_study_goes_on(tmp_path):
    space = space_file(tmp_path, '[space.lr]\ntype = "choice"\nchoices = [0.05, 1e6]\narg = "--lr={value}"\n')
    run_dir = tmp_path / "study"
    out = tune(
        "--space", space, "--trials", "3", "--searcher", "grid", "--run-dir", str(run_dir), *FAST, UNMODIFIED
    )
    assert out.returncode == 0, out.stderr
    by_lr = {t["params"].get("lr"): t for t in json.loads((run_dir / "summary.json").read_text())["trials"]}
    assert by_lr[0.05]["status"] == "ok"
    bad = by_lr[1e6]
    assert bad["status"] == "diverged", bad
    assert "NaN or infinite" in bad["error"]
    assert bad["stop_reason"] == "non_finite_loss"  # it stopped at the first NaN, not at --trial-steps


def _wait_for_trials(run_dir: Path, count: int, proc: subprocess.Popen, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if (run_dir / "run.db").exists():
            try:
                if len(stored_trials(run_dir)) >= count:
                    return
            except sqlite3.OperationalError:
                pass  # the tables are not there yet
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} trials after {deadline_s} s")


def _wait_for_path(path: Path, proc: subprocess.Popen, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, f"{path} not there after {deadline_s} s"
        time.sleep(0.1)


@pytest.mark.slow
def test_kill_9_mid_study_then_resume_loses_and_repeats_no_trial(tmp_path):
    run_dir = tmp_path / "study"
    space = space_file(tmp_path, BATCH_SPACE)
    args = ["--space", space, "--trials", "5", "--searcher", "random", "--run-dir", str(run_dir), *FAST]
    proc = subprocess.Popen(
        [sys.executable, "-m", "autotune", "tune", *args, UNMODIFIED],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _wait_for_trials(run_dir, 2, proc, deadline_s=120)
        # the next trial runs: its profiler has opened its store
        _wait_for_path(run_dir / "trials" / "trial-0002" / "run.db", proc, deadline_s=60)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the tuner and its running trial, no clean-up at all
        proc.communicate()
    before = stored_trials(run_dir)
    assert 2 <= len(before) < 5
    out = tune("--resume", "--run-dir", str(run_dir))  # as many trials as the study was started with
    assert out.returncode == 0, out.stderr
    after = stored_trials(run_dir)
    assert [t["id"] for t in after] == list(range(5))
    assert after[: len(before)] == before  # finished trials are kept as they were, not re-run
    configs = [json.dumps(t["params"], sort_keys=True) for t in after]
    assert len(set(configs)) == 5  # no configuration ran twice
    started = [int(line.split()[1]) for line in out.stderr.splitlines() if line.endswith("…")]
    assert started == list(range(len(before), 5))  # the resumed tuner started no finished trial
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["trials_run"] == 5 and summary["best"] is not None


@pytest.mark.slow
def test_a_script_that_always_fails_stops_after_the_baseline_with_the_store_intact(tmp_path):
    run_dir = tmp_path / "study"
    space = space_file(tmp_path, BATCH_SPACE)
    out = tune("--space", space, "--trials", "4", "--run-dir", str(run_dir), *FAST, UNMODIFIED, "--fail")
    assert out.returncode == 1
    assert "baseline trial" in out.stderr and "this script always fails" in out.stderr
    assert "Traceback" not in out.stderr.split("this script always fails")[0].splitlines()[-1]
    trials = stored_trials(run_dir)
    assert [t["status"] for t in trials] == ["crashed"]
    assert json.loads((run_dir / "summary.json").read_text())["trials"][0]["status"] == "crashed"


@pytest.mark.slow
def test_a_parameter_the_script_never_reads_stops_the_study(tmp_path):
    run_dir = tmp_path / "study"
    space = space_file(tmp_path, '[space.hidden_size]\ntype = "int"\nlow = 8\nhigh = 64\n')
    out = tune("--space", space, "--trials", "4", "--run-dir", str(run_dir), *FAST, UNMODIFIED)
    assert out.returncode == 1, out.stderr
    assert "never read 'hidden_size'" in out.stderr
    assert len(stored_trials(run_dir)) == 2  # the baseline and the one trial that showed it


@pytest.mark.slow
def test_a_script_ignoring_its_argument_stops_when_every_trial_measures_the_same(tmp_path):
    run_dir = tmp_path / "study"
    space = space_file(tmp_path, BATCH_SPACE)
    out = tune(
        "--space", space, "--trials", "8", "--searcher", "grid", "--early-stop", "0",
        "--run-dir", str(run_dir), *FAST, UNMODIFIED, "--ignore-batch-size",
    )  # fmt: skip
    trials = stored_trials(run_dir)
    if out.returncode == 0:
        # the grid ran out before the check could say so: only when the machine's load made one trial
        # clearly faster than the median (seen in a loaded full suite: 11,982 against a median of 6.7k);
        # every trial still trained the same samples and the same losses
        from autotune.tuner.tune_checks import SAME_MAX_SPREAD

        rates = sorted(t["value"] for t in trials if t["status"] == "ok")
        assert len(trials) == 6 and rates[-1] / rates[len(rates) // 2] - 1 > SAME_MAX_SPREAD, out.stderr
        assert len({tuple(t["attrs"]["loss_per_step"][:5]) for t in trials}) == 1
        return
    assert out.returncode == 1, out.stderr
    assert "measured the same" in out.stderr and "batch_size (as '--batch-size={value}')" in out.stderr
    # the check runs after every trial once five are ok: the baseline and four batch sizes, or one more
    # when a trial ran clearly faster by the machine's noise (seen once in a full suite run: 6)
    assert len(trials) in (5, 6)


@pytest.mark.parametrize(
    ("toml", "extra", "message"),
    [
        ('[space.precison]\ntype = "choice"\nchoices = ["fp32", "bf16"]\n', [], "did you mean 'precision'"),
        ('[space.precision]\ntype = "choice"\nchoices = ["fp32", "fp64"]\n', [], "'fp64'"),
        ('[space.batch_size]\ntype = "int"\nlow = 64\nhigh = 8\narg = "--b={value}"\n', [], "inverted range"),
        ('[space.batch_size]\ntype = "int"\nlow = "8"\nhigh = 64\narg = "--b={value}"\n', [], "low"),
        (BATCH_SPACE, ["--objective", "cost"], "--price-per-gpu-hour"),
        (BATCH_SPACE, ["--memory-budget", "lots"], "8GiB"),
        (BATCH_SPACE, ["--resume"], "--resume: no study in"),
        # every trial's profile would refuse it: the same bound as autotune profile's own option
        (BATCH_SPACE, ["--min-measured-steps", "1"], "an integer >= 2"),
        (BATCH_SPACE, ["--preset", "hf"], "--preset and --space"),
    ],
)
def test_bad_input_is_one_line_and_exit_status_2(tmp_path, toml, extra, message):
    out = tune("--space", space_file(tmp_path, toml), *extra, "--run-dir", str(tmp_path / "s"), UNMODIFIED)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], out.stderr
    assert not (tmp_path / "s" / "run.db").exists()


@pytest.mark.slow
def test_a_study_that_stops_at_once_points_to_what_it_saved(tmp_path):
    # no --space and a script that reads no built-in knob: nothing to tune after the baseline
    run_dir = tmp_path / "study"
    out = tune("--run-dir", str(run_dir), *FAST, str(SCRIPTS / "loop_kwargs.py"))
    assert out.returncode == 1
    assert "reads no built-in knob" in out.stderr
    assert f"Run directory: {run_dir}" not in out.stderr  # no study there for `autotune report`
    baseline = run_dir / "trials" / "trial-0000"
    assert f"the baseline's own profile is in {baseline} (autotune report {baseline})" in out.stderr
    report = subprocess.run(
        [sys.executable, "-m", "autotune", "report", str(baseline), "--format", "json", "-o", "-"],
        capture_output=True, text=True, env=ENV, timeout=120, check=False,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr


@pytest.mark.slow
def test_resume_refuses_another_space_and_keeps_the_store(tmp_path):
    run_dir = tmp_path / "study"
    out = tune(
        "--space",
        space_file(tmp_path, BATCH_SPACE),
        "--trials",
        "2",
        "--run-dir",
        str(run_dir),
        *FAST,
        UNMODIFIED,
    )
    assert out.returncode == 0, out.stderr
    other = tmp_path / "other.toml"
    other.write_text(BATCH_SPACE.replace("high = 128", "high = 256"))
    again = tune("--resume", "--space", str(other), "--run-dir", str(run_dir), "--trials", "3")
    assert again.returncode == 2 and "another space" in again.stderr
    assert len(stored_trials(run_dir)) == 2
    fresh = tune("--space", str(other), "--run-dir", str(run_dir), UNMODIFIED)
    assert fresh.returncode == 2 and "--resume" in fresh.stderr


@pytest.mark.slow
def test_the_energy_objective_without_nvml_says_why_after_the_baseline(tmp_path):
    run_dir = tmp_path / "study"
    space = space_file(tmp_path, BATCH_SPACE)
    env_backend = {"AUTOTUNE_BACKEND": "host"}  # the same answer as a machine without an NVIDIA GPU
    out = subprocess.run(
        [sys.executable, "-m", "autotune", "tune", "--objective", "energy", "--space", space,
         "--run-dir", str(run_dir), *FAST, UNMODIFIED],
        capture_output=True, text=True, env={**ENV, **env_backend}, timeout=300,
    )  # fmt: skip
    assert out.returncode == 1
    assert "--objective energy needs NVML's energy counter" in out.stderr
    assert [t["status"] for t in stored_trials(run_dir)] == ["crashed"]


@pytest.mark.slow
def test_the_cost_objective_minimizes_dollars_per_million_samples(tmp_path):
    run_dir = tmp_path / "study"
    space = space_file(tmp_path, BATCH_SPACE)
    out = tune(
        "--objective", "cost", "--price-per-gpu-hour", "2.5", "--multi-objective", "--space", space,
        "--trials", "3", "--searcher", "grid", "--run-dir", str(run_dir), *FAST, UNMODIFIED,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["objective"], summary["direction"]) == ("cost", "minimize")
    measured = []
    for t in summary["trials"]:
        if t["status"] == "busy":  # other processes held the cores it needed: no figure, never compared
            assert t["objective"] is None
            continue
        assert t["objective"] == pytest.approx(2.5 / 3600 / t["throughput"] * 1e6)
        measured.append(t)
    best = summary["best"]
    if best is None:  # a machine too busy to measure any trial (the verdict says so)
        assert not measured or all(t["id"] == summary["baseline"]["id"] for t in measured)
        return
    assert best["objective"] == min(t["objective"] for t in measured)
    base = summary["baseline"]["objective"]
    if base is not None and summary["baseline"]["status"] != "busy":
        assert best["cost_saving_vs_baseline"] == pytest.approx(1 - best["objective"] / base)
    assert best["id"] in summary["pareto"]


def _claims(run_dir: Path) -> dict[int, dict]:
    """The study's claims so far; none while run.db exists but the tuner has not made its tables yet."""
    with sqlite3.connect(run_dir / "run.db") as conn:
        try:
            rows = conn.execute("SELECT id, record FROM claims").fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return {}
            raise
        return {i: json.loads(r) for i, r in rows}


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pgid}").exists() and b"autotune" in Path(f"/proc/{pgid}/cmdline").read_bytes()


@pytest.mark.slow
def test_two_trials_at_once_overlap_on_their_own_cores_and_find_the_same_best(tmp_path):
    # batch sizes far apart: 128 trains about 4x the samples/s of 12 here (8: the baseline's), a
    # gap no busy neighbour closes, so both studies must find it. --parallel 3 on a 2-core machine
    # runs 2 at once (it put two trials on one core before, and picked the wrong best)
    space = space_file(tmp_path, FAR_SPACE)
    cores = len(os.sched_getaffinity(0))
    best = {}
    for parallel in (str(cores + 1), "1"):
        run_dir = tmp_path / f"study{parallel}"
        args = ["--space", space, "--trials", "4", "--searcher", "grid", "--parallel", parallel]
        out = tune(*args, "--run-dir", str(run_dir), *FAST, UNMODIFIED)
        assert out.returncode == 0, out.stderr
        trials = json.loads((run_dir / "summary.json").read_text())["trials"]
        best[parallel] = json.loads((run_dir / "summary.json").read_text())["best"]["params"]
        searched = [t for t in trials if not t["baseline"]]
        assert len(searched) == 3 and all(t["status"] == "ok" for t in searched)
        assert all(t["executor"] == "local" and t["ended_at"] > t["started_at"] for t in searched)
        spans = sorted((t["started_at"], t["ended_at"]) for t in searched)
        overlaps = sum(1 for a, b in itertools.pairwise(spans) if b[0] < a[1])
        if parallel != "1":
            assert f"--parallel {parallel} on {cores} cores: {cores} trials at once" in out.stderr
            assert f"How: trials ran up to {cores} at once on this machine" in out.stderr
            assert overlaps >= 1  # the trials ran two at a time
            assert {t["devices"] for t in searched} <= {f"cpu:{n}" for n in range(cores)}  # a core each
            for a, b in itertools.combinations(searched, 2):  # two trials that overlapped: not one core
                if a["started_at"] < b["ended_at"] and b["started_at"] < a["ended_at"]:
                    assert a["devices"] != b["devices"], (a, b)
        else:
            assert overlaps == 0 and {t["devices"] for t in searched} == {None}
    assert best[str(cores + 1)] == best["1"] == {"batch_size": 128}


@pytest.mark.slow
def test_kill_9_with_trials_in_flight_then_resume_stops_them_and_runs_them_again(tmp_path):
    run_dir = tmp_path / "study"
    space = space_file(tmp_path, BATCH_SPACE)
    slow = ["--trial-steps", "400", "--warmup-steps", "2", "--stable-within", "0", "--trial-timeout", "120",
            "--confirm-rounds", "0"]  # fmt: skip
    args = ["--space", space, "--trials", "4", "--searcher", "grid", "--parallel", "2"]
    args += ["--run-dir", str(run_dir)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "autotune", "tune", *args, *slow, UNMODIFIED],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        end = time.monotonic() + 120
        while time.monotonic() < end:  # two trials of the search claimed and started
            claims = _claims(run_dir) if (run_dir / "run.db").exists() else {}
            if sum(1 for c in claims.values() if isinstance(c.get("pgid"), int)) >= 2:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # the tuner alone: its trials, in their own groups, run on
        proc.communicate()
    ended = {t["id"] for t in stored_trials(run_dir)}
    in_flight = {i: c for i, c in _claims(run_dir).items() if i not in ended}
    assert len(in_flight) == 2
    groups = [c["pgid"] for c in in_flight.values()]
    assert all(_alive(g) for g in groups)  # orphaned trials still running
    out = tune("--resume", "--run-dir", str(run_dir), "--trial-steps", "12", timeout=600)
    assert out.returncode == 0, out.stderr
    assert not any(_alive(g) for g in groups)
    stale = "were running when the study stopped: run again"
    assert stale in out.stderr
    # first thing: before the search goes on (its prior's note, its trials)
    lines = out.stderr.splitlines()
    first_stale = next(i for i, line in enumerate(lines) if stale in line)
    assert all(not line.startswith("trial ") for line in lines[:first_stale]), lines[: first_stale + 1]
    after = stored_trials(run_dir)
    assert [t["id"] for t in after] == [0, 1, 2, 3]  # no trial lost, none counted twice
    for trial_id, claim in in_flight.items():  # each ran again under its own id, as claimed
        # ok, or "busy" when a pinned trial shared its one core with a busy process (measured, not compared)
        assert after[trial_id]["params"] == claim["params"] and after[trial_id]["status"] in ("ok", "busy")
    assert len({json.dumps(t["params"], sort_keys=True) for t in after}) == 4


@pytest.mark.slow
def test_kill_9_during_a_re_measurement_then_resume_stops_it_before_running_it_again(tmp_path):
    """A study killed while it re-measures the baseline left that process running, and --resume ran
    the same re-measurement again into the same folder beside it: each measured the other."""
    one = '[space.batch_size]\ntype = "choice"\nchoices = [128]\narg = "--batch-size={value}"\n'
    space = space_file(tmp_path, one)
    # 3,000 steps a run: each re-measurement runs for a second or more, time enough to be killed in
    slow = ["--trial-steps", "3000", "--stable-within", "0", "--warmup-steps", "2", "--trial-timeout", "120",
            "--no-plan-prior", "--confirm-rounds", "1", "--anchor-every", "0",
            "--calm-wait", "0"]  # fmt: skip
    # A re-measurement starts only when the search trial was measured and beat the baseline; on a
    # machine too busy to measure it that trial is left out as "busy" and the study ends without one.
    # That is the load, not what is tested here: such a study is started again (three at most).
    for attempt in range(3):
        run_dir = tmp_path / f"study-{attempt}"
        args = ["--space", space, "--trials", "2", "--run-dir", str(run_dir), *slow]
        proc = subprocess.Popen(
            [sys.executable, "-m", "autotune", "tune", *args, UNMODIFIED],
            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        running = run_dir / ".running"
        end = time.monotonic() + 180
        while time.monotonic() < end and not list(running.glob("confirm-*.json")) and proc.poll() is None:
            time.sleep(0.1)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.communicate()
            break
        _, stderr = proc.communicate()
        summary = json.loads((run_dir / "summary.json").read_text())
        statuses = [t["status"] for t in summary["trials"]]
        assert "busy" in statuses, f"the study ended without a re-measurement: {statuses}\n{stderr}"
    else:
        pytest.fail("three studies in a row had their search trial measured busy: no re-measurement to kill")
    [claim_file] = list(running.glob("confirm-*.json"))
    pgid = json.loads(claim_file.read_text())["pgid"]
    assert _alive(pgid)  # the re-measurement runs on without its tuner
    out = tune("--resume", "--run-dir", str(run_dir), "--trial-steps", "12", timeout=600)
    assert out.returncode == 0, out.stderr
    assert not _alive(pgid)
    assert f"{claim_file.stem} were running when the study stopped: stopped, and run again" in out.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [c["role"] for c in summary["confirmations"]] == ["baseline", "best"]  # each once
    # each measured, or left out as "busy" when the machine was too loaded to measure it (the load, not
    # what is tested here); never crashed by a second run writing into its folder
    assert all(c["status"] in ("ok", "busy") for c in summary["confirmations"]), summary["confirmations"]
    assert not list(running.glob("*.json"))


@pytest.mark.slow
def test_a_study_resumed_from_another_directory_runs_its_trials_where_it_began_and_keeps_what_resume_said(
    tmp_path: Path,
) -> None:
    # the script given relatively, as users do: a resume from elsewhere must find it, and the
    # --trials given to one resume holds for the next (the stored study keeps it)
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    shutil.copy(UNMODIFIED, project / "train.py")
    space = space_file(tmp_path, FAR_SPACE)
    run_dir = tmp_path / "study"
    out = tune("--space", space, "--trials", "2", "--run-dir", str(run_dir), *FAST, "train.py", cwd=project)
    assert out.returncode == 0, out.stderr
    out = tune("--resume", "--run-dir", str(run_dir), "--trials", "3", cwd=elsewhere)
    assert out.returncode == 0, out.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    # the baseline and 2 search trials (--trials counts the baseline), the last run from elsewhere
    assert [t["status"] for t in summary["trials"]] == ["ok"] * 3, [t["error"] for t in summary["trials"]]
    again = tune("--resume", "--run-dir", str(run_dir), cwd=elsewhere)
    assert again.returncode == 0, again.stderr
    assert json.loads((run_dir / "summary.json").read_text())["n_trials"] == 3  # what the last resume said
