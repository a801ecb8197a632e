"""The demo's trial target: knobs from the trial's environment, the fixed global batch, real trials.

In process for the batch split, precision and the loss trajectory; as real trials (the trial
runner, ``autotune profile --max-steps``) for what the profiler sees; under ``torchrun`` with 2
gloo ranks for ddp and fsdp, whose loss must match one process on the same global batches.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from autotune import knobs, prepared
from autotune.demo import target
from autotune.demo.models import default_config
from autotune.knobs import BatchPlan
from autotune.search import Choice, Int
from autotune.tuner.trials import TrialSettings, run_trial
from profilers.contract.reader import read_steps

ROOT = Path(__file__).resolve().parents[2]
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
FINAL_LINE = re.compile(
    r"^demo-gpt: (\d+) steps, final loss (\S+) \(global batch 16 = micro (\d+) x accum (\d+) "
)


@pytest.fixture(autouse=True)
def _clean_knob_state(monkeypatch: pytest.MonkeyPatch):
    """No trial parameters or torchrun variables leak in; one thread; matmul mode restored."""
    for var in list(os.environ):
        if var.startswith(knobs.PARAM_ENV_PREFIX) or var in TORCHRUN_VARS:
            monkeypatch.delenv(var)
    monkeypatch.setattr(prepared, "_CURRENT", None)
    mode, threads = torch.get_float32_matmul_precision(), torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_float32_matmul_precision(mode)
    torch.set_num_threads(threads)


def set_param(monkeypatch: pytest.MonkeyPatch, name: str, value: object) -> None:
    monkeypatch.setenv(knobs.param_env_var(name), json.dumps(value))


def clean_env(**params: object) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(knobs.PARAM_ENV_PREFIX)}
    env.update({knobs.param_env_var(k): json.dumps(v) for k, v in params.items()})
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    return env


# ---------------------------------------------------------------------------------- the space


def test_space_is_micro_batch_precision_layout():
    for model, batch in target.DEFAULT_GLOBAL_BATCH.items():
        assert default_config(model).default_batch_size == batch
    gpt = target.demo_space("gpt")
    assert gpt.names == ("micro_batch", "precision", "layout")
    assert gpt["micro_batch"] == Int(1, 16, power_of_two=True)
    assert gpt["precision"] == Choice("fp32", "bf16", "fp16")
    assert gpt["layout"] == Choice("single", "ddp", "fsdp")
    assert gpt.size == 45
    assert target.demo_space("cnn")["micro_batch"].values() == [1, 2, 4, 8, 16, 32]  # 96 = 32 x 3
    assert target.demo_space("gpt", global_batch=24)["micro_batch"].values() == [1, 2, 4, 8]
    cuda = target.demo_space("gpt", device="cuda", world_size=1)
    assert cuda["precision"] == Choice("fp32", "tf32", "bf16", "fp16")
    assert cuda["layout"] == Choice("single")
    for bad in ({"model": "rnn"}, {"device": "tpu"}, {"world_size": 0}, {"global_batch": 15}):
        with pytest.raises(ValueError):
            target.demo_space(**bad)  # type: ignore[arg-type]


def test_world_size_follows_the_layout():
    assert target.layout_world_size("single") == 1
    assert target.layout_world_size("ddp") == target.layout_world_size("fsdp") == 2
    assert target.layout_world_size("fsdp", 8) == 8
    with pytest.raises(ValueError, match="unknown layout"):
        target.layout_world_size("pipeline")


def test_each_step_takes_the_next_global_batch_whatever_the_split():
    whole = BatchPlan(micro_batch=16, grad_accum=1, world_size=1, global_batch=16)
    split = BatchPlan(micro_batch=2, grad_accum=2, world_size=4, global_batch=16)
    steps = 4  # two epochs of a 40-sample dataset: 2 full global batches each, 8 samples left out
    one = iter(target.GlobalBatchSampler(40, whole, seed=3))
    ranks = [iter(target.GlobalBatchSampler(40, split, rank=r, seed=3)) for r in range(4)]
    seen: list[int] = []
    for _ in range(steps):
        batch = next(one)
        parts = [[i for _ in range(split.grad_accum) for i in next(it)] for it in ranks]
        assert all(len(p) == split.rank_batch for p in parts)
        assert [i for p in parts for i in p] == batch  # rank r: the r-th share, in micro-batches
        seen += batch
    assert len(set(seen[:32])) == 32 and len(set(seen[32:])) == 32  # no sample twice in an epoch
    assert seen[:32] != seen[32:]  # reshuffled each epoch
    with pytest.raises(ValueError, match="larger than the dataset"):
        target.GlobalBatchSampler(8, whole)


# ---------------------------------------------------------------------------------- in process


def test_baseline_is_the_users_defaults():
    run = target.train("gpt", 2, device="cpu")
    assert run.plan == BatchPlan(micro_batch=16, grad_accum=1, world_size=1, global_batch=16)
    assert (run.precision, run.layout, run.device, run.autocast_dtype) == ("fp32", "single", "cpu", None)
    assert len(run.losses) == 2
    assert run.final_loss == pytest.approx(run.losses[-1])


def test_the_trials_micro_batch_splits_each_step(monkeypatch):
    calls = {"backward": 0, "step": 0}
    backward, step = prepared.Prepared.backward, prepared.Prepared.step

    def counting_backward(self, loss):
        calls["backward"] += 1
        backward(self, loss)

    def counting_step(self):
        calls["step"] += 1
        step(self)

    monkeypatch.setattr(prepared.Prepared, "backward", counting_backward)
    monkeypatch.setattr(prepared.Prepared, "step", counting_step)
    set_param(monkeypatch, "micro_batch", 4)
    run = target.train("gpt", 3, device="cpu")
    assert (run.plan.micro_batch, run.plan.grad_accum) == (4, 4)
    assert calls == {"backward": 3 * 4, "step": 3}


def test_same_global_batch_same_loss_trajectory(monkeypatch):
    """16 x 1, 4 x 4 and 1 x 16 are the same math at fp32: the same losses up to rounding."""
    whole = target.train("gpt", 5, device="cpu").losses
    for micro in (4, 1):
        set_param(monkeypatch, "micro_batch", micro)
        assert target.train("gpt", 5, device="cpu").losses == pytest.approx(whole, rel=1e-5, abs=1e-6)
    assert whole[-1] < whole[0]


def test_deterministic_for_a_seed():
    first = target.train("cnn", 3, device="cpu", seed=1).losses
    assert target.train("cnn", 3, device="cpu", seed=1).losses == first
    assert target.train("cnn", 3, device="cpu", seed=2).losses != first


@pytest.mark.slow
def test_bf16_autocasts_and_trains_close_to_fp32(monkeypatch):
    fp32 = target.train("gpt", 3, device="cpu").losses
    set_param(monkeypatch, "precision", "bf16")
    run = target.train("gpt", 3, device="cpu")
    assert run.precision == "bf16"
    assert run.autocast_dtype is torch.bfloat16
    assert run.losses != fp32
    assert run.losses == pytest.approx(fp32, rel=0.05)


def test_a_split_that_cannot_be_fails_before_training(monkeypatch):
    set_param(monkeypatch, "micro_batch", 3)
    with pytest.raises(ValueError, match="not a multiple of micro_batch 3"):
        target.train("gpt", 1, device="cpu")
    set_param(monkeypatch, "micro_batch", 4)
    set_param(monkeypatch, "layout", "ddp")
    with pytest.raises(RuntimeError, match="launch with torchrun"):  # ddp needs one process per rank
        target.train("gpt", 1, device="cpu")


def test_command_line_prints_one_line(capsys):
    assert target.main(["--model", "cnn", "--steps", "2", "--device", "cpu", "--global-batch", "32"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1
    assert out[0].startswith("demo-cnn: 2 steps, final loss ")
    assert "global batch 32 = micro 32 x accum 1 x 1 rank(s); fp32, single, cpu" in out[0]


# ---------------------------------------------------------------------------------- real trials


def trial_settings(world_size: int = 1) -> TrialSettings:
    return TrialSettings(
        script="autotune.demo.target",
        module=True,
        script_args=("--model", "gpt", "--device", "cpu"),
        max_steps=6,
        warmup_steps=1,
        timeout_s=180,
        world_size=world_size,
        extra_env={"OMP_NUM_THREADS": "1"},
    )


@pytest.mark.slow
@pytest.mark.parametrize(("micro", "precision"), [(1, "fp32"), (4, "bf16")])
def test_trial_one_optimizer_step_is_one_profiler_step(tmp_path, micro, precision):
    """The trial runner's knobs take effect; 16 micro-batches of 1 are still one step each."""
    params = {"micro_batch": micro, "precision": precision, "layout": "single"}
    out = run_trial(trial_settings(), target.demo_space("gpt"), params, tmp_path)
    assert out.status == "ok", out.error
    s = out.summary
    assert s is not None
    assert (s["steps"], s["stopped_by_budget"], s["precision"]) == (6, True, precision)
    steps = read_steps(tmp_path / "run.db")
    assert [r.samples for r in steps] == [16] * 6  # the global batch, summed over the micro-batches
    assert out.throughput == pytest.approx(16 / s["step_time_s"]["mean"], rel=1e-6)


