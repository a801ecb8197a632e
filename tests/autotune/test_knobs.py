"""Built-in knobs: ``param()``, the knob table, ``batch_plan()``, ``prepare()`` (real training on CPU)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import autotune
from autotune import knobs, prepared

ROOT = Path(__file__).resolve().parents[2]
DIM = 16
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture(autouse=True)
def _clean_knob_state(monkeypatch: pytest.MonkeyPatch):
    """No trial parameters or torchrun variables leak in; warn-once state, TF32 mode, threads restored."""
    for var in list(os.environ):
        if var.startswith(knobs.PARAM_ENV_PREFIX) or var in TORCHRUN_VARS:
            monkeypatch.delenv(var)
    monkeypatch.setattr(prepared, "_WARNED", set())
    monkeypatch.setattr(prepared, "_CURRENT", None)
    monkeypatch.setattr(knobs, "_USED", {})  # what one test's script read is not the next one's
    mode, threads = torch.get_float32_matmul_precision(), torch.get_num_threads()
    conv_tf32 = torch.backends.cudnn.allow_tf32
    torch.set_num_threads(1)  # tiny models; a second thread only waits on a shared, busy CPU
    yield
    torch.set_float32_matmul_precision(mode)
    torch.backends.cudnn.allow_tf32 = conv_tf32
    torch.set_num_threads(threads)


def set_param(monkeypatch: pytest.MonkeyPatch, name: str, value: object) -> None:
    monkeypatch.setenv(knobs.param_env_var(name), json.dumps(value))


class Net(nn.Module):
    """Input layer, repeated residual blocks in a ModuleList, a small ModuleList of heads."""

    def __init__(self, n_blocks: int = 3) -> None:
        super().__init__()
        self.inp = nn.Linear(DIM, DIM)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))
            for _ in range(n_blocks)
        )
        self.heads = nn.ModuleList([nn.Linear(DIM, 1), nn.Linear(DIM, 1)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for block in self.blocks:
            h = h + block(h)
        return self.heads[0](h) + self.heads[1](h)


def fresh(seed: int = 0) -> tuple[Net, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = Net()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def batches(steps: int = 4, batch: int = 8) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    xs = torch.randn(steps, batch, DIM, generator=g)
    return [(x, x.sum(-1, keepdim=True).sin()) for x in xs]


def train(prep: autotune.Prepared, steps: int = 4) -> list[float]:
    losses = []
    for x, y in batches(steps):
        with prep.autocast():
            loss = nn.functional.mse_loss(prep.model(x.to(prep.device)), y.to(prep.device))
        prep.backward(loss)
        prep.step()
        losses.append(loss.item())
    return losses


def train_plain(precision: str = "fp32", steps: int = 4) -> list[float]:
    """The same training in plain torch, as the reference."""
    model, opt = fresh()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler("cpu", enabled=precision == "fp16")
    losses = []
    for x, y in batches(steps):
        with torch.autocast("cpu", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


# ------------------------------------------------------------------------------ param and table


def test_param_reads_json_from_the_environment(monkeypatch):
    assert autotune.param("lr", 0.1) == 0.1
    for value in (64, 3e-4, True, "bf16", [1, 2], {"a": None}):
        set_param(monkeypatch, "lr", value)
        assert autotune.param("lr", 0.1) == value
    monkeypatch.setenv("AUTOTUNE_PARAM_WARMUP_STEPS", "7")
    assert autotune.param("warmup-steps") == 7
    assert knobs.param_env_var("model.dim") == "AUTOTUNE_PARAM_MODEL_DIM"


def test_param_bad_json_names_the_variable(monkeypatch):
    monkeypatch.setenv("AUTOTUNE_PARAM_PRECISION", "bf16")
    with pytest.raises(ValueError, match=r"AUTOTUNE_PARAM_PRECISION='bf16' is not valid JSON.*quotes"):
        autotune.param("precision", "fp32")


def test_knob_table_checks_values_and_matches_prepare():
    import inspect

    assert knobs.check_knob("precision", "bf16") == "bf16"
    assert knobs.check_knob("micro_batch", 3) == 3
    with pytest.raises(ValueError, match=r"knob 'precision' got 'fp8'; allowed: \"fp32\", \"tf32\""):
        knobs.check_knob("precision", "fp8")
    with pytest.raises(ValueError, match="integer >= 1"):
        knobs.check_knob("grad_accum", 0)
    with pytest.raises(ValueError, match="'compile' got 1"):
        knobs.check_knob("compile", 1)  # a bool knob takes JSON true/false, not 1
    with pytest.raises(ValueError, match="'micro_batch' got True"):
        knobs.check_knob("micro_batch", True)
    with pytest.raises(ValueError, match="unknown knob 'batchsize'; built-in knobs: precision, layout"):
        knobs.check_knob("batchsize", 8)
    tuned = set(inspect.signature(autotune.prepare).parameters) - {"model", "optimizer", "device"}
    assert tuned <= set(autotune.KNOBS)
    for knob in autotune.KNOBS.values():
        assert knob.default is None or knob.check(knob.default) == knob.default


def test_knob_values_has_every_knob_of_the_table_with_its_type_and_reads_only_those():
    import dataclasses

    from autotune.knob_values import KnobValues

    fields = {f.name: str(f.type) for f in dataclasses.fields(KnobValues)}
    assert fields == {name: f"{k.type.__name__} | None" for name, k in autotune.KNOBS.items()}
    # a value of another type (a string degree, a bool batch, JSON 1 for a flag) reads as unset
    read = KnobValues.of({"micro_batch": True, "tensor_parallel": "2", "compile": 1, "grad_accum": 4,
                          "precision": "bf16", "cpu_offload": False, "lr": 0.1})  # fmt: skip
    assert read == KnobValues(grad_accum=4, precision="bf16", cpu_offload=False)


def test_knobs_module_and_lazy_exports_do_not_import_torch():
    code = "import sys, autotune; autotune.KNOBS, autotune.batch_plan; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"
    assert autotune.prepare is prepared.prepare and autotune.Prepared is prepared.Prepared


# ----------------------------------------------------------------------------------- batch plan


def test_batch_plan_invariant_over_a_grid():
    """Every (global, world, micro) and (global, world, accum) either splits exactly or says why."""
    for g in range(1, 49):
        for w in (1, 2, 3, 4):
            for m in range(1, g + 1):
                if g % (w * m):
                    with pytest.raises(ValueError, match=f"of micro_batch {m} |over world_size"):
                        autotune.batch_plan(g, micro_batch=m, world_size=w)
                    continue
                plan = autotune.batch_plan(g, micro_batch=m, world_size=w)
                assert (plan.micro_batch, plan.world_size, plan.global_batch) == (m, w, g)
                assert plan.micro_batch * plan.grad_accum * plan.world_size == g
                again = autotune.batch_plan(g, grad_accum=plan.grad_accum, world_size=w)
                assert again == plan
                assert autotune.batch_plan(g, m, plan.grad_accum, w) == plan
            if g % w == 0:
                assert autotune.batch_plan(g, world_size=w) == autotune.BatchPlan(g // w, 1, w, g)


def test_batch_plan_error_messages():
    with pytest.raises(ValueError, match=r"global_batch 7 does not split evenly over world_size 2"):
        autotune.batch_plan(7, world_size=2)
    with pytest.raises(
        ValueError,
        match=r"global_batch 96 over world_size 2 is 48 per rank, not a multiple of micro_batch 5 \(from "
        r"the defaults\); micro_batch values that fit: 1, 2, 3, 4, 6, 8, 12, 16, 24, 48$",
    ):
        autotune.batch_plan(96, micro_batch=5, world_size=2)
    with pytest.raises(ValueError, match=r"grad_accum 5 .*grad_accum values that fit: 1, 2, 4, 8$"):
        autotune.batch_plan(8, grad_accum=5)
    with pytest.raises(
        ValueError, match=r"micro_batch 4 × grad_accum 4 × world_size 1 = 16, not global_batch 8"
    ):
        autotune.batch_plan(8, micro_batch=4, grad_accum=4)
    with pytest.raises(ValueError, match="'micro_batch' got 0"):
        autotune.batch_plan(8, micro_batch=0)


def test_batch_plan_takes_the_trials_split_and_the_jobs_world(monkeypatch):
    # the user's split is the default; a trial's micro_batch replaces it and grad_accum follows
    assert autotune.batch_plan(64, micro_batch=16, grad_accum=4) == autotune.BatchPlan(16, 4, 1, 64)
    set_param(monkeypatch, "micro_batch", 8)
    assert autotune.batch_plan(64, micro_batch=16, grad_accum=4) == autotune.BatchPlan(8, 8, 1, 64)
    set_param(monkeypatch, "micro_batch", 48)
    with pytest.raises(ValueError, match=r"micro_batch 48 \(from the trial\)"):
        autotune.batch_plan(64)
    set_param(monkeypatch, "micro_batch", 8)
    monkeypatch.setenv("WORLD_SIZE", "2")  # under torchrun
    assert autotune.batch_plan(64) == autotune.BatchPlan(8, 4, 2, 64)
    set_param(monkeypatch, "global_batch", 32)  # the user let the global batch move
    assert autotune.batch_plan(64) == autotune.BatchPlan(8, 2, 2, 32)
    set_param(monkeypatch, "world_size", 4)
    with pytest.raises(ValueError, match="AUTOTUNE_PARAM_WORLD_SIZE says 4 ranks but this job runs 2"):
        autotune.batch_plan(64)
    monkeypatch.delenv("WORLD_SIZE")
    assert autotune.batch_plan(64) == autotune.BatchPlan(8, 1, 4, 32)


# ------------------------------------------------------------------------------------ precision


def test_fp32_trains_like_plain_torch_with_tf32_off():
    torch.set_float32_matmul_precision("high")
    prep = autotune.prepare(*fresh())
    assert (prep.precision, prep.layout, prep.device, prep.scaler, prep.autocast_dtype) == (
        "fp32",
        "single",
        torch.device("cpu"),
        None,
        None,
    )
    assert torch.get_float32_matmul_precision() == "highest"
    # cuDNN's convolutions too: torch leaves them in TF32 whatever the matmul mode
    assert torch.backends.cudnn.allow_tf32 is False
    assert torch.backends.cudnn.conv.fp32_precision != "tf32"
    with prep.autocast():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
    losses = train(prep)
    assert losses == train_plain("fp32")
    assert losses[-1] < losses[0]


def test_tf32_on_cpu_warns_once_and_runs_as_fp32():
    with pytest.warns(
        RuntimeWarning, match="'tf32' needs an Ampere or newer CUDA GPU; on cpu it runs as fp32$"
    ):
        prep = autotune.prepare(*fresh(), precision="tf32")
    assert (prep.precision, prep.tf32, prep.autocast_dtype) == ("tf32", False, None)
    assert torch.get_float32_matmul_precision() == "highest"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = autotune.prepare(*fresh(), precision="tf32")
    assert train(again) == train_plain("fp32")


def test_bf16_autocasts_matmuls_and_trains_close_to_fp32():
    prep = autotune.prepare(*fresh(), precision="bf16")
    assert prep.scaler is None
    with autotune.autocast():  # the module-level form uses the latest prepare()
        a = torch.randn(4, 4)
        assert (a @ a).dtype == torch.bfloat16
        assert prep.model(torch.randn(2, DIM)).dtype == torch.bfloat16
    assert (a @ a).dtype == torch.float32  # only inside
    losses = train(prep)
    assert losses == train_plain("bf16")
    assert losses != train_plain("fp32")
    assert losses == pytest.approx(train_plain("fp32"), rel=5e-2)


def test_fp16_on_cpu_autocasts_and_scales_gradients():
    """torch 2.13 autocasts fp16 on CPU and has GradScaler('cpu'): fp16 is supported there too."""
    prep = autotune.prepare(*fresh(), precision="fp16")
    assert isinstance(prep.scaler, torch.amp.GradScaler) and prep.scaler.is_enabled()
    with prep.autocast():
        assert prep.model(torch.randn(2, DIM)).dtype == torch.float16
    losses = train(prep)
    assert losses == train_plain("fp16")  # the same scaler decisions as plain torch
    assert losses[0] == pytest.approx(train_plain("fp32")[0], rel=1e-2)  # later, skipped steps differ


def test_fp16_scaler_skips_an_overflowing_step_and_unscales_before_clipping():
    prep = autotune.prepare(*fresh(), precision="fp16")
    prep.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**40)  # scaled grads overflow fp16
    before = [p.detach().clone() for p in prep.model.parameters()]
    train(prep, steps=1)
    assert all(torch.equal(a, b) for a, b in zip(before, prep.model.parameters(), strict=True))
    assert prep.scaler.get_scale() == 2.0**39

    prep = autotune.prepare(*fresh(), precision="fp16")
    ref, _ = fresh()
    x, y = batches(1)[0]
    nn.functional.mse_loss(ref(x), y).backward()
    with prep.autocast():
        loss = nn.functional.mse_loss(prep.model(x), y)
    prep.backward(loss)
    norm = prep.clip_grad_norm_(1e9)
    ref_norm = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in ref.parameters()]))
    assert norm.item() == pytest.approx(ref_norm.item(), rel=1e-2)  # unscaled: not 65536 times larger


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16"])
def test_cuda_precisions(precision):
    prep = autotune.prepare(*fresh(), precision=precision)
    assert prep.device == torch.device("cuda", torch.cuda.current_device())
    assert next(prep.model.parameters()).device == prep.device
    assert prep.tf32 is (precision == "tf32" and torch.cuda.get_device_capability() >= (8, 0))
    assert torch.get_float32_matmul_precision() == ("high" if prep.tf32 else "highest")
    assert (prep.scaler is not None and prep.scaler._device == "cuda") is (precision == "fp16")
    with prep.autocast():
        out = prep.model(torch.randn(2, DIM, device=prep.device))
    assert out.dtype == {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    losses = train(prep)
    assert losses[0] == pytest.approx(train_plain("fp32")[0], rel=2e-2)


def test_knobs_come_from_the_trial_over_the_code(monkeypatch):
    set_param(monkeypatch, "precision", "bf16")
    assert autotune.prepare(*fresh(), precision="fp32").autocast_dtype == torch.bfloat16
    set_param(monkeypatch, "precision", "fp8")
    with pytest.raises(ValueError, match="knob 'precision' got 'fp8'"):
        autotune.prepare(*fresh())


def test_module_level_helpers_need_a_prepare():
    with pytest.raises(RuntimeError, match=r"call autotune.prepare\(model, optimizer\) before"):
        autotune.autocast()
    with pytest.raises(RuntimeError, match="before"):
        autotune.backward(torch.ones((), requires_grad=True))
    with pytest.raises(RuntimeError, match="no optimizer was prepared"):
        autotune.prepare(fresh()[0]).step()


# ---------------------------------------------------------------------- activation checkpointing


def count_forwards(model: Net) -> list[int]:
    """Calls of the blocks' forward, counted when they begin (a recomputation stops early)."""
    calls = [0]

    def hook(*_: object) -> None:
        calls[0] += 1

    for block in model.blocks:
        block.register_forward_pre_hook(hook)
    return calls


