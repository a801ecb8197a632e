"""``autotune profile`` on unmodified Lightning and Hugging Face Trainer scripts (real frameworks, CPU).

The frameworks' own step counter is the reference: steps = ``global_step``; samples per step =
per-device batch × gradient accumulation; evaluation is its own phase and adds no samples.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from profilers.contract.reader import read_steps
from tests.profile_run import profile_script

pytest.importorskip("lightning")
pytest.importorskip("transformers")

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _profile(tmp_path: Path, script: str, *args: str) -> tuple[dict, list, int]:
    run_dir = profile_script(tmp_path / "run", SCRIPTS / script, *args)
    printed = run_dir.with_name("run.stdout").read_text()
    global_step = int(re.findall(r"global_step=(\d+)", printed)[-1])
    return json.loads((run_dir / "summary.json").read_text()), read_steps(run_dir / "run.db"), global_step


@pytest.mark.slow
@pytest.mark.parametrize(("precision", "expected"), [("32-true", "fp32"), ("bf16-mixed", "bf16")])
def test_lightning_fit_with_accumulation_and_validation(tmp_path, precision, expected):
    summary, steps, global_step = _profile(
        tmp_path, "fw_lightning.py", "--batch-size", "16", "--accumulate", "2", "--max-steps", "24",
        "--val-every", "10", "--precision", precision,
    )  # fmt: skip
    assert summary["steps"] == global_step == 24
    # the second micro-batch runs in optimizer.step(closure): both count
    assert [s.samples for s in steps] == [32] * 24
    assert summary["precision"] == expected
    assert summary["step_mode"] == "optimizer"
    # validation every 10 training batches = every 5 optimizer steps, after steps 5, 10, 15, 20 (and
    # the sanity check before step 1): in steps 1, 6, 11, 16, 21
    assert [s.step for s in steps if s.eval_ns > 0] == [1, 6, 11, 16, 21]
    measured = [s for s in steps if s.kind == "measured"]
    assert all(s.forward_ns > 0 and s.backward_ns > 0 for s in measured)
    assert summary["phases"]["eval"] > 0 and summary["phases"]["forward"] > 0
    seconds = sum(s.duration_ns for s in measured) / 1e9
    assert summary["throughput"]["samples_per_s"] == pytest.approx(32 * len(measured) / seconds, rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize(("flags", "expected"), [((), "fp32"), (("--bf16=true",), "bf16")])
def test_hf_trainer_with_accumulation_and_evaluation(tmp_path, flags, expected):
    summary, steps, global_step = _profile(
        tmp_path, "fw_hf_trainer.py", "--per_device_train_batch_size=8", "--gradient_accumulation_steps=2",
        "--max_steps=24", "--eval_steps=8", *flags,
    )  # fmt: skip
    assert summary["steps"] == global_step == 24
    assert [(s.samples, s.tokens) for s in steps] == [(16, 16 * 32)] * 24  # keyword inputs, 2 micro-batches
    assert summary["samples_from"]["input"] == "input_ids"
    assert summary["precision"] == expected
    # evaluation after steps 8 and 16 runs inside steps 9 and 17 (the one after 24 ends no step)
    assert [s.step for s in steps if s.eval_ns > 0] == [9, 17]
    assert summary["throughput"]["tokens_per_s"] == pytest.approx(summary["throughput"]["samples_per_s"] * 32)


@pytest.mark.slow
def test_hf_trainer_with_torch_compile_is_counted_and_leaves_no_dynamo_warning_of_ours(tmp_path):
    # --torch_compile: the Trainer compiles the model, and dynamo traces the profiler's hooks inside
    # it; they once made it warn "does not know how to trace the builtin _thread.get_ident" (and
    # break the graph at every module during the warm-up)
    summary, steps, global_step = _profile(
        tmp_path, "fw_hf_trainer.py", "--per_device_train_batch_size=8", "--max_steps=12", "--torch_compile",
    )  # fmt: skip
    assert summary["steps"] == global_step == 12
    assert [s.samples for s in steps] == [16] * 12  # 8 per device × the script's 2 accumulation steps
    assert summary["phases"]["forward"] > 0 and summary["phases"]["backward"] > 0
    assert summary["warnings"] == []
    assert "get_ident" not in (tmp_path / "run.stderr").read_text()


@pytest.mark.slow
@pytest.mark.parametrize(("mixed", "expected"), [("no", "fp32"), ("bf16", "bf16")])
def test_accelerate_prepared_loop_with_accumulation(tmp_path, mixed, expected):
    pytest.importorskip("accelerate")
    run_dir = profile_script(
        tmp_path / "run", SCRIPTS / "fw_accelerate.py", "--batch-size", "8", "--accumulate", "4",
        "--batches", "96", "--mixed-precision", mixed,
    )  # fmt: skip
    updates = int(re.findall(r"optimizer_updates=(\d+)", run_dir.with_name("run.stdout").read_text())[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    steps = read_steps(run_dir / "run.db")
    # accelerate's optimizer.step() on the 3 accumulating micro-batches does not step: one step per update
    assert summary["steps"] == updates == 24
    assert [s.samples for s in steps] == [32] * 24
    assert summary["precision"] == expected


def _with_callback(tmp_path: Path, script: str, *args: str) -> tuple[dict, list, int]:
    run_dir = tmp_path / "run"
    out = subprocess.run(
        [sys.executable, str(SCRIPTS / script), *args, "--autotune-callback", str(run_dir)],
        capture_output=True, text=True, timeout=240, check=False, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    global_step = int(re.findall(r"global_step=(\d+)", out.stdout)[-1])
    return json.loads((run_dir / "summary.json").read_text()), read_steps(run_dir / "run.db"), global_step


@pytest.mark.slow
def test_the_lightning_callback_profiles_the_fit_with_its_global_steps(tmp_path):
    summary, steps, global_step = _with_callback(
        tmp_path, "fw_lightning.py", "--accumulate", "2", "--max-steps", "24", "--val-every", "10"
    )
    assert summary["steps"] == global_step == 24
    assert summary["step_mode"] == "explicit"  # Lightning's own step boundaries
    assert [s.samples for s in steps] == [32] * 24
    assert [s.step for s in steps if s.eval_ns > 0] == [1, 6, 11, 16, 21]


@pytest.mark.slow
def test_the_hf_trainer_callback_profiles_training_with_its_global_steps(tmp_path):
    summary, steps, global_step = _with_callback(
        tmp_path, "fw_hf_trainer.py", "--gradient_accumulation_steps=2", "--max_steps=24", "--eval_steps=8"
    )
    assert summary["steps"] == global_step == 24
    assert summary["step_mode"] == "explicit"
    assert [(s.samples, s.tokens) for s in steps] == [(16, 512)] * 24
    assert [s.step for s in steps if s.eval_ns > 0] == [9, 17]


def test_the_callbacks_copy_and_pickle_and_import_no_framework_early(tmp_path):
    import copy
    import pickle

    code = (
        "import sys, autotune, autotune.integrations; "
        "assert 'lightning' not in sys.modules and 'transformers' not in sys.modules, 'imported early'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    from autotune.integrations import AutotuneCallback, AutotuneTrainerCallback

    for i, kind in enumerate((AutotuneCallback, AutotuneTrainerCallback)):
        callback = kind(run_dir=tmp_path / f"run{i}", quiet=True)
        callback.region.begin(0)  # a profile is open: a copy or a pickle leaves it behind
        try:
            twin = pickle.loads(pickle.dumps(callback))
            assert twin.region.profile is None and copy.deepcopy(callback).region.profile is None
        finally:
            callback.region.end()
        assert callback.run_dir == tmp_path / f"run{i}" and callback.summary is not None


def _preset_study(tmp_path: Path, preset: str, script: str, *args: str) -> dict:
    run_dir = tmp_path / "study"
    out = subprocess.run(
        [sys.executable, "-m", "autotune", "tune", "--quiet", "--preset", preset, "--trials", "4",
         "--searcher", "grid", "--confirm-rounds", "0", "--run-dir", str(run_dir), "--trial-steps", "20",
         "--warmup-steps", "2", "--min-measured-steps", "6", str(SCRIPTS / script), *args],
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads((run_dir / "summary.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("preset", "script", "args"),
    [
        ("hf", "fw_hf_trainer.py", ("--max_steps=40", "--eval_steps=1000", "--per_device_train_batch_size=4",
                                    "--gradient_accumulation_steps=4")),
        ("lightning", "fw_lightning_cli.py", ("fit", "--trainer.max_steps=40", "--data.batch_size=4",
                                             "--trainer.accumulate_grad_batches=4")),
    ],
)  # fmt: skip
def test_a_preset_tunes_an_unmodified_script_through_its_own_flags_at_its_global_batch(
    tmp_path, preset, script, args
):
    summary = _preset_study(tmp_path, preset, script, *args)
    assert summary["preset"] == preset and summary["preset_per_rank"] == 16  # 4 x 4, the script's own
    assert set(summary["space"]) >= {"micro_batch", "precision"}
    ran = [t for t in summary["trials"] if t["status"] == "ok"]
    assert len(ran) >= 3, [t["error"] for t in summary["trials"]]
    study = tmp_path / "study"
    for trial in ran:
        profile = json.loads((study / trial["run_dir"] / "summary.json").read_text())
        micro = trial["params"].get("micro_batch", 4)
        assert profile["samples_from"]["shape"][0] == micro  # the flag reached the framework
        per_step = profile["throughput"]["samples_per_s"] * profile["step_time_s"]["mean"]
        assert per_step == pytest.approx(16, rel=0.01)  # micro-batch x accumulation, held fixed
        expected = {"fp32": "fp32", "tf32": "fp32", "bf16": "bf16", "fp16": "fp16"}
        assert profile["precision"] == expected[trial["params"].get("precision", "fp32")]
        assert (study / trial["run_dir"] / "framework").is_dir()  # its outputs in its own folder
    assert not (tmp_path / "config.yaml").exists()  # nothing written where the tuner was started
