"""DDP over gloo for the advice tests, under ``torchrun --nproc-per-node 2``.

``--hidden`` sets the width of a three-layer MLP (its gradients are all-reduced every step), so a
wide model with a tiny ``--batch-size`` spends most of each step in the all-reduce
(communication-bound). ``--sleep-rank R --sleep-ms T`` makes rank R sleep T ms before each step's
forward (a straggler: the other ranks wait for it in the gradient all-reduce).
"""

import argparse
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--sleep-rank", type=int, default=-1)
    parser.add_argument("--sleep-ms", type=float, default=0.0)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    h = args.hidden
    model = DistributedDataParallel(
        nn.Sequential(nn.Linear(64, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 10))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(args.steps):
        x = torch.randn(args.batch_size, 64)
        y = torch.randint(0, 10, (args.batch_size,))
        if rank == args.sleep_rank:
            time.sleep(args.sleep_ms / 1000)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
