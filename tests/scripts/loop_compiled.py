"""A torch.compile'd model: the profiler's hooks run inside the traced region during the warm-up."""

import sys

import torch
from torch import nn


def main() -> int:
    torch.manual_seed(0)
    model = torch.compile(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(14):
        loss = model(torch.randn(8, 16)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
