"""Model parallelism in the plan: tensor and pipeline parallel, CPU offload, a step's phases, and the
suggestion of what fits when nothing does."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from torch import nn

from autotune.demo.plan import demo_workload
from autotune.plan.fsdp_units import NO_UNITS, FsdpUnits
from autotune.plan.gpus import gpu_spec
from autotune.plan.layouts import Layout, layouts_for
from autotune.plan.model import EFFICIENCY, StepModel
from autotune.plan.plan import NOTHING_FIT_WITHOUT_CHECKPOINTING, plan
from autotune.plan.script import scaled
from autotune.plan.step import fsdp_units, trace_step
from autotune.plan.trace import ATTENTION
from profilers.hardware.gpus import HOPPER_ATTENTION_SCALE
from tests.autotune.report.conftest import autotune

#: The expected efficiencies with a host that issues ops in no time: the GPU's side of a step alone.
GPU_SIDE = dataclasses.replace(EFFICIENCY[1], host_us_per_op=0.0)

GPT = demo_workload("gpt")[:4]


class Stack(nn.Module):
    """Repeated square layers in a ModuleList: blocks to split, with almost no activations."""

    def __init__(self, layers: int, width: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def stack_workload(layers: int, width: int) -> tuple:
    def batch(b: int) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        return (torch.randn(b, width),), torch.randn(b, width)

    def adamw(params: list[nn.Parameter]) -> torch.optim.Optimizer:
        return torch.optim.AdamW(params, foreach=True)

    return (lambda: Stack(layers, width)), batch, nn.functional.mse_loss, adamw


@pytest.fixture(scope="module")
def gpt_bf16() -> StepModel:
    a, b = (trace_step(*GPT, m, "bf16", False) for m in (1, 8))
    return StepModel.fit(a, b)


def test_the_tensor_between_blocks_is_read_from_the_trace(gpt_bf16):
    cfg = GPT[0]()
    d_model, seq = cfg.cfg.d_model, cfg.cfg.seq_len
    assert gpt_bf16.blocks == len(cfg.blocks) >= 2
    assert gpt_bf16.block_io.at(4) == pytest.approx(4 * seq * d_model)


def test_tensor_parallel_splits_weights_state_and_activations_and_pays_its_all_reduces(gpt_bf16):
    """Megatron-style with sequence parallelism: everything a block holds is split tp ways; each
    block all-reduces its output twice in the forward and twice in the backward (bf16, ring)."""
    h100 = gpu_spec("H100-SXM")
    one = Layout("single", 1)
    tp2 = Layout("single", 2, tp=2)
    for phase in gpt_bf16.phases:
        full = gpt_bf16.memory_by_category(4, gpu=True, phase=phase)
        split = tp2._phase(gpt_bf16, 4, phase, None)
        for key in ("parameters", "gradients", "optimizer_state", "parameter_casts", "activations",
                    "temporaries"):  # fmt: skip
            assert split[key] == pytest.approx(full[key] / 2, abs=1), (phase, key)
        assert split["framework_reserve"] == full["framework_reserve"]
    volume = 4 * gpt_bf16.block_io.at(4) * 2  # bytes of the block's output in bf16
    expected = 4 * gpt_bf16.blocks * 2 * (1 / 2) * volume / 4 / (h100.sheet.link_gb_s * 1e9)
    assert tp2.tp_comm_s(h100, gpt_bf16, 4) == pytest.approx(expected)
    micro_s, opt_s = gpt_bf16.micro_and_optimizer_s(h100, 4, GPU_SIDE)
    assert tp2.step_s(h100, gpt_bf16, 4, 1, GPU_SIDE) == pytest.approx(micro_s / 2 + expected + opt_s / 2)
    assert one.step_s(h100, gpt_bf16, 4, 1, GPU_SIDE) == pytest.approx(micro_s + opt_s)


def test_a_pipeline_holds_a_stage_and_the_micro_batches_in_flight_and_pays_its_bubble(gpt_bf16):
    h100 = gpu_spec("H100-SXM")
    pp2 = Layout("single", 2, pp=2)
    full = gpt_bf16.memory_by_category(4, gpu=True, phase="backward")
    alone = pp2._phase(gpt_bf16, 4, "backward", 1)  # one micro-batch: half the layers' activations
    in_flight = pp2._phase(gpt_bf16, 4, "backward", 8)  # 1F1B: two in flight on the first stage
    assert alone["parameters"] == pytest.approx(full["parameters"] / 2, abs=1)
    assert alone["activations"] == pytest.approx(full["activations"] / 2, abs=1)
    assert in_flight["activations"] == pytest.approx(full["activations"], abs=1)
    micro_s, opt_s = gpt_bf16.micro_and_optimizer_s(h100, 4, GPU_SIDE)
    send = pp2.pp_comm_s(h100, gpt_bf16, 4)
    assert send == pytest.approx(2 * gpt_bf16.block_io.at(4) * 2 / (h100.sheet.link_gb_s * 1e9))
    # a slot is the busiest stage's work: one of the two blocks and the head's side (its GEMM, the loss)
    flops_per_s = h100.peak.tflops("bf16") * 1e12 * h100.sheet.compute_scale * GPU_SIDE.gemm
    pre, post = gpt_bf16.sides.shares(flops_per_s, h100.sheet.bandwidth_gb_s * 1e9 * GPU_SIDE.memory)
    assert gpt_bf16.blocks == 2 and post > pre > 0
    share = gpt_bf16.stage_share(h100, GPU_SIDE, 2)
    assert share == pytest.approx((1 - pre - post) / 2 + post)
    for m in (1, 8):  # (M + p - 1) slots of a stage's work each: the bubble is (p-1)/(M+p-1)
        expected = (m + 1) * (micro_s * share + send) + opt_s / 2
        assert pp2.step_s(h100, gpt_bf16, 4, m, GPU_SIDE) == pytest.approx(expected)


def test_attention_runs_at_its_own_share_of_a_hoppers_peak():
    """Flash attention reaches less of an H100's peak than its GEMMs (Hopper's two fitted scales);
    an A100 has one share for both. A sequence of 2048, where attention is bound by its FLOPs."""
    from autotune.demo.models import GPTConfig

    cfg = GPTConfig(vocab_size=512, seq_len=2048, d_model=256, n_layers=2, n_heads=4)
    long = demo_workload("gpt", cfg)[:4]
    gpt_bf16 = StepModel.fit(*(trace_step(*long, m, "bf16", False) for m in (1, 2)))
    h100, a100 = gpu_spec("H100-SXM"), gpu_spec("A100-80GB")
    assert h100.sheet.attention_compute_scale == HOPPER_ATTENTION_SCALE < h100.sheet.compute_scale
    assert a100.sheet.attention_compute_scale == a100.sheet.compute_scale == 1.0
    one_scale = dataclasses.replace(h100, sheet=dataclasses.replace(h100.sheet, attention_scale=None))
    micro = 4
    flops, moved = gpt_bf16.flops[ATTENTION].at(micro), gpt_bf16.moved[ATTENTION].at(micro)
    peak = h100.peak.tflops("bf16") * 1e12 * GPU_SIDE.attention
    bytes_s = moved / (h100.sheet.bandwidth_gb_s * 1e9 * GPU_SIDE.memory)
    slower = max(flops / (peak * HOPPER_ATTENTION_SCALE), bytes_s) - max(
        flops / (peak * h100.sheet.compute_scale), bytes_s
    )
    assert slower > 0  # this step's attention is bound by its FLOPs
    with_own = gpt_bf16.micro_and_optimizer_s(h100, micro, GPU_SIDE)[0]
    assert with_own - gpt_bf16.micro_and_optimizer_s(one_scale, micro, GPU_SIDE)[0] == pytest.approx(slower)


def test_a_gpipe_schedule_holds_every_micro_batch_in_flight_with_1f1bs_bubble(gpt_bf16):
    """GPipe (torch.distributed.pipelining's ScheduleGPipe) runs every forward before the first
    backward: its first stage holds all M micro-batches' share of the activations, where 1F1B holds
    at most pp of them; both take M + pp - 1 slots."""
    h100 = gpu_spec("H100-SXM")
    one_f_one_b = Layout("single", 2, pp=2)
    gpipe = Layout("single", 2, pp=2, schedule="gpipe")
    assert (one_f_one_b.label, gpipe.label) == ("pp2", "pp2-gpipe")
    full = gpt_bf16.memory_by_category(4, gpu=True, phase="backward")["activations"]
    for m, held_1f1b in ((1, 1), (2, 2), (8, 2)):
        assert one_f_one_b._phase(gpt_bf16, 4, "backward", m)["activations"] == pytest.approx(
            full * held_1f1b / 2, abs=1
        )
        assert gpipe._phase(gpt_bf16, 4, "backward", m)["activations"] == pytest.approx(full * m / 2, abs=1)
        assert gpipe.step_s(h100, gpt_bf16, 4, m, GPU_SIDE) == one_f_one_b.step_s(
            h100, gpt_bf16, 4, m, GPU_SIDE
        )
    assert gpipe.largest_micro_batch(gpt_bf16, 4e9, 8) < one_f_one_b.largest_micro_batch(gpt_bf16, 4e9, 8)
    assert Layout("single", 1, schedule="gpipe")._phase(gpt_bf16, 4, "backward", 8)["activations"] == full
    labels = {x.label for x in layouts_for(4, 1, NO_UNITS, blocks=4, pp_schedule="gpipe")}
    assert {"pp4-gpipe", "ddp2+pp2-gpipe", "fsdp", "fsdp2+tp2"} <= labels


def test_the_command_line_plans_the_pipeline_schedule_it_is_given():
    def pipeline_rows(*extra: str) -> tuple[dict[tuple, int], list[str]]:
        out = autotune(
            "plan", "--demo", "gpt", "--gpu", "H100-SXM", "--gpus", "2", "--format", "json", *extra
        )
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        rows = {
            (c["params"]["micro_batch"], c["params"]["grad_accum"], c["params"]["precision"]): c[
                "peak_memory_bytes"
            ]
            for c in doc["configs"]
            if c["params"]["degrees"]["pp"] == 2
        }
        return rows, [c["params"]["layout"] for c in doc["configs"] if c["params"]["degrees"]["pp"] == 2]

    one_f_one_b, labels = pipeline_rows()
    gpipe, gpipe_labels = pipeline_rows("--pp-schedule", "gpipe")
    assert set(labels) == {"pp2"} and set(gpipe_labels) == {"pp2-gpipe"}
    assert one_f_one_b.keys() == gpipe.keys()
    for key, bytes_1f1b in one_f_one_b.items():  # more micro-batches in flight than stages: more held
        assert (gpipe[key] > bytes_1f1b) if key[1] > 2 else (gpipe[key] == bytes_1f1b), key
    bad = autotune("plan", "--demo", "gpt", "--pp-schedule", "zero-bubble")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr and "Traceback" not in bad.stderr


def test_the_forwards_work_before_and_after_the_blocks_is_the_embeddings_and_the_heads():
    """The traced sides: an embedding lookup moves bytes and multiplies nothing; the head's GEMM is
    2 × tokens × width × vocabulary FLOPs, counted after the last block."""
    micro = 4
    traced = trace_step(*GPT, micro, "bf16", False)
    cfg = GPT[0]().cfg
    head_flops = 2 * micro * cfg.seq_len * cfg.d_model * cfg.vocab_size
    assert traced.sides.pre_flops == 0 and traced.sides.pre_bytes > 0
    assert traced.sides.post_flops == head_flops
    # the forward's FLOPs: a third of the forward's and backward's (a GEMM's backward is two GEMMs)
    assert 3 * traced.sides.flops == pytest.approx(traced.flops - traced.optimizer_flops, rel=0.05)


def test_the_blocks_first_training_forward_is_watched_not_an_evaluation_before_it():
    """A script's evaluation before its step (eval mode, or no_grad on plain inputs) is not what a
    pipeline stage runs; a reentrant checkpoint's forward (no_grad on inputs needing gradients) is."""
    from torch.utils.checkpoint import checkpoint

    from autotune.demo.models import GPTConfig, TinyGPT
    from autotune.plan.blocks import BlockWatch

    model = TinyGPT(GPTConfig(vocab_size=64, seq_len=8, d_model=16, n_layers=2, n_heads=2))
    watch, ops = BlockWatch(model), []
    watch.watch(ops)
    idx = torch.randint(0, 64, (2, 8))
    model.eval()
    model(idx)
    model.train()
    with torch.no_grad():
        model(idx)
    assert (watch.first_in, watch.last_out) == (None, None)
    ops.extend(range(5))  # the step's first ops, before its blocks
    x = model.tok_emb(idx) + model.pos_emb(torch.arange(8))
    for block in model.blocks:
        x = checkpoint(block, x, use_reentrant=True)
    assert (watch.first_in, watch.last_out) == (5, 5)
    watch.remove()


def test_a_pipelines_busiest_stage_holds_its_blocks_and_the_larger_side_of_the_root():
    """A GPT with its head tied to its embedding: both the first and the last stage hold that
    weight (as Megatron-LM's embedding group does); 3 blocks on 2 stages put 2 on one."""
    from autotune.demo.models import GPTConfig, TinyGPT

    cfg = GPTConfig(vocab_size=1000, seq_len=64, d_model=32, n_layers=3, n_heads=2)
    units = fsdp_units(lambda: TinyGPT(cfg))
    embedding, positions = 4 * 1000 * 32, 4 * 64 * 32
    norm = 4 * 2 * 32
    assert units.pre_blocks_bytes == embedding + positions
    assert units.post_blocks_bytes == norm + embedding  # the tied head's weight is the embedding's
    assert units.root_bytes == embedding + positions + norm  # held once by an unsplit model
    assert units.block_count == 3 and units.blocks_bytes == 3 * units.block_bytes
    total = units.blocks_bytes + units.root_bytes
    assert units.stage_parameter_share(2) == pytest.approx(
        (2 * units.block_bytes + embedding + positions) / total
    )
    assert units.stage_parameter_share(1) == 1.0
    assert NO_UNITS.stage_parameter_share(4) == 0.25  # not known: an even share
    step = StepModel.fit(*(trace_step(lambda: TinyGPT(cfg), *GPT[1:], m, "bf16", False) for m in (1, 2)))
    full = step.memory_by_category(2, gpu=True, phase="optimizer")
    stage = Layout("single", 2, units, pp=2)._phase(step, 2, "optimizer", 1)
    for key in ("parameters", "gradients", "optimizer_state"):
        assert stage[key] == pytest.approx(full[key] * units.stage_parameter_share(2), abs=1), key
    # one micro-batch's activations of 2 of the 3 blocks on the busiest stage, not an even half
    backward = step.memory_by_category(2, gpu=True, phase="backward")["activations"]
    held = Layout("single", 2, units, pp=2)._phase(step, 2, "backward", 1)["activations"]
    assert held == pytest.approx(backward * 2 / 3, abs=1)


def test_layouts_keep_tensor_parallel_in_a_node_and_stages_within_the_blocks():
    labels = {x.label for x in layouts_for(4, 2, NO_UNITS, blocks=4)}
    assert {"ddp", "fsdp", "fsdp+offload", "fsdp4+tp2", "pp2+tp4", "ddp2+pp4", "pp4+tp2"} <= labels
    assert not any("tp8" in x for x in labels)  # 8-way tensor parallel would cross the node
    assert not any("pp8" in x for x in labels)  # more stages than blocks
    assert {x.label for x in layouts_for(8, 1, NO_UNITS, blocks=0)} == {"ddp", "fsdp", "fsdp+offload"}
    assert {x.label for x in layouts_for(1, 1, NO_UNITS, blocks=8)} == {"single", "offload"}


def test_a_step_peaking_in_the_optimizer_scales_to_its_backward_peak():
    """A wide model with a small batch peaks in its (foreach) optimizer; at a large batch in its
    backward. Scaled from the small trace, each phase grows as its own contents do: the scaled peak
    is the large trace's within 5%, and so is the largest micro-batch that fits an L4."""
    workload = stack_workload(4, 1024)
    small = trace_step(*workload, 2, "fp32", False)
    large = trace_step(*workload, 4096, "fp32", False)
    assert small.peak_phase == "optimizer" and large.peak_phase != "optimizer"
    predicted = scaled(small, 4096)
    assert predicted.peak_phase == large.peak_phase
    assert predicted.peak_bytes == pytest.approx(large.peak_bytes, rel=0.05)
    budget = gpu_spec("L4").sheet.memory_bytes / 1.1
    from_scaled = StepModel.fit(small, scaled(small, 4)).largest_micro_batch(budget, gpu=True)
    from_traces = StepModel.fit(trace_step(*workload, 2048, "fp32", False), large).largest_micro_batch(
        budget, gpu=True
    )
    assert from_scaled == pytest.approx(from_traces, rel=0.05)


def test_a_model_too_big_for_the_gpus_asked_for_gets_a_suggestion_that_fits_when_planned():
    """6.4B fp32 parameters with AdamW (103 GB of state): no layout of one L4 holds it (offload would
    need 103 GB of host memory per GPU, over the 87 GiB an L4 machine has), so the suggestion looks
    at more L4s; planned with the GPUs it names, its configuration fits at the same cost."""
    workload = stack_workload(24, 16384)
    result = plan(*workload, global_batch=8, gpus=("L4",))
    assert not any(c.fits for c in result.configs)
    assert NOTHING_FIT_WITHOUT_CHECKPOINTING in result.notes  # so checkpointing was planned too
    assert {c.params.activation_checkpointing for c in result.configs} == {False, True}
    offload = next(c for c in result.configs if c.params.layout == "offload")
    assert "host memory" in (offload.why_not or "")
    suggestion = result.suggestion
    assert suggestion is not None and suggestion.fits_as_asked is False
    config = suggestion.config
    assert config is not None
    assert config.gpus > 1 and "nothing fits L4" in (suggestion.text or "")
    assert f"--gpus {config.gpus}" in (suggestion.text or "")
    again = plan(*workload, global_batch=8, gpus=("L4",), gpus_per_node=config.gpus)
    row = next(
        c
        for c in again.configs
        if c.params.layout == config.params.layout and c.params.micro_batch == config.params.micro_batch
    )
    assert row.fits and row.usd_per_million_samples == pytest.approx(config.usd_per_million_samples)
    assert again.suggestion is not None and again.suggestion.fits_as_asked is True
    assert again.suggestion.config is not None
    assert again.suggestion.config.usd_per_million_samples == pytest.approx(
        min(c.usd_per_million_samples for c in again.configs if c.fits)
    )


@pytest.mark.slow
def test_the_cli_prints_the_suggestion_and_writes_it_to_json():
    out = autotune("plan", "--demo", "gpt", "--gpu", "H100-SXM", "--gpus", "4", "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    first = data["configs"][0]
    assert data["suggestion"]["fits_as_asked"] is True
    assert data["suggestion"]["config"]["params"] == first["params"]
    assert first["params"]["layout"] in data["suggestion"]["text"]
    table = autotune("plan", "--demo", "gpt", "--gpu", "H100-SXM", "--gpus", "4")
    assert table.returncode == 0 and "Suggestion: cheapest that fits 4 × H100-SXM" in table.stdout


def test_fsdp_gathers_the_largest_block_and_the_roots_own_parameters():
    stack = fsdp_units(stack_workload(3, 64)[0])
    assert (stack.block_bytes, stack.root_bytes, stack.blocks_bytes) == (64 * 64 * 4, 0, 3 * 64 * 64 * 4)
    gpt = GPT[0]()
    in_blocks = sum(p.numel() for p in gpt.blocks.parameters())
    # the tied embedding and head counted once, in the root with the positions and the final norm
    root = 4 * (sum(p.numel() for p in gpt.parameters()) - in_blocks)
    units = fsdp_units(gpt)
    assert (units.block_bytes, units.root_bytes) == (4 * in_blocks // len(gpt.blocks), root)
    assert fsdp_units(nn.Linear(8, 4)) == FsdpUnits(block_bytes=0, root_bytes=4 * (8 * 4 + 4))  # no blocks


def test_the_optimizers_copies_are_a_shards_under_fsdp_and_none_on_the_gpu_under_offload():
    """A foreach AdamW holds a copy of a whole group during its step: under FSDP each rank updates
    its shard (a shard's copy); with the state offloaded the update runs on the host (none)."""
    a = trace_step(*stack_workload(4, 1024), 2, "fp32", False)
    step = StepModel.fit(a, scaled(a, 4))
    optimizer_phases = [p for p in step.phases if p.split(".")[0] == "optimizer"]
    assert optimizer_phases
    fsdp = Layout("fsdp", 4, FsdpUnits(1024 * 1024 * 4))
    offload = Layout("fsdp", 4, FsdpUnits(1024 * 1024 * 4), offload=True)
    for phase in optimizer_phases:
        whole = step.memory_by_category(2, gpu=True, phase=phase)["temporaries"]
        assert whole >= 4 * 1024 * 1024 * 4  # one fp32 copy of the four layers' weights
        assert fsdp._phase(step, 2, phase, 1)["temporaries"] == pytest.approx(whole / 4, abs=1)
        assert offload._phase(step, 2, phase, 1)["temporaries"] == 0


def sequential_workload(layers: int, width: int) -> tuple:
    """``stack_workload``'s layers in an nn.Sequential, each followed by its activation (no ModuleList)."""
    _, batch, loss, optimizer = stack_workload(layers, width)

    def model() -> nn.Module:
        return nn.Sequential(
            *[m for _ in range(layers) for m in (nn.Linear(width, width, bias=False), nn.ReLU())]
        )

    return model, batch, loss, optimizer


def test_layers_in_an_nn_sequential_are_blocks_to_shard_split_and_pipeline():
    """6.4B fp32 parameters in an nn.Sequential of 24 Linear+ReLU pairs on 8 H100s: each Linear is a
    block, so FSDP gathers one Linear at a time (1 GiB, not the whole 25.8 GB model), and tensor and
    pipeline layouts are planned over the 24 blocks, as for the same layers in an nn.ModuleList."""
    workload = sequential_workload(24, 16384)
    linear = 16384 * 16384 * 4
    assert fsdp_units(workload[0]) == FsdpUnits(
        block_bytes=linear, root_bytes=0, blocks_bytes=24 * linear, block_count=24
    )
    result = plan(*workload, global_batch=8, gpus=("H100-SXM",), gpus_per_node=8)
    layouts = {c.params.layout for c in result.configs}
    assert {"tp8", "pp8", "fsdp"} <= layouts, layouts
    fsdp = [c for c in result.configs if c.params.layout == "fsdp" and c.fits]
    assert fsdp, [c.why_not for c in result.configs if c.params.layout == "fsdp"][:2]
