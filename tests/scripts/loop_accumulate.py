"""Gradient accumulation over many micro-batches, no autotune.step(): steps are optimizer steps."""

import argparse
import sys

import torch
from torch import nn


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--accum", type=int, default=20)
    parser.add_argument("--micro", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(args.steps):
        for _ in range(args.accum):
            x = torch.randn(args.micro, 32)
            loss = model(x).square().mean() / args.accum
            loss.backward()
        opt.step()
        opt.zero_grad()
    return 0


if __name__ == "__main__":
    sys.exit(main())
