"""A training loop whose step waits like a GPU step: a little host compute, then a wait for "the device".

On a GPU the host launches a step's kernels and then waits for them; here a small model's forward,
backward and optimizer step stand for the launches and ``time.sleep(--wait-ms)`` for the device's
time, so the step's length is mostly the wait, as on a GPU, and a busy CPU beside it stretches only
the short host part. ``--slower-pct P`` injects a slowdown: every step sleeps P% of its own length
more (measured in the step itself, so the slowdown stays P% whatever the machine's load).
"""

import argparse
import sys
import time

import torch
from torch import nn


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--wait-ms", type=float, default=6.0)
    parser.add_argument("--slower-pct", type=float, default=0.0)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(args.steps):
        start_s = time.perf_counter()
        x = torch.randn(16, 64)
        y = torch.randint(0, 10, (16,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(args.wait_ms / 1000)
        if args.slower_pct:
            time.sleep(args.slower_pct / 100 * (time.perf_counter() - start_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
