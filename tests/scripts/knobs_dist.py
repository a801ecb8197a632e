"""``autotune.prepare`` over ranks, for ``torchrun --nproc-per-node 2`` (gloo on CPU).

Trains the same tiny block model with several layouts and knobs, each against a single-process
reference that trains on the whole global batch with plain torch. Rank r writes OUT.rank<r>
(OUT is argv[1]): for each case the per-step global loss (the mean over ranks), the reference's,
and the full parameters after the last step (gathered from the shards under fsdp).
"""

from __future__ import annotations

import json
import sys

import torch
import torch.distributed as dist
from torch import nn

import autotune
from profilers.runtime.flops import detect_precision

STEPS, GLOBAL_BATCH, DIM = 6, 16, 16
CASES = {
    # name: (prepare knobs, micro_batch)
    "ddp": ({"layout": "ddp"}, 4),
    "fsdp_ckpt": ({"layout": "fsdp", "activation_checkpointing": True}, 8),
    "fsdp_fp16_keep": ({"layout": "fsdp", "precision": "fp16", "reshard_after_forward": False}, 4),
    "fsdp_bf16": ({"layout": "fsdp", "precision": "bf16"}, 4),
}


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(DIM, DIM)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.Tanh(), nn.Linear(2 * DIM, DIM)) for _ in range(3)
        )
        self.head = nn.Linear(DIM, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for block in self.blocks:
            h = h + block(h)
        return self.head(h)


def fresh() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = Net()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(STEPS, GLOBAL_BATCH, DIM, generator=g)
    return x, x.sum(-1, keepdim=True).sin()


def reference(precision: str) -> tuple[list[float], list[float]]:
    """Plain torch, one process, the whole global batch per step."""
    model, opt = fresh()
    fp16 = precision == "fp16"
    low = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)
    scaler = torch.amp.GradScaler("cpu", enabled=fp16)
    losses = []
    for x, y in zip(*data(), strict=True):
        with torch.autocast("cpu", dtype=low, enabled=low != torch.float32):
            loss = nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()


def run(knobs: dict, micro: int) -> tuple[autotune.Prepared, list[float], list[float], str, dict[str, str]]:
    model, opt = fresh()
    prep = autotune.prepare(model, opt, **knobs)
    seen: list[str] = []  # the dtype a block's weight has while it computes
    first_block = model.blocks[0][0]
    first_block.register_forward_pre_hook(
        lambda m, args: seen.append(str(m.weight.dtype)) if not seen else None
    )
    plan = autotune.batch_plan(GLOBAL_BATCH, micro_batch=micro)
    assert plan.world_size == dist.get_world_size() == prep.world_size
    assert plan.micro_batch * plan.grad_accum * plan.world_size == GLOBAL_BATCH
    losses = []
    held: dict[str, str] = {}
    for x, y in zip(*data(), strict=True):
        mine = slice(prep.rank * plan.rank_batch, (prep.rank + 1) * plan.rank_batch)
        xs, ys = x[mine].split(plan.micro_batch), y[mine].split(plan.micro_batch)
        total = torch.zeros(())
        for i, (xb, yb) in enumerate(zip(xs, ys, strict=True)):
            with prep.no_sync(i < plan.grad_accum - 1):
                with autotune.autocast():
                    loss = nn.functional.mse_loss(prep.model(xb), yb) / plan.grad_accum
                # between the forward and the backward: what is still gathered (FSDP: not a DTensor)
                kinds = {"root": model.head.weight, "block": first_block.weight}
                held = held or {name: type(p).__name__ for name, p in kinds.items()}
                autotune.backward(loss)
            if i == 0 and plan.grad_accum > 1 and "between" not in held:  # what the next micro-batch finds
                grad = first_block.weight.grad
                held["between"] = "None" if grad is None else type(grad).__name__
            total += loss.detach().float()
        prep.step()
        dist.all_reduce(total)
        losses.append(total.item() / plan.world_size)
    params = [p.full_tensor() if hasattr(p, "full_tensor") else p for p in prep.model.parameters()]
    return prep, losses, torch.cat([p.detach().flatten() for p in params]).tolist(), seen[0], held


def batchnorm_under_fsdp_bf16() -> dict:
    """A model with BatchNorm (fp32 running statistics beside its weight) under fsdp and bf16."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(DIM, DIM), nn.BatchNorm1d(DIM), nn.Linear(DIM, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    prep = autotune.prepare(model, opt, layout="fsdp", precision="bf16")
    x = torch.randn(8, DIM)
    with prep.autocast():
        loss = prep.model(x).float().pow(2).mean()
    prep.backward(loss)
    prep.step()
    return {"loss": loss.item(), "autocast": str(prep.autocast_dtype), "param_dtype": str(prep.param_dtype)}


def main() -> int:
    out: dict[str, dict] = {}
    first = None
    for name, (knobs, micro) in CASES.items():
        prep, losses, params, computed_in, held = run(knobs, micro)
        first = first or prep
        ref_losses, ref_params = reference(knobs.get("precision", "fp32"))
        out[name] = {
            "losses": losses,
            "params": params,
            "ref_losses": ref_losses,
            "ref_params": ref_params,
            "grad_accum": autotune.batch_plan(GLOBAL_BATCH, micro_batch=micro).grad_accum,
            "blocks": prep.blocks,
            "reshard_after_forward": prep.reshard_after_forward,
            "scaler": prep.scaler is not None,
            "fsdp_params": sum(type(p).__name__ == "DTensor" for p in prep.model.parameters()),
            "computed_in": computed_in,
            "held_after_forward": held,
            "master_dtype": str(next(prep.model.parameters()).dtype),
            "autocast": str(prep.autocast_dtype),
            "param_dtype": str(prep.param_dtype),
            "detected": detect_precision(prep.model),
        }
    out["batchnorm_bf16"] = batchnorm_under_fsdp_bf16()
    rank = dist.get_rank()
    assert first is not None
    first.close()
    assert not dist.is_initialized(), "prepare() created the process group, close() destroys it"
    with open(f"{sys.argv[1]}.rank{rank}", "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
