"""The framework presets: their space and the flags each trial gets."""

from pathlib import Path

from autotune.tuner.presets import preset_args, preset_space


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
