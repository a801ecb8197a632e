"""Tuning an unmodified Hugging Face or Lightning script through the framework's own flags.

``autotune tune --preset hf train.py ...`` searches micro-batch, precision, activation
checkpointing and (on a GPU) ``torch.compile`` of a script that parses ``TrainingArguments``
(``HfArgumentParser``), and
``--preset lightning`` those of a ``LightningCLI`` script, without a hand-written space. The global
batch stays the baseline's: its samples per optimizer step (what the script ran with its own
arguments, gradient accumulation included) are split into micro-batch × accumulation, and the
trial's flags are appended after the script's own, so they win; each trial's outputs (checkpoints,
logs, LightningCLI's config.yaml) go to its own folder in the study.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from autotune.tuner.space import Choice, Int, Space, Value


@dataclass(frozen=True)
class Preset:
    """How one framework's command line takes each knob."""

    name: str
    batch_flag: str  # per-device micro-batch
    accumulation_flag: str  # gradient accumulation steps
    precision_args: Mapping[str, tuple[str, ...]]  # precision -> its flags (CPU ones first)
    checkpointing_args: tuple[str, ...] | None  # activation checkpointing on
    #: Where the framework writes its outputs (config, checkpoints, logs): each trial its own.
    output_flag: str = ""
    cpu_precisions: tuple[str, ...] = ("fp32", "bf16")
    #: torch.compile on (searched on GPUs only: on a CPU every trial would spend its time compiling).
    compile_args: tuple[str, ...] | None = None
    #: A precision's flags on a machine without a GPU, where they differ (transformers refuses --bf16
    #: there without --use_cpu: "Your setup doesn't support bf16/gpu").
    cpu_precision_args: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


PRESETS: dict[str, Preset] = {
    # transformers.TrainingArguments, parsed by HfArgumentParser
    "hf": Preset(
        "hf",
        "--per_device_train_batch_size",
        "--gradient_accumulation_steps",
        {"fp32": (), "bf16": ("--bf16",), "tf32": ("--tf32=true",), "fp16": ("--fp16",)},
        ("--gradient_checkpointing",),
        "--output_dir",
        compile_args=("--torch_compile",),
        cpu_precision_args={"bf16": ("--bf16", "--use_cpu")},
    ),
    # lightning.pytorch.cli.LightningCLI: a DataModule with a batch_size argument
    "lightning": Preset(
        "lightning",
        "--data.batch_size",
        "--trainer.accumulate_grad_batches",
        {
            "fp32": ("--trainer.precision=32-true",),
            "bf16": ("--trainer.precision=bf16-mixed",),
            "tf32": ("--trainer.precision=32-true",),  # TF32 matmuls are the script's own setting
            "fp16": ("--trainer.precision=16-mixed",),
        },
        None,
        # LightningCLI saves its config.yaml there and refuses to overwrite one
        "--trainer.default_root_dir",
    ),
}


def preset_space(name: str, per_rank: int, device_kind: str) -> Space:
    """The search space of preset ``name`` for a global batch of ``per_rank`` samples per rank."""
    preset = PRESETS[name]
    params: dict[str, Int | Choice] = {}
    largest = per_rank & -per_rank  # the largest power of two dividing per_rank
    if largest > 1:
        params["micro_batch"] = Int(1, largest, power_of_two=True)
    cuda = device_kind == "cuda"
    names = [p for p in preset.precision_args if cuda or p in preset.cpu_precisions]
    if name == "lightning" and "tf32" in names:
        names.remove("tf32")
    params["precision"] = Choice(*names)
    if preset.checkpointing_args is not None:
        params["activation_checkpointing"] = Choice(False, True)
    if preset.compile_args is not None and cuda:
        params["compile"] = Choice(False, True)
    return Space(**params)


def preset_args(
    name: str,
    params: Mapping[str, Value],
    per_rank: int | None,
    output_dir: Path | None = None,
    device_kind: str | None = None,
) -> list[str]:
    """The flags one trial appends to the script's own arguments (the baseline too: its outputs).

    ``device_kind`` "cpu": the flags a machine without a GPU needs (the baseline ran there).
    """
    preset = PRESETS[name]
    args: list[str] = [f"{preset.output_flag}={output_dir}"] if output_dir is not None else []
    micro = params.get("micro_batch")
    if isinstance(micro, int) and per_rank:
        args += [f"{preset.batch_flag}={micro}", f"{preset.accumulation_flag}={max(1, per_rank // micro)}"]
    precision = params.get("precision")
    if isinstance(precision, str):
        on_cpu = preset.cpu_precision_args.get(precision) if device_kind == "cpu" else None
        args += list(on_cpu if on_cpu is not None else preset.precision_args.get(precision, ()))
    if params.get("activation_checkpointing") is True and preset.checkpointing_args:
        args += list(preset.checkpointing_args)
    if params.get("compile") is True and preset.compile_args:
        args += list(preset.compile_args)
    return args
