"""Tuning an unmodified Hugging Face or Lightning script through the framework's own flags.

``autotune tune --preset hf train.py ...`` searches micro-batch, precision, activation
checkpointing and (on a GPU) ``torch.compile`` of a script that parses ``TrainingArguments``
(``HfArgumentParser``), and
``--preset lightning`` those of a ``LightningCLI`` script, and ``--preset torchtitan`` the tensor and
pipeline degrees, FSDP's CPU offload (on a GPU) and the precision of a torchtitan-style script
(``--parallelism.*_degree`` flags) over ``--nproc-per-node`` ranks, without a hand-written space. The global
batch stays the baseline's: its samples per optimizer step (what the script ran with its own
arguments, gradient accumulation included) are split into micro-batch × accumulation, and the
trial's flags are appended after the script's own, so they win; each trial's outputs (checkpoints,
logs, LightningCLI's config.yaml) go to its own folder in the study.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from autotune.knob_values import KnobValues
from autotune.search.space import Choice, Int, Space, Value


@dataclass(frozen=True)
class Preset:
    """How one framework's command line takes each knob."""

    name: str
    batch_flag: str | None  # per-device micro-batch
    accumulation_flag: str | None  # gradient accumulation steps
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
    #: Tensor and pipeline parallel degrees (``--flag=N``), searched over the divisors of the ranks.
    tensor_parallel_flag: str | None = None
    pipeline_parallel_flag: str | None = None
    #: FSDP's CPU offload on and off (searched on GPUs only: a CPU has no device memory to save).
    offload_args: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    #: Every trial, the baseline too, runs under torchrun over the study's ranks.
    distributed: bool = False


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
    # torchtitan's ParallelismConfig and TrainingConfig flags (its config manager, tyro): the data
    # parallel shard degree is left at -1, which takes the ranks the other degrees leave
    "torchtitan": Preset(
        "torchtitan",
        None,
        None,
        {
            "fp32": ("--training.mixed_precision_param=float32",),
            "bf16": ("--training.mixed_precision_param=bfloat16",),
        },
        None,
        "--dump_folder",  # its checkpoints, traces and logs
        tensor_parallel_flag="--parallelism.tensor_parallel_degree",
        pipeline_parallel_flag="--parallelism.pipeline_parallel_degree",
        offload_args=(("--training.enable_cpu_offload",), ("--training.no-enable-cpu-offload",)),
        distributed=True,
    ),
}

#: Tensor parallel stays inside a node: its all-reduces run at every block (Megatron, torchtitan).
MAX_TENSOR_PARALLEL = 8


def degrees(ranks: int, largest: int | None = None) -> list[int]:
    """Powers of two that divide ``ranks`` (at most ``largest``): the degrees a mesh can take."""
    return [
        d for d in (2**e for e in range(ranks.bit_length())) if ranks % d == 0 and d <= (largest or ranks)
    ]


def preset_space(name: str, per_rank: int, device_kind: str, ranks: int = 1) -> Space:
    """The search space of preset ``name`` for a global batch of ``per_rank`` samples per rank.

    ``ranks``: the ranks of a trial, whose divisors the tensor and pipeline degrees take (the
    combinations whose product does not divide them are skipped by the study as impossible).
    """
    preset = PRESETS[name]
    params: dict[str, Int | Choice] = {}
    largest = per_rank & -per_rank  # the largest power of two dividing per_rank
    if largest > 1 and preset.batch_flag is not None:
        params["micro_batch"] = Int(1, largest, power_of_two=True)
    for knob, flag, most in (
        ("tensor_parallel", preset.tensor_parallel_flag, MAX_TENSOR_PARALLEL),
        ("pipeline_parallel", preset.pipeline_parallel_flag, None),
    ):
        values = degrees(ranks, most)
        if flag is not None and len(values) > 1:
            params[knob] = Choice(*values)
    cuda = device_kind == "cuda"
    names = [p for p in preset.precision_args if cuda or p in preset.cpu_precisions]
    if name == "lightning" and "tf32" in names:
        names.remove("tf32")
    params["precision"] = Choice(*names)
    if preset.checkpointing_args is not None:
        params["activation_checkpointing"] = Choice(False, True)
    if preset.compile_args is not None and cuda:
        params["compile"] = Choice(False, True)
    if preset.offload_args is not None and cuda:
        params["cpu_offload"] = Choice(False, True)
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
    knobs = KnobValues.of(params)
    micro = knobs.micro_batch
    if micro is not None and per_rank and preset.batch_flag and preset.accumulation_flag:
        args += [f"{preset.batch_flag}={micro}", f"{preset.accumulation_flag}={max(1, per_rank // micro)}"]
    precision = knobs.precision
    if precision is not None:
        on_cpu = preset.cpu_precision_args.get(precision) if device_kind == "cpu" else None
        args += list(on_cpu if on_cpu is not None else preset.precision_args.get(precision, ()))
    if knobs.activation_checkpointing and preset.checkpointing_args:
        args += list(preset.checkpointing_args)
    if knobs.compile and preset.compile_args:
        args += list(preset.compile_args)
    for degree, flag in (
        (knobs.tensor_parallel, preset.tensor_parallel_flag),
        (knobs.pipeline_parallel, preset.pipeline_parallel_flag),
    ):
        if flag is not None and degree is not None:
            args.append(f"{flag}={degree}")
    if knobs.cpu_offload is not None and preset.offload_args is not None:
        args += list(preset.offload_args[0 if knobs.cpu_offload else 1])
    return args
