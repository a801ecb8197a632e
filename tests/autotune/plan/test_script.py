"""``autotune plan SCRIPT``: an unmodified script traced under fake tensors, checked against real runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.plan.script import ScriptError, per_micro_batch, run_child, step_model, trace_script
from autotune.plan.trace import GEMM

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = ROOT / "tests" / "scripts"
LM = str(SCRIPTS / "plan_lm.py")
CNN = str(SCRIPTS / "plan_cnn.py")


@pytest.mark.slow
def test_the_traced_step_is_the_allocators_own_peak_of_the_real_step():
    # the same script run for real, its second step measured by the CPU allocator (torch.profiler
    # profile_memory): what the fake-tensor trace says the step allocates at its peak
    traced = trace_script(LM, ["--batch", "8"])
    measured = run_child(LM, ["--batch", "8"], measure=True)["measured_step_peak_bytes"]
    assert measured > 1_000_000  # a real step was measured
    assert traced.step_new_peak_bytes == pytest.approx(measured, rel=0.01)
    assert traced.micro_batch == 8 and traced.accumulation == 1
    assert traced.tokens_per_sample == 32
    assert traced.model_class == "TinyGPT"
    # the NaN guard read false (the step was not skipped) and loss.item() got a stand-in
    assert traced.figures.memory_by_category["gradients"] > 0
    assert traced.scalar_stand_ins >= 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "args", "micro_batch", "accumulation", "tolerance"),
    [
        # rows of a TensorDataset are views of tensors made before the step: no allocation
        ("plan_cnn.py", ["--workers", "0"], 16, 1, 0.01),
        # no optimizer: a backward and a hand-written update are a step
        ("loop_manual_sgd.py", ["--steps", "4"], 64, 1, 0.01),
        # Lightning: forward and backward inside optimizer.step(closure), accumulation 2, validation
        ("fw_lightning.py", [], 16, 2, 0.01),
        # Hugging Face Trainer: keyword inputs, accumulation 2. Seeing fake tensors, transformers
        # builds an explicit causal mask it skips on real ones, and clip_grad_norm_ goes tensor by
        # tensor instead of foreach: +1.2% (the mask's share of the attention's saved tensors)
        ("fw_hf_trainer.py", [], 8, 2, 0.02),
    ],
)
def test_frameworks_and_loops_trace_what_the_allocator_measures(
    script, args, micro_batch, accumulation, tolerance
):
    path = str(SCRIPTS / script)
    traced = trace_script(path, args)
    measured = run_child(path, args, measure=True)["measured_step_peak_bytes"]
    assert measured > 10_000
    assert traced.step_new_peak_bytes == pytest.approx(measured, rel=tolerance)
    assert (traced.micro_batch, traced.accumulation) == (micro_batch, accumulation)


@pytest.mark.slow
def test_one_traced_micro_batch_predicts_another():
    # memory and FLOPs at micro-batch 16 scaled from a trace at 4, against a trace at 16
    small = step_model(trace_script(LM, ["--batch", "4"]))
    big = trace_script(LM, ["--batch", "16"]).figures
    assert small.memory_bytes(16, gpu=False) == pytest.approx(big.peak_bytes, rel=0.05)
    assert small.flops[GEMM].at(16) == pytest.approx(big.flops_by_class[GEMM], rel=0.01)
    # the model's kernels do not grow with the batch; the script's per-row data ops do: a start
    # read and sliced per row (212 scaled against 236 traced, the optimizer run foreach)
    assert 0 < big.ops - small.ops.at(16) <= 3 * (16 - 4)


@pytest.mark.slow
def test_accumulated_micro_batches_are_one_micro_batch_and_one_update():
    once = trace_script(LM, ["--batch", "4"])
    twice = trace_script(LM, ["--batch", "4", "--accum", "2"])
    assert twice.accumulation == 2 and twice.micro_batch == 4
    assert twice.figures.flops == pytest.approx(2 * once.figures.flops, rel=0.05)  # two forwards+backwards
    assert per_micro_batch(twice).flops == pytest.approx(once.figures.flops, rel=0.01)
    # the next micro-batch's data, read between the two, is the micro-batch's, not the optimizer's
    assert per_micro_batch(twice).optimizer_bytes == pytest.approx(once.figures.optimizer_bytes, rel=0.001)
    assert per_micro_batch(twice).optimizer_ops == once.figures.optimizer_ops
    # a pipeline's sides are the first forward's (the embedding before the blocks, the head after)
    sides = once.figures.sides
    assert sides.pre_flops == 0 < sides.pre_bytes and 0 < sides.post_flops < sides.flops
    assert twice.figures.sides == sides
    assert (
        once.units.block_count >= 2 and once.units.pre_blocks_bytes > 0 and once.units.post_blocks_bytes > 0
    )


@pytest.mark.slow
def test_precision_and_checkpointing_reach_the_unmodified_model():
    plain = trace_script(LM, ["--batch", "8", "--layers", "3"])
    bf16 = trace_script(LM, ["--batch", "8", "--layers", "3"], precision="bf16")
    ckpt = trace_script(LM, ["--batch", "8", "--layers", "3"], checkpointing=True)
    assert plain.figures.precision == "fp32" and set(plain.figures.dtype_flops) == {"float32"}
    assert bf16.figures.precision == "bf16"
    assert bf16.figures.dtype_flops["bfloat16"] > 0.9 * sum(bf16.figures.dtype_flops.values())
    assert ckpt.figures.checkpointing
    activations = plain.figures.memory_by_category["activations"]
    assert ckpt.figures.memory_by_category["activations"] < 0.6 * activations
    assert ckpt.figures.flops > plain.figures.flops  # the forward runs again in the backward


@pytest.mark.slow
def test_a_dataloader_with_worker_processes_feeds_the_fake_model():
    traced = trace_script(CNN, ["--batch", "16", "--workers", "2"])
    assert traced.micro_batch == 16
    assert traced.tokens_per_sample is None  # images, not token ids
    assert traced.figures.flops_by_class[GEMM] > 0


def _plan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autotune", "plan", *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip


@pytest.mark.slow
def test_plan_prints_every_configuration_of_a_script_as_json():
    out = _plan("--gpu", "H100-SXM", "--gpu", "T4", "--tokens", "1000000", "--format", "json", LM,
                "--batch", "8")  # fmt: skip
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    config = data["configs"][0]
    assert set(config) >= {"gpu", "gpus", "params", "peak_memory_bytes", "memory_by_category", "fits",
                           "step_time_s", "samples_per_s", "tokens_per_s", "usd_per_million_samples",
                           "usd_per_million_tokens", "usd_total"}  # fmt: skip
    assert data["model"]["micro_batch"] == 8 and data["model"]["tokens_per_sample"] == 32
    micro = sorted({c["params"]["micro_batch"] for c in data["configs"]})
    assert micro == [1, 2, 4, 8]  # the powers of two that split the script's own global batch of 8
    # 1M tokens at 32 per sample are 31,250 samples
    assert config["usd_total"] == pytest.approx(config["usd_per_million_samples"] * 31_250 / 1e6)
    assert any("stand-in" in note for note in data["notes"])


@pytest.mark.slow
def test_a_script_that_fails_before_its_second_step_is_one_line():
    with pytest.raises(ScriptError, match=r"cannot trace .*plan_lm.py: RuntimeError: the data ran out"):
        trace_script(LM, ["--fail-at", "1"])
    out = _plan(LM, "--fail-at", "1")
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0 and "the data ran out" in out.stderr
    out = _plan(LM, "--steps", "1")
    assert out.returncode == 1 and "needs 2" in out.stderr
    out = _plan("no_such_script.py")
    assert out.returncode == 2 and "no such script" in out.stderr
    out = _plan("--demo", "gpt", LM)
    assert out.returncode == 2 and "or --demo" in out.stderr


_NO_STEP_SCRIPT = """
import torch
model = torch.nn.Linear(16, 4)
{optimizer}
for _ in range(3):
    loss = torch.nn.functional.cross_entropy(model(torch.randn(8, 16)), torch.randint(0, 4, (8,)))
    loss.backward()
    {update}
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("optimizer", "update", "why"),
    [
        ("", "", "it makes no optimizer and does not update its parameters"),
        ("opt = torch.optim.SGD(model.parameters(), lr=0.1)", "opt.zero_grad()",
         "it builds an optimizer but never calls its step()"),
    ],
)  # fmt: skip
def test_a_script_without_an_optimizer_step_is_refused_in_one_line(tmp_path, optimizer, update, why):
    """A backward and no update (no optimizer, or one never stepped) is no training step to plan:
    one line saying so, exit 2, instead of a plan of 96 configurations."""
    script = tmp_path / "no_step.py"
    script.write_text(_NO_STEP_SCRIPT.format(optimizer=optimizer, update=update))
    out = _plan(str(script))
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr
    assert out.stdout == "" and out.stderr.strip().count("\n") == 0, out.stderr
    assert f"no_step.py: no optimizer step: {why}" in out.stderr
    # the same script updating by hand is a step
    by_hand = "with torch.no_grad():\n        model.weight -= 0.1 * model.weight.grad"
    script.write_text(_NO_STEP_SCRIPT.format(optimizer="", update=by_hand))
    out = _plan("--format", "json", str(script))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["model"]["micro_batch"] == 8


