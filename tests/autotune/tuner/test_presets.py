"""The framework presets: their space and the flags each trial gets."""

from pathlib import Path

import pytest

from autotune.presets import preset_args, preset_space


def test_the_hf_preset_splits_the_global_batch_and_maps_precision_to_its_flags():
    space = preset_space("hf", per_rank=24, device_kind="cuda")
    assert space.params["micro_batch"].values() == [1, 2, 4, 8]  # powers of two dividing 24
    assert space.params["precision"].choices == ("fp32", "bf16", "tf32", "fp16")
    params = {"micro_batch": 8, "precision": "bf16", "activation_checkpointing": True}
    assert preset_args("hf", params, 24, Path("/t/framework")) == [
        "--output_dir=/t/framework",
        "--per_device_train_batch_size=8",
        "--gradient_accumulation_steps=3",
        "--bf16",
        "--gradient_checkpointing",
    ]
    cpu = preset_space("hf", per_rank=16, device_kind="cpu")
    assert cpu.params["precision"].choices == ("fp32", "bf16")
    # torch.compile on a GPU only: on a CPU each short trial would spend its time compiling
    assert "compile" not in cpu.params and space.params["compile"].choices == (False, True)
    assert preset_args("hf", {"micro_batch": 24, "compile": True}, 24)[-1] == "--torch_compile"
    assert "--torch_compile" not in preset_args("hf", {"micro_batch": 24, "compile": False}, 24)


def test_the_lightning_preset_uses_the_cli_names_and_no_checkpointing_knob():
    space = preset_space("lightning", per_rank=16, device_kind="cuda")
    assert "activation_checkpointing" not in space.params
    assert space.params["precision"].choices == ("fp32", "bf16", "fp16")
    assert preset_args("lightning", {"micro_batch": 2, "precision": "fp16"}, 16) == [
        "--data.batch_size=2",
        "--trainer.accumulate_grad_batches=8",
        "--trainer.precision=16-mixed",
    ]
    assert preset_args("lightning", {}, 16, Path("d")) == ["--trainer.default_root_dir=d"]  # the baseline


def test_the_hf_preset_on_a_cpu_passes_what_transformers_needs_for_bf16():
    # seen: --bf16 alone on a CPU-only machine: "Your setup doesn't support bf16/gpu ... use_cpu"
    assert preset_args("hf", {"precision": "bf16"}, 8, device_kind="cpu") == ["--bf16", "--use_cpu"]
    assert preset_args("hf", {"precision": "bf16"}, 8, device_kind="cuda") == ["--bf16"]
    assert preset_args("hf", {"precision": "fp32"}, 8, device_kind="cpu") == []


def test_a_precision_the_machine_refuses_is_left_out_of_the_rest_of_the_study(tmp_path):
    from autotune.search import Choice, Int, Space, Study, Trial
    from autotune.search.records import Infeasible
    from autotune.tuner.config import TuneConfig
    from autotune.tuner.trials import TrialSettings
    from autotune.tuner.tune import Tuner, _refuses

    refusal = "ValueError: Your setup doesn't support bf16/gpu. You need to assign use_cpu (exit status 1)"
    assert _refuses(refusal, "bf16") and not _refuses("ValueError: shapes do not match", "bf16")
    assert not _refuses("RuntimeError: torch.compile of this model requires a GPU", "bf16")  # not bf16's
    assert not _refuses(refusal, "fp32") and not _refuses(refusal, "fp16")
    space = Space(micro_batch=Int(1, 8, power_of_two=True), precision=Choice("fp32", "bf16"))
    study = Study(space, searcher="grid", seed=0)
    study.record(Trial(0, {}, "ok", 100.0, {"samples_per_s": 100.0}, 1.0, None, {}, None))
    crashed = {"world_size": 1, "refused_precision": "bf16"}
    params = {"micro_batch": 2, "precision": "bf16"}
    study.record(Trial(1, params, "crashed", None, {}, 1.0, refusal, crashed))
    tuner = Tuner(TuneConfig(settings=TrialSettings(script="no-such-script.py"), space=space), tmp_path)
    tuner.study = study
    with pytest.raises(Infeasible) as skipped:
        tuner._precheck({"micro_batch": 4, "precision": "bf16"})  # not run: it would crash on the script
    assert skipped.value.status == "skipped" and skipped.value.attrs["impossible"] is True
    assert skipped.value.reason == "precision=bf16 is not for this machine: trial 1 was refused it"


def test_the_torchtitan_preset_searches_the_degrees_that_divide_the_ranks():
    space = preset_space("torchtitan", per_rank=4, device_kind="cuda", ranks=8)
    assert "micro_batch" not in space.params  # torchtitan counts its batch in tokens, not samples
    assert space.params["tensor_parallel"].choices == (1, 2, 4, 8)
    assert space.params["pipeline_parallel"].choices == (1, 2, 4, 8)
    assert space.params["cpu_offload"].choices == (False, True)
    assert space.params["precision"].choices == ("fp32", "bf16")
    # 16 ranks: tensor parallel stays within a node's 8 GPUs, pipeline stages may span nodes
    wide = preset_space("torchtitan", per_rank=4, device_kind="cuda", ranks=16)
    assert wide.params["tensor_parallel"].choices == (1, 2, 4, 8)
    assert wide.params["pipeline_parallel"].choices == (1, 2, 4, 8, 16)
    # 6 ranks: degrees 1 and 2 only; on a CPU no offload (no device memory to save)
    six = preset_space("torchtitan", per_rank=4, device_kind="cpu", ranks=6)
    assert six.params["tensor_parallel"].choices == (1, 2) and "cpu_offload" not in six.params
    params = {"tensor_parallel": 4, "pipeline_parallel": 2, "cpu_offload": True, "precision": "bf16"}
    assert preset_args("torchtitan", params, 4, Path("/t/f")) == [
        "--dump_folder=/t/f",
        "--training.mixed_precision_param=bfloat16",
        "--parallelism.tensor_parallel_degree=4",
        "--parallelism.pipeline_parallel_degree=2",
        "--training.enable_cpu_offload",
    ]
    off = preset_args("torchtitan", {"cpu_offload": False}, 4)
    assert off == ["--training.no-enable-cpu-offload"]  # tyro's negative flag: wins over a config's True


def test_a_mesh_that_does_not_divide_the_ranks_is_impossible_and_the_batch_splits_over_replicas():
    from autotune.tuner.tune_checks import batch_split_problem, model_parallel_problem

    assert model_parallel_problem({"tensor_parallel": 2, "pipeline_parallel": 2}, 2) == (
        "tensor_parallel 2 × pipeline_parallel 2 = 4 ranks a replica does not divide the 2 rank(s) of a trial"
    )
    assert model_parallel_problem({"tensor_parallel": 2, "pipeline_parallel": 2}, 8) is None
    assert model_parallel_problem({"tensor_parallel": 4}, 6) is not None
    # 8 ranks at tp 4: 2 replicas, each 16 of the 32 samples: micro-batch 16 fits, 32 does not
    used = {"global_batch": 32}
    assert batch_split_problem({"tensor_parallel": 4, "micro_batch": 16}, used, 8) is None
    assert batch_split_problem({"micro_batch": 16}, used, 8) is not None  # 8 replicas: 4 each
