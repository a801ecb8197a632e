"""Step-time outliers for the advice tests: a few steps sleep ten times the usual step time.

The usual step is a small MLP step plus ``--step-ms`` of sleep (a steady step time on a busy CPU);
the steps listed in ``--slow-steps`` (1-based) sleep ``--slow-factor`` × ``--step-ms`` instead.
"""

import argparse
import sys
import time

import torch
from torch import nn


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--step-ms", type=float, default=5.0)
    parser.add_argument("--slow-steps", default="")
    parser.add_argument("--slow-factor", type=float, default=10.0)
    args = parser.parse_args()
    slow = {int(s) for s in args.slow_steps.split(",") if s}
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, args.steps + 1):
        x = torch.randn(16, 64)
        y = torch.randint(0, 10, (16,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        factor = args.slow_factor if step in slow else 1.0
        time.sleep(factor * args.step_ms / 1000)
        opt.step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