@pytest.mark.slow
def test_an_option_after_the_script_names_the_scripts_own_error_and_where_it_goes():
    """`autotune plan train.py --top 8`: the option goes to the script, whose argparse refuses it;
    the one line carries the script's own error first and says where plan's options go."""
    out = _plan(LM, "--top", "8", "--checkpointing")
    assert out.returncode == 1 and out.stderr.strip().count("\n") == 0, out.stderr
    line = out.stderr.strip()
    assert "plan_lm.py: error: unrecognized arguments: --top 8 --checkpointing" in line
    assert "(the script exited (2) before its second optimizer step)" in line
    assert line.endswith(f"(autotune plan --top 8 --checkpointing {LM} ...)")


@pytest.mark.slow
def test_a_global_batch_that_does_not_split_over_the_gpus_names_global_batch():
    """The script's own global batch of 1 over 8 GPUs: said after its first trace, naming the
    option that fixes it; a --global-batch that cannot split is refused before any trace."""
    out = _plan("--gpus", "8", LM, "--batch", "1")
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0, out.stderr
    assert "global batch of 1 (micro-batch 1 × 1 accumulated) does not split over 8 GPUs" in out.stderr
    assert out.stderr.strip().endswith("give --global-batch, a multiple of 8")
    out = _plan("--gpus", "8", "--global-batch", "12", LM)
    assert out.returncode == 2 and "--global-batch 12 does not split over --gpus 8" in out.stderr