@pytest.mark.slow
def test_impossible_split_is_a_crashed_trial_saying_why(tmp_path):
    params = {"micro_batch": 16, "precision": "fp32", "layout": "ddp"}  # 8 samples per rank
    out = run_trial(trial_settings(world_size=2), target.demo_space("gpt"), params, tmp_path)
    assert out.status == "crashed"
    assert "not a multiple of micro_batch 16" in (out.error or "")


@pytest.mark.slow
def test_ddp_trial_measures_the_job(tmp_path):
    params = {"micro_batch": 2, "precision": "fp32", "layout": "ddp"}
    out = run_trial(trial_settings(world_size=2), target.demo_space("gpt"), params, tmp_path)
    assert out.status == "ok", out.error
    s = out.summary
    assert s is not None and s["steps"] == 6
    assert [r["rank"] for r in s["ranks"]] == [0, 1]
    assert {r.samples for r in read_steps(tmp_path / "run.db")} == {8}  # each rank: its half of 16


@pytest.mark.slow
@pytest.mark.parametrize(("layout", "micro", "accum"), [("ddp", 2, 4), ("fsdp", 8, 1)])
def test_two_ranks_follow_the_single_process_loss(layout, micro, accum):
    """Each rank trains on its own half of each global batch: the job's loss is one process's."""
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        "-m", "autotune.demo.target", "--model", "gpt", "--steps", "4", "--device", "cpu",
    ]  # fmt: skip
    env = clean_env(layout=layout, micro_batch=micro)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("demo-")]
    assert len(lines) == 1, proc.stdout  # rank 0 only
    match = FINAL_LINE.match(lines[0])
    assert match is not None, lines[0]
    assert (int(match[1]), int(match[3]), int(match[4])) == (4, micro, accum)
    assert f"x 2 rank(s); fp32, {layout}, cpu" in lines[0]
    single = target.train("gpt", 4, device="cpu").final_loss
    assert float(match[2]) == pytest.approx(single, rel=1e-5)
