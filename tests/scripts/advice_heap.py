"""Resident memory that grows while nothing more is held: the C allocator keeps what was freed.

The script tells glibc never to give freed heap memory back (``mallopt(M_TRIM_THRESHOLD)``, as a
program tuning its allocator for speed does) and to serve every block under 32 MiB from the heap
(``M_MMAP_THRESHOLD``). Each step, after a small training step, it fills four scratch buffers, each
320 KiB larger than the step before (1 MiB at step 0), and frees them. Freed, they go back to the
heap's top and are kept; the next step's larger buffers reach past what was touched before, so the
process's resident memory grows by about 4 × 320 KiB a step while the bytes in live allocations stay
flat. Nothing here depends on where glibc places a block: it only never trims.
"""

import argparse
import ctypes
import sys
import time

import torch
from torch import nn

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
BUFFERS = 4
GROWTH_BYTES = 320 * 2**10  # per buffer and step


def keep_freed_memory() -> None:
    """Never trim the heap, and keep blocks under 32 MiB (glibc's largest threshold) in it."""
    libc = ctypes.CDLL(None)
    if not libc.mallopt(M_TRIM_THRESHOLD, 2**31 - 1) or not libc.mallopt(M_MMAP_THRESHOLD, 32 * 2**20):
        raise SystemExit("mallopt refused the settings (not glibc?)")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--step-sleep-ms", type=float, default=30.0)
    args = parser.parse_args()
    keep_freed_memory()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(args.steps):
        x, y = torch.randn(256, 64), torch.randint(0, 10, (256,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        size = 2**20 + step * GROWTH_BYTES
        scratch = [torch.empty(size // 4).fill_(1.0) for _ in range(BUFFERS)]
        del scratch
        time.sleep(args.step_sleep_ms / 1000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
