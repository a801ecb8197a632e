"""A training loop that does ``--extra`` units of wasted work a step beside its training (0 by default).

A unit is a 256 × 256 matrix product outside the model (about 0.45 ms of one core here, against
2.5 ms for the training step), so the samples per step stay 128 and the throughput is set by the
option: 1000 extra units make a configuration about 200 times slower than the default (a clear
loser), 1 about a sixth slower.
"""

import argparse
import sys

import torch
from torch import nn


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--extra", type=int, default=0)
    parser.add_argument("--steps", type=int, default=10_000)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(128, 64), torch.randint(0, 10, (128,))
    waste = torch.randn(256, 256)
    for _ in range(args.steps):
        for _ in range(args.extra):
            waste = torch.tanh(waste @ waste / 256)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
