"""Resident memory that grows while nothing more is held: the C allocator keeps what was freed.

Each step, after a small training step, takes a scratch buffer 64 KiB larger than the last (1 MiB
at step 0), then a 64-byte tensor it keeps, then frees the scratch buffer. The kept tensor sits
above the freed hole, so glibc cannot give the hole back, and the next, larger buffer does not fit
in it: the process's resident memory grows by about one scratch buffer a step (1 MiB + 64 KiB × step)
while the bytes in live allocations grow by the 64-byte tensors alone. A 31 MiB buffer freed first
raises glibc's mmap threshold, so the scratch buffers come from the heap, not from mmap.
"""

import argparse
import sys
import time

import torch
from torch import nn


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--step-sleep-ms", type=float, default=30.0)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    torch.empty(31 * 2**20 // 4).fill_(0.0)  # mmapped and freed: the mmap threshold rises to 31 MiB
    kept = []
    for step in range(args.steps):
        x, y = torch.randn(256, 64), torch.randint(0, 10, (256,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        scratch = torch.empty((2**20 + step * 2**16) // 4).fill_(1.0)
        kept.append(torch.empty(16))
        del scratch
        time.sleep(args.step_sleep_ms / 1000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
