"""A loop whose speed does not depend on ``--seed`` at all, with random stalls injected into its steps.

Each step stalls with probability 0.25 for 2-12 ms (on a step well under 1 ms), so a trial's
throughput is mostly noise, and the best of several seeds is "faster" by luck alone. The stalls are
random across runs but reproducible: each run takes the next number from a counter file named by
``STALL_COUNTER`` (when set), so a test sees the same noise every time it runs.
"""

import argparse
import fcntl
import os
import random
import sys
import time

import torch
from torch import nn


def run_number() -> int:
    """The next number from the counter file (0 without one)."""
    path = os.environ.get("STALL_COUNTER")
    if not path:
        return random.SystemRandom().randrange(2**31)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        n = int(handle.read() or 0)
        handle.seek(0)
        handle.truncate()
        handle.write(str(n + 1))
    return n


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0, help="changes the data, never the speed")
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    stalls = random.Random(1_000_003 * run_number() + 17)
    torch.manual_seed(args.seed)
    model = nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(args.steps):
        x = torch.randn(32, 16)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if stalls.random() < 0.25:
            time.sleep(stalls.uniform(0.002, 0.012))
    return 0


if __name__ == "__main__":
    sys.exit(main())
