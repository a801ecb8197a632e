"""Resident memory that grows while nothing more is held: the C allocator keeps what was freed.

The script tells glibc never to give freed heap memory back (``mallopt(M_TRIM_THRESHOLD)``, as a
program tuning its allocator for speed does) and to serve every block under 32 MiB from the heap
(``M_MMAP_THRESHOLD``). Each step, after a small training step, it fills four scratch buffers, each
320 KiB larger than the step before (1 MiB at step 0), and frees them, as a C extension (a decoder,
a tokenizer) does with ``malloc``/``free``. Freed, they go back to the heap's top and are kept; the
next step's larger buffers reach past what was touched before, so the process's resident memory
grows by 4 × 320 KiB a step while the bytes in live allocations stay flat.

The buffers are taken with ``malloc`` itself, one after the other with nothing allocated between
them: made as tensors, the tensors' own small allocations landed between the buffers now and then,
and the split heap then grew by one whole buffer (14-25 MiB) at once and not at all for the next
ten steps (seen in 2 of 3 runs), a line no longer straight enough to test against.
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


def c_library() -> ctypes.CDLL:
    """The C library, with ``malloc``, ``memset`` and ``free`` typed for 64-bit pointers."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    return libc


def keep_freed_memory(libc: ctypes.CDLL) -> None:
    """Never trim the heap, and keep blocks under 32 MiB (glibc's largest threshold) in it."""
    if not libc.mallopt(M_TRIM_THRESHOLD, 2**31 - 1) or not libc.mallopt(M_MMAP_THRESHOLD, 32 * 2**20):
        raise SystemExit("mallopt refused the settings (not glibc?)")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--step-sleep-ms", type=float, default=30.0)
    args = parser.parse_args()
    libc = c_library()
    keep_freed_memory(libc)
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
        blocks = [libc.malloc(size) for _ in range(BUFFERS)]
        if not all(blocks):
            raise MemoryError(f"malloc({size}) failed")
        for b in blocks:
            libc.memset(b, 1, size)
        for b in blocks:
            libc.free(b)
        time.sleep(args.step_sleep_ms / 1000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