OPTIMIZERS = str(SCRIPTS / "plan_optimizers.py")
MLP_BYTES = 4 * 8_396_800  # fp32 parameters: what a foreach AdamW step holds one more copy of
LOOP_BYTES = 2 * 4 * 1024 * 1024  # two intermediates of one 1024 × 1024 weight: the loop's


@pytest.mark.slow
@pytest.mark.parametrize(
    ("implementation", "temporaries", "noted"),
    [
        ("default", MLP_BYTES, True),  # left to choose: planned as on a GPU (foreach), and said
        ("foreach", MLP_BYTES, False),  # asked for (it failed: a step counter read 0)
        ("loop", LOOP_BYTES, False),  # foreach=False: the loop, as written
        ("fused", 0, False),  # one kernel per parameter, no intermediate
    ],
)
def test_the_optimizer_is_planned_as_the_gpu_runs_it(implementation, temporaries, noted):
    """AdamW's step holds intermediates: a whole group's with foreach (torch's CUDA default: a copy
    of the parameters, 32 MiB here), one parameter's in the loop (its CPU default: 2 × 4 MiB), none
    fused. The trace and the allocator's own measurement of the same step agree, both running the
    optimizer as the plan does."""
    args = ["--implementation", implementation]
    traced = trace_script(OPTIMIZERS, args)
    held = traced.figures.memory_by_category["temporaries"]
    assert held == pytest.approx(temporaries, rel=0.01, abs=64 * 1024)
    assert any("foreach (torch's CUDA default" in n for n in traced.untrusted) is noted
    measured = run_child(OPTIMIZERS, args, measure=True)["measured_step_peak_bytes"]
    assert traced.step_new_peak_bytes == pytest.approx(measured, rel=0.01)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_a_model_cast_with_to_is_traced_in_its_dtype(dtype):
    """``model.to(torch.bfloat16)`` under fake tensors failed ('Couldn't swap Linear.weight')."""
    traced = trace_script(OPTIMIZERS, ["--cast", dtype])
    assert traced.figures.memory_by_category["parameters"] == pytest.approx(MLP_BYTES / 2, rel=0.01)
    assert traced.figures.precision == dtype


@pytest.mark.slow
def test_a_transform_module_before_the_model_is_not_the_model():
    """A parameterless transform module the DataLoader calls in the main process comes first; the
    plan's model is the network that has parameters to train (it was the transform)."""
    traced = trace_script(str(SCRIPTS / "loop_module_transform.py"), ["--steps", "4"])
    assert traced.model_class == "SmallConvNet" and traced.micro_batch == 16


@pytest.mark.slow
def test_attention_with_dropout_is_planned_as_the_gpus_fused_kernel():
    """On a CPU, SDPA with dropout falls back to its math path (the score matrix and the mask kept
    for the backward: over 1.3 times this step's peak at sequence 512); a GPU's flash kernel takes
    dropout inside. The plan traces the kernel the GPU runs: the same activations as without
    dropout, and a note saying so."""
    shape = ["--width", "128", "--layers", "2", "--seq", "512"]
    plain = trace_script(LM, [*shape, "--dropout", "0"])
    dropout = trace_script(LM, [*shape, "--dropout", "0.1"])
    activations = plain.figures.memory_by_category["activations"]
    assert dropout.figures.memory_by_category["activations"] == activations
    assert any("attention with dropout traced as a GPU runs it" in note for note in dropout.untrusted)
    assert not any("attention with dropout" in note for note in plain.untrusted)
    # the CPU's own math path, measured for real, holds far more: what the plan does not plan for
    measured = run_child(LM, [*shape, "--dropout", "0.1"], measure=True)["measured_step_peak_bytes"]
    assert measured > plain.step_new_peak_bytes * 1.3 > dropout.step_new_peak_bytes


