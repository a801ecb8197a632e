"""DDP over gloo, for ``torchrun --nproc-per-node 2``: DistributedSampler, the same steps on each rank.

With AUTOTUNE_TEST_TIMING=FILE each rank writes its timing to FILE.rank<RANK>.
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(
        nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    n = args.steps * args.batch_size * world
    data = TensorDataset(torch.randn(n, 64), torch.randint(0, 10, (n,)))
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0, drop_last=True)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    stamps = []
    for xb, yb in loader:
        loss = nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        stamps.append(time.perf_counter())
    dist.barrier()
    dist.destroy_process_group()
    if os.environ.get("AUTOTUNE_TEST_TIMING"):
        with open(f"{os.environ['AUTOTUNE_TEST_TIMING']}.rank{rank}", "w") as f:
            json.dump(
                {
                    "stamps": stamps,
                    "steps": len(stamps),
                    "samples_per_step": args.batch_size,
                    "rank": rank,
                    "world_size": world,
                    "argv": sys.argv,
                },
                f,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
