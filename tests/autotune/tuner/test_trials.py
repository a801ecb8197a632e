"""Real trials: the test scripts run under ``autotune profile --max-steps`` in their own processes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.search import Choice, Int, Space, Study
from autotune.tuner.trials import TrialSettings, run_trial, study_objective, trial_command

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
MAIN_GUARD = str(SCRIPTS / "loop_main_guard.py")
ENV = {"OMP_NUM_THREADS": "1"}


def settings(**kw):
    base = dict(script=MAIN_GUARD, script_args=("--steps", "200"), max_steps=10, timeout_s=120, extra_env=ENV)
    base.update(kw)
    return TrialSettings(**base)


SPACE = Space(batch_size=Int(8, 64, power_of_two=True, arg="--batch-size={value}"))
ENV_SPACE = Space(batch_size=Int(8, 64, power_of_two=True, env="BATCH_SIZE"))


def test_command_is_an_argument_list_with_the_params_after_the_script(tmp_path):
    cmd = trial_command(settings(), SPACE, {"batch_size": 16}, tmp_path)
    assert cmd[:4] == [sys.executable, "-m", "autotune", "profile"]
    assert cmd[cmd.index("--max-steps") + 1] == "10"
    assert cmd[-4:] == [MAIN_GUARD, "--steps", "200", "--batch-size=16"]
    two = trial_command(settings(world_size=2), SPACE, {"batch_size": 16}, tmp_path)
    assert two[1:3] == ["-m", "torch.distributed.run"]
    assert two[two.index("--nproc-per-node") + 1] == "2"


@pytest.mark.slow
def test_ok_trial_stops_at_its_step_budget_with_the_params_applied(tmp_path):
    out = run_trial(settings(), SPACE, {"batch_size": 32}, tmp_path / "t")
    assert out.status == "ok", out.error
    s = out.summary
    assert s["steps"] == 10  # the script would have run 200
    assert s["stopped_by_budget"] is True
    assert s["measured_steps"] == 10 - 3 - 1  # warm-up and the FLOP step
    assert out.throughput == pytest.approx(32 / s["step_time_s"]["mean"], rel=1e-6)
    assert out.duration_s < 60


@pytest.mark.slow
def test_crashing_script_is_crashed_with_its_error(tmp_path):
    out = run_trial(
        settings(script=str(SCRIPTS / "loop_raises.py"), script_args=()),
        ENV_SPACE,
        {"batch_size": 8},
        tmp_path,
    )
    assert out.status == "crashed"
    assert "ValueError: user bug 42" in out.error
    assert "exit status 1" in out.error


@pytest.mark.slow
def test_hanging_script_times_out_and_is_killed(tmp_path):
    hang = tmp_path / "hang.py"
    hang.write_text("import time\nwhile True:\n    time.sleep(0.1)\n")
    out = run_trial(
        settings(script=str(hang), script_args=(), timeout_s=3), SPACE, {"batch_size": 8}, tmp_path / "t"
    )
    assert out.status == "timeout"
    assert out.duration_s < 20


@pytest.mark.slow
def test_peak_memory_over_the_budget_is_out_of_memory(tmp_path):
    out = run_trial(settings(memory_budget_bytes=1), SPACE, {"batch_size": 8}, tmp_path)
    assert out.status == "oom"
    assert "over the budget" in out.error
    assert out.summary["peak_memory_bytes"] > 1


@pytest.mark.slow
def test_a_study_runs_real_trials(tmp_path):
    space = Space(
        batch_size=Int(8, 64, power_of_two=True, arg="--batch-size={value}"),
        lr=Choice(0.001, 0.01, arg="--lr={value}"),
    )
    run = settings(max_steps=8)
    study = Study(space, searcher="grid", seed=0)
    study.optimize(study_objective(run, space, tmp_path), n_trials=3)
    assert [t.status for t in study.trials] == ["ok", "ok", "ok"]
    assert study.best.value == max(t.value for t in study.trials)
    assert len(list(tmp_path.glob("trial-*/summary.json"))) == 3


@pytest.mark.slow
def test_two_rank_ddp_trial_through_torchrun(tmp_path):
    run = settings(script=str(SCRIPTS / "loop_ddp.py"), script_args=("--steps", "100"), world_size=2)
    out = run_trial(run, Space(batch_size=Int(16, 32, env="UNUSED")), {"batch_size": 16}, tmp_path)
    assert out.status == "ok", out.error
    assert [r["steps"] for r in out.summary["ranks"]] == [10, 10]
    assert out.throughput == pytest.approx(sum(r["samples_per_s"] for r in out.summary["ranks"]), rel=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["ddp", "fsdp"])
def test_ddp_and_fsdp_trials_of_the_demo_target_over_two_gloo_ranks(tmp_path, layout):
    """The layout param alone makes the trial a 2-rank torchrun job, and the target applies it."""
    from autotune.demo.target import demo_space

    run = TrialSettings(
        script="autotune.demo.target",
        module=True,
        script_args=("--model", "gpt"),
        max_steps=6,
        warmup_steps=2,
        timeout_s=240,
        extra_env=ENV,
    )
    params = {"micro_batch": 4, "precision": "fp32", "layout": layout}
    out = run_trial(run, demo_space("gpt"), params, tmp_path / layout)
    assert out.status == "ok", out.error
    s = out.summary
    assert [r["rank"] for r in s["ranks"]] == [0, 1] and [r["steps"] for r in s["ranks"]] == [6, 6]
    used = s["params_used"]
    assert (used["layout"], used["world_size"], used["micro_batch"]) == (layout, 2, 4)
    assert used["grad_accum"] * used["micro_batch"] * used["world_size"] == used["global_batch"]
    assert s["loss"]["non_finite_steps"] == 0 and s["loss"]["first"] > s["loss"]["last_mean"] * 0.5


@pytest.mark.parametrize(
    "tail",
    [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
        "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_ENOUGH_WORKSPACE",
    ],
)
def test_the_libraries_out_of_memory_errors_are_oom(tail):
    from autotune.tuner.trials import classify

    status, error = classify(1, False, tail, None, TrialSettings(script="x.py"))
    assert status == "oom" and tail in error
    assert (
        classify(1, False, "RuntimeError: CUDNN_STATUS_BAD_PARAM", None, TrialSettings(script="x.py"))[0]
        == "crashed"
    )


@pytest.mark.gpu
def test_a_real_cuda_out_of_memory_error_is_an_oom_trial(tmp_path):
    """A trial asking for more GPU memory than the device has: torch's own error, seen as "oom"."""
    script = tmp_path / "too_big.py"
    script.write_text(
        "import torch\n"
        "total = torch.cuda.get_device_properties(0).total_memory\n"
        "model = torch.nn.Linear(8, 8).cuda()\n"
        "x = torch.randn(4, 8, device='cuda')\n"
        "model(x).sum().backward()\n"
        "hog = torch.empty(2 * total, dtype=torch.uint8, device='cuda')\n"
    )
    run = settings(script=str(script), script_args=())
    out = run_trial(run, ENV_SPACE, {"batch_size": 8}, tmp_path / "t")
    assert out.status == "oom", out.error
    assert "out of memory" in out.error.lower()