CTC = str(SCRIPTS / "plan_ctc.py")


@pytest.mark.slow
def test_data_dependent_ops_run_for_real_on_their_small_inputs():
    """A CTC script: masked_select of the labels and ctc_loss with tensor lengths cannot be sized
    from shapes. They run for real on their inputs (the labels' real twins, zeros for the log
    probabilities), the plan says so, and the traced step is the allocator's own within 5%."""
    trace = trace_script(CTC, [])
    notes = " ".join(trace.untrusted)
    assert "masked_select (output size from its values) run for real" in notes
    assert "_ctc_loss (output size from its values) run for real" in notes
    measured = run_child(CTC, [], measure=True)["measured_step_peak_bytes"]
    assert trace.step_new_peak_bytes == pytest.approx(measured, rel=0.05)


def test_a_data_dependent_op_on_large_inputs_is_taken_at_its_largest():
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from autotune.plan.stand_in import REAL_RUN_BYTES, ScalarStandIn

    stand_in = ScalarStandIn()
    with FakeTensorMode(), stand_in:
        x = torch.randn(4096, 4097)  # 64 MiB and more, no real twin
        assert x.numel() * 4 > REAL_RUN_BYTES
        picked = torch.masked_select(x, x > 0)
        where = torch.nonzero(x)
        values, inverse = torch.unique(x, return_inverse=True)
    assert picked.shape == (4096 * 4097,) and where.shape == (4096 * 4097, 2)
    assert values.shape == (4096 * 4097,) and inverse.shape == x.shape
    assert stand_in.data_dependent == {"masked_select": [0, 1], "nonzero": [0, 1], "_unique2": [0, 1]}
    note = "masked_select (output size from its values) taken at its largest size 1 time(s)"
    assert note in stand_in.notes()


@pytest.mark.slow
def test_a_fake_tensor_read_as_a_numpy_array_gets_zeros_of_its_shape():
    """Feature extraction in the main process (a DataLoader without workers, Whisper's extractor):
    ``tensor.numpy()`` of a fake tensor. It gets zeros of its shape, the plan says so, and the step
    is the one with the features made by torch, less the features themselves (a host tensor made
    from NumPy, which the trace sees once the script moves it to a device; this one stays put)."""
    with_numpy = trace_script(CTC, ["--numpy-features"])
    plain = trace_script(CTC, [])
    assert any("read as NumPy arrays (tensor.numpy()) got zeros" in note for note in with_numpy.untrusted)
    assert with_numpy.figures.flops == plain.figures.flops
    features_bytes = 8 * 200 * 40 * 4
    assert plain.figures.peak_bytes - with_numpy.figures.peak_bytes == pytest.approx(features_bytes, abs=512)


@pytest.mark.slow
def test_the_scripts_error_comes_before_what_python_prints_at_exit():
    with pytest.raises(ScriptError, match=r"ValueError: bad sample at step 1$"):
        trace_script(str(SCRIPTS / "loop_del_at_exit.py"), [])


def test_pinning_a_fake_batch_is_a_host_copy():
    """A DataLoader with pin_memory=True pins each batch on a CUDA machine: ``aten._pin_memory`` has no
    fake-tensor rule (the demo's plan prior failed on an H200 with "NYI: aten._pin_memory.default").
    The stand-in copies it, keeps its real twin, and says it is pinned."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    from autotune.plan.stand_in import ScalarStandIn

    with FakeTensorMode(allow_non_fake_inputs=True), ScalarStandIn():
        batch = torch.arange(6)
        pinned = batch.pin_memory()
        total = pinned.sum().item()
        assert isinstance(pinned, FakeTensor) and pinned.is_pinned()
    assert pinned.shape == batch.shape and pinned.dtype == batch.dtype
    assert total == 15  # the real twin came along: the loop reads what it would


def test_a_script_given_relatively_is_traced_in_the_directory_it_belongs_to(tmp_path, monkeypatch):
    # a resumed study's plan prior traces its script where the study began (TrialSettings.workdir)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScriptError):
        trace_script("plan_lm.py", ["--batch", "4", "--width", "32"])
    trace = trace_script("plan_lm.py", ["--batch", "4", "--width", "32"], cwd=str(SCRIPTS))
    assert trace.micro_batch == 4