def test_activation_checkpointing_same_numbers_and_really_recomputes():
    plain, _ = fresh()
    model, opt = fresh()
    keys = list(model.state_dict())
    plain_calls, ckpt_calls = count_forwards(plain), count_forwards(model)
    prep = autotune.prepare(model, opt, activation_checkpointing=True)
    assert prep.blocks == 3  # the blocks, not the two small heads
    assert all(type(b).__name__ == "CheckpointWrapper" for b in model.blocks)
    assert not any(type(h).__name__ == "CheckpointWrapper" for h in model.heads)
    assert list(model.state_dict()) == keys  # checkpoints load either way

    x, y = batches(1)[0]
    for m in (plain, prep.model):
        nn.functional.mse_loss(m(x), y).backward()
    assert plain_calls == [3]  # one forward per block
    assert ckpt_calls == [6]  # and once more in backward: recomputed
    for (name, p), q in zip(plain.named_parameters(), prep.model.parameters(), strict=True):
        assert torch.allclose(p.grad, q.grad, atol=1e-7), name
    prep.step()  # the step of these gradients, then three more
    plain_opt = torch.optim.AdamW(plain.parameters(), lr=1e-2)
    plain_opt.step()
    plain_opt.zero_grad()
    assert train(prep, 3) == pytest.approx(train(autotune.prepare(plain, plain_opt), 3), rel=1e-6)