def test_every_trial_gets_the_same_threads_per_process_whatever_its_ranks():
    from autotune.tuner.trials import study_threads

    # seen: torch took both cores for a one-process baseline and torchrun gave each of 2 ranks one;
    # beside two busy processes the baseline's oversubscribed threads made a 26x "speedup"
    assert study_threads(2, {}, cores=2) == (1, "2 cores over up to 2 ranks")
    assert study_threads(1, {}, cores=2) == (2, "2 cores over up to 1 rank")
    assert study_threads(2, {"OMP_NUM_THREADS": "2"}, cores=8) == (2, "OMP_NUM_THREADS=2 as set")
    assert study_threads(2, {"OMP_NUM_THREADS": "8"}, cores=8)[0] == 4  # 8 x 2 ranks would oversubscribe


@pytest.mark.slow
def test_a_trials_threads_reach_every_rank(tmp_path):
    script = tmp_path / "threads.py"
    script.write_text(
        "import os, torch\n"
        "from torch import nn\n"
        "rank = os.environ.get('RANK', '0')\n"
        f"open(r'{tmp_path}' + f'/threads-{{rank}}', 'w').write(str(torch.get_num_threads()))\n"
        "m = nn.Linear(4, 1); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(4):\n"
        "    o.zero_grad(); m(torch.randn(2, 4)).sum().backward(); o.step()\n"
    )
    # 2 threads: not CI's OMP_NUM_THREADS=1, nor the 1 torchrun gives each of several ranks
    settings = TrialSettings(script=str(script), max_steps=4, warmup_steps=1, threads_per_rank=2)
    assert run_trial(settings, None, {}, tmp_path / "one").status == "ok"
    assert (tmp_path / "threads-0").read_text() == "2"
    two = TrialSettings(**{**settings.__dict__, "world_size": 2})
    assert run_trial(two, None, {}, tmp_path / "two").status == "ok"
    assert {(tmp_path / f"threads-{r}").read_text() for r in (0, 1)} == {"2"}


