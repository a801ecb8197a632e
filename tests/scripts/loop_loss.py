"""A small training loop that logs the loss it backpropagates, for the loss and step-budget tests.

``--nan-at K`` makes the loss NaN from step K on (on rank ``--nan-rank`` only under torchrun);
``--accum N`` backpropagates N micro-batches per optimizer step. Under torchrun (WORLD_SIZE > 1)
it trains DDP over gloo. With AUTOTUNE_TEST_LOSSES=FILE each rank appends one JSON line per step,
``{"rank", "step", "loss"}`` (the mean of its micro-batches' losses, NaN as null), flushed at once,
so a run a step budget stopped still leaves every finished step's loss.
"""

import argparse
import json
import math
import os
import sys

import torch
from torch import nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--accum", type=int, default=1)
    parser.add_argument("--nan-at", type=int, default=0)
    parser.add_argument("--nan-rank", type=int, default=0)
    args = parser.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = 0
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    if world > 1:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        dist.init_process_group("gloo")
        rank = dist.get_rank()
        model = DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1 + rank)
    log_path = os.environ.get("AUTOTUNE_TEST_LOSSES")
    log = open(log_path, "a") if log_path else None  # noqa: SIM115 - kept open for the whole loop
    for step in range(1, args.steps + 1):
        opt.zero_grad()
        losses = []
        for _ in range(args.accum):
            x = torch.randn(args.batch_size, 32, generator=gen)
            y = torch.randint(0, 4, (args.batch_size,), generator=gen)
            loss = nn.functional.cross_entropy(model(x), y)
            if args.nan_at and step >= args.nan_at and rank == args.nan_rank:
                loss = loss * float("nan")
            loss.backward()
            losses.append(loss.item())
        opt.step()
        if log is not None:
            mean = sum(losses) / len(losses)
            log.write(json.dumps({"rank": rank, "step": step, "loss": mean if math.isfinite(mean) else None}))
            log.write("\n")
            log.flush()
    if world > 1:
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
