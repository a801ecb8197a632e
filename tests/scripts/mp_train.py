"""A model-parallel training loop with torchtitan-style flags, for ``torchrun`` over gloo on the CPU.

Run as ``torchrun --nproc-per-node N mp_train.py [--parallelism.tensor_parallel_degree T]
[--parallelism.pipeline_parallel_degree P] [--training.enable_cpu_offload] [--steps S]``: the
N ranks form a (pp, dp, tp) mesh with dp = N / (T × P). Tensor parallel splits each block's
first Linear by columns and its second by rows (DTensor ``ColwiseParallel``/``RowwiseParallel``);
pipeline parallel runs the blocks in P stages under ``torch.distributed.pipelining``'s 1F1B
schedule; the data-parallel replicas average their gradients. ``--knobs``: a trial's ``tensor_parallel``,
``pipeline_parallel`` and ``cpu_offload`` (``autotune.param``) override the flags.

The global batch is fixed (``--global-batch``, 16 samples): each replica trains on its share.
``--training.mixed_precision_param=bfloat16`` runs forward and backward under bf16 autocast.
``--training.enable_cpu_offload`` keeps the optimizer's state on the host, as FSDP's CPUOffload
does (on a CPU it changes nothing but is accepted, so a tuner can pass it). Rank 0 prints
``degrees tp=T pp=P dp=D`` once and the global loss of every step.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.pipelining import PipelineStage, Schedule1F1B
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

DIM, HIDDEN, BLOCKS = 64, 256, 4


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(DIM, HIDDEN)
        self.down = nn.Linear(HIDDEN, DIM)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.down(torch.relu(self.up(h)))


class Stage(nn.Module):
    """Blocks ``first..last`` of the model, with the input layer on stage 0 and the head on the last."""

    def __init__(self, first: int, last: int, with_input: bool, with_head: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        every = [Block() for _ in range(BLOCKS)]  # the same weights whatever the split
        inp, head = nn.Linear(DIM, DIM), nn.Linear(DIM, 1)
        self.inp = inp if with_input else None
        self.blocks = nn.ModuleList(every[first:last])
        self.head = head if with_head else None

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if self.inp is not None:
            h = self.inp(h)
        for block in self.blocks:
            h = block(h)
        return self.head(h) if self.head is not None else h


def step_loss(
    model: nn.Module,
    schedule: Schedule1F1B | None,
    loss_fn: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    stage: int,
    stages: int,
) -> torch.Tensor:
    """Forward and backward of one step; the loss (the last stage's, zero on the others)."""
    if schedule is None:
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss
    losses: list[torch.Tensor] = []
    if stage == 0:
        schedule.step(x)
    elif stage == stages - 1:
        schedule.step(target=y, losses=losses)
    else:
        schedule.step()
    return torch.stack(losses).mean() if losses else torch.zeros(())


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--parallelism.tensor_parallel_degree", dest="tp", type=int, default=1)
    parser.add_argument("--parallelism.pipeline_parallel_degree", dest="pp", type=int, default=1)
    parser.add_argument("--parallelism.data_parallel_shard_degree", dest="dp_shard", type=int, default=-1)
    parser.add_argument("--training.enable_cpu_offload", dest="offload", action="store_true")
    parser.add_argument("--training.no-enable-cpu-offload", dest="offload", action="store_false")
    parser.add_argument(
        "--training.mixed_precision_param",
        dest="precision",
        choices=("float32", "bfloat16"),
        default="float32",
    )
    parser.add_argument("--dump_folder", default="./outputs", help="where outputs would go (none here)")
    parser.add_argument("--knobs", action="store_true", help="degrees from autotune.param")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--global-batch", type=int, default=16)
    args = parser.parse_args()
    if args.knobs:
        import autotune

        args.tp = autotune.param("tensor_parallel", args.tp)
        args.pp = autotune.param("pipeline_parallel", args.pp)
        args.offload = autotune.param("cpu_offload", args.offload)
    return args


def main() -> None:
    args = parse()
    dist.init_process_group("gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    if world % (args.tp * args.pp):
        raise SystemExit(f"tensor × pipeline degree {args.tp * args.pp} does not divide {world} ranks")
    dp = world // (args.tp * args.pp)
    if args.global_batch % dp:
        raise SystemExit(f"global batch {args.global_batch} does not split over {dp} replicas")
    mesh = init_device_mesh("cpu", (args.pp, dp, args.tp), mesh_dim_names=("pp", "dp", "tp"))
    stage, dp_rank = mesh.get_local_rank("pp"), mesh.get_local_rank("dp")
    per_stage = BLOCKS // args.pp
    model = Stage(stage * per_stage, (stage + 1) * per_stage, stage == 0, stage == args.pp - 1)
    if args.tp > 1:
        plan = {"up": ColwiseParallel(), "down": RowwiseParallel()}
        for block in model.blocks:
            parallelize_module(block, mesh["tp"], plan)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()
    schedule = None
    if args.pp > 1:
        pipe = PipelineStage(model, stage, args.pp, torch.device("cpu"), group=mesh["pp"].get_group())
        schedule = Schedule1F1B(pipe, n_microbatches=2 * args.pp, loss_fn=loss_fn)
    if rank == 0:
        print(f"degrees tp={args.tp} pp={args.pp} dp={dp} offload={args.offload}", flush=True)
    share = args.global_batch // dp
    generator = torch.Generator().manual_seed(1)
    for step in range(args.steps):
        x = torch.randn(args.global_batch, DIM, generator=generator)
        y = x.sum(-1, keepdim=True).sin()
        x, y = x[dp_rank * share : (dp_rank + 1) * share], y[dp_rank * share : (dp_rank + 1) * share]
        optimizer.zero_grad()
        autocast = torch.autocast("cpu", torch.bfloat16, enabled=args.precision == "bfloat16")
        with autocast:
            loss = step_loss(model, schedule, loss_fn, x, y, stage, args.pp)
        if dp > 1:
            group = mesh["dp"].get_group()
            for p in model.parameters():
                if p.grad is not None:
                    grad = p.grad.to_local() if isinstance(p.grad, DTensor) else p.grad
                    dist.all_reduce(grad, group=group)
                    grad /= dp
        optimizer.step()
        # the global loss: the last stage's, averaged over the replicas, to rank 0
        total = loss.detach().reshape(1) * (stage == args.pp - 1)
        dist.all_reduce(total)
        if rank == 0:
            print(f"step {step} loss {total.item() / (dp * args.tp):.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