def test_activation_checkpointing_needs_repeated_blocks():
    model = nn.Sequential(nn.Linear(DIM, DIM), nn.ReLU())
    with pytest.raises(ValueError, match=r"needs repeated blocks in Sequential"):
        autotune.prepare(model, activation_checkpointing=True)


# ------------------------------------------------------------------------------ layout, compile


def test_ddp_outside_torchrun_says_how_to_launch():
    with pytest.raises(RuntimeError, match=r"layout 'ddp' runs one process per rank: launch with torchrun"):
        autotune.prepare(*fresh(), layout="ddp")


@pytest.fixture(scope="module")
def dist_run(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict]:
    """tests/scripts/knobs_dist.py under torchrun, 2 ranks, gloo: each rank's results."""
    out = tmp_path_factory.mktemp("knobs") / "out.json"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--standalone",
        str(ROOT / "tests" / "scripts" / "knobs_dist.py"),
        str(out),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(knobs.PARAM_ENV_PREFIX)}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return {r: json.loads(Path(f"{out}.rank{r}").read_text()) for r in (0, 1)}


@pytest.mark.slow
@pytest.mark.parametrize("case", ["ddp", "fsdp_ckpt", "fsdp_fp16_keep", "fsdp_bf16"])
def test_two_ranks_match_one_process_on_the_same_global_batch(dist_run, case):
    rank0, rank1 = dist_run[0][case], dist_run[1][case]
    fp16, bf16 = case == "fsdp_fp16_keep", case == "fsdp_bf16"
    assert rank0["losses"] == rank1["losses"]  # the global loss, all-reduced
    # bf16 (8 bits of mantissa) against one process under bf16 autocast: the same path, rounded apart
    rel = 3e-2 if bf16 else 1e-3 if fp16 else 1e-5
    assert rank0["losses"] == pytest.approx(rank0["ref_losses"], rel=rel)
    params, ref = torch.tensor(rank0["params"]), torch.tensor(rank0["ref_params"])
    assert torch.allclose(params, ref, atol=5e-2 if fp16 or bf16 else 1e-6)
    assert torch.equal(params, torch.tensor(rank1["params"]))  # identical on every rank
    assert rank0["grad_accum"] == {"ddp": 2, "fsdp_ckpt": 1, "fsdp_fp16_keep": 2, "fsdp_bf16": 2}[case]
    assert rank0["scaler"] is fp16
    assert rank0["reshard_after_forward"] is (case != "fsdp_fp16_keep")
    assert rank0["blocks"] == (0 if case == "ddp" else 3)  # fsdp shards block by block
    assert rank0["fsdp_params"] == (0 if case == "ddp" else 16)  # every parameter a DTensor shard
    # from the forward to the backward the root keeps its own parameters gathered (FSDP2's default
    # for a root, as the plan holds it); the blocks free theirs unless told to keep them
    kept = {"root": "Parameter", "block": "Parameter"}
    freed = kept | {"block": "DTensor"}
    held = {k: v for k, v in rank0["held_after_forward"].items() if k != "between"}
    assert held == (kept if case in ("ddp", "fsdp_fp16_keep") else freed)
    # between the micro-batches of one optimizer step, fsdp has reduce-scattered each micro-batch's
    # gradients and holds their shards (as the plan holds them: FSDP2 without gradient sync would
    # keep every gradient unsharded, in fp32, beside them); ddp skips its all-reduce and holds them all
    between = {"ddp": "Tensor", "fsdp_ckpt": None, "fsdp_fp16_keep": "DTensor", "fsdp_bf16": "DTensor"}[case]
    assert rank0["held_after_forward"].get("between") == between
    # bf16 under fsdp is FSDP's mixed precision: a block computes with bf16 weights gathered from
    # fp32 master shards, and no autocast runs; fp16 keeps autocast (and its scaler)
    assert rank0["master_dtype"] == "torch.float32"
    assert rank0["computed_in"] == ("torch.bfloat16" if bf16 else "torch.float32")
    assert (rank0["autocast"], rank0["param_dtype"]) == (
        ("None", "torch.bfloat16") if bf16 else ("torch.float16" if fp16 else "None", "None")
    )
    # what the profiler says of the model between steps: FSDP's policy computes in bf16 whenever it
    # runs, while fp16 is autocast's, only inside the step's context
    assert rank0["detected"] == ("bf16" if bf16 else "fp32")