def test_a_trial_summary_this_version_cannot_read_is_named_not_scored(tmp_path):
    """A trial's summary.json is parsed once where the tuner reads it: a figure of the wrong type is the
    trial's one-line error (the trial counts as crashed), never a metric of None read far from it."""
    import json

    from autotune.tuner.trials import _read_summary

    (tmp_path / "summary.json").write_text(json.dumps({"measured_steps": 8, "peak_memory_bytes": "8 GB"}))
    summary, problem = _read_summary(tmp_path)
    assert summary is None
    where = tmp_path / "summary.json"
    assert problem == f"{where}: 'peak_memory_bytes' must be a number or null, not '8 GB'"
    (tmp_path / "summary.json").write_text(json.dumps({"measured_steps": 8, "peak_memory_bytes": 1024}))
    summary, problem = _read_summary(tmp_path)
    assert problem is None and summary.measured_steps == 8 and summary.peak_memory_bytes == 1024
    assert _read_summary(tmp_path / "none") == (None, None)  # no summary written: the trial's log says why


def test_a_killed_ray_tasks_trial_directory_is_removed_by_the_next_task_on_its_node(tmp_path):
    from autotune.tuner.ray_executor import TRIAL_TMP_PREFIX, remove_orphaned_trial_dirs

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid no process has any more (killed before its clean-up ran)
    orphan = tmp_path / f"{TRIAL_TMP_PREFIX}{gone.pid}-x1y2"
    (orphan / "trial").mkdir(parents=True)
    (orphan / "trial" / "run.db").write_bytes(b"\0" * 1024)
    running = tmp_path / f"{TRIAL_TMP_PREFIX}{os.getpid()}-a3b4"  # a live task's: kept
    unnamed = tmp_path / f"{TRIAL_TMP_PREFIX}k3j_x2"  # not named by a pid: kept
    for kept in (running, unnamed):
        kept.mkdir()
    assert remove_orphaned_trial_dirs(tmp_path) == [orphan]
    assert not orphan.exists() and running.is_dir() and unnamed.is_dir()


def test_a_trials_load_is_its_profiles_when_pinned_or_long_enough_else_the_whole_runs(monkeypatch):
    """One 0.1 s reading is a moment's load (seen: 0.1 core for a baseline among readings of 1.0, and
    the verdict said "different load"): the tuner's figure over the whole run is taken instead."""
    from autotune.tuner import trials
    from profilers.contract.profile_summary import ProfileSummary

    class Whole:
        def cores(self) -> float:
            return 0.9

    monkeypatch.setattr(trials, "machine_cores", lambda: 2)

    def summary(cores, samples):
        load = {"machine_cores": cores, "other_cores": 0.1, "own_cores": 0.9, "samples": samples}
        return ProfileSummary.parse({"schema": 1, "load": load}, "summary.json")

    assert trials._other_load(summary(2, 1), Whole()) == (0.9, 2)  # one reading: the whole run's
    assert trials._other_load(summary(2, 12), Whole()) == (0.1, 2)  # its measured steps'
    assert trials._other_load(summary(1, 1), Whole()) == (0.1, 1)  # pinned to one core: its own cores'
    assert trials._other_load(None, Whole()) == (0.9, 2)