@pytest.mark.slow
def test_bf16_under_fsdp_keeps_autocast_for_a_model_whose_buffers_stay_fp32(dist_run):
    """FSDP casts parameters, never buffers: BatchNorm's fp32 running statistics beside bf16 weights
    fail its first forward, so such a model trains under autocast, as before the policy."""
    bn = dist_run[0]["batchnorm_bf16"]
    assert (bn["autocast"], bn["param_dtype"]) == ("torch.bfloat16", "None")
    assert math.isfinite(bn["loss"])


@pytest.mark.slow  # inductor compiles C++ with gcc: about 15-25 s on 2 cores with a cold cache
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
def test_compile_on_and_off_give_the_same_loss():
    compiled = autotune.prepare(*fresh(), compile=True)
    assert type(compiled.model).__name__ == "OptimizedModule"
    assert train(compiled, steps=3) == pytest.approx(train(autotune.prepare(*fresh()), steps=3), rel=1e-5)


def test_batch_plan_splits_over_the_replicas_of_a_model_parallel_job(monkeypatch):
    # 8 ranks at tensor 2 × pipeline 2: 2 replicas, each trains on half the global batch
    monkeypatch.setenv("WORLD_SIZE", "8")
    set_param(monkeypatch, "tensor_parallel", 2)
    set_param(monkeypatch, "pipeline_parallel", 2)
    plan = autotune.batch_plan(64, micro_batch=8)
    assert plan == autotune.BatchPlan(8, 4, 8, 64, ranks_per_replica=4)
    assert plan.replicas == 2 and plan.micro_batch * plan.grad_accum * plan.replicas == 64
    with pytest.raises(ValueError, match=r"over 2 replicas \(8 ranks, 4 a replica\) is 32 per replica"):
        autotune.batch_plan(64, micro_batch=6)
    # the degree the script read through knob_value (its own default, no trial parameter) counts too
    monkeypatch.delenv(knobs.param_env_var("pipeline_parallel"))
    assert autotune.batch_plan(64, micro_batch=8).replicas == 4
    assert knobs.knob_value("pipeline_parallel", 2) == 2
    assert autotune.batch_plan(64, micro_batch=8).replicas == 2
