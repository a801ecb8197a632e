"""A step the plan cannot trace: an op whose output size depends on the values of a large tensor
(``repeat_interleave`` with 64 MiB of repeat counts), which the plan neither runs for real (too
large) nor has a bound for (the counts could sum to anything)."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()

model = nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
repeats = torch.randint(0, 2, (4096, 4097)).flatten()  # 128 MiB of int64 counts
for _ in range(args.steps):
    out = model(torch.randn(args.batch_size, 16))
    values = out.sum(0).mean().expand(repeats.numel())
    spread = torch.repeat_interleave(values, repeats)  # how many: known only from the data
    loss = out.sum() + spread.sum() * 0
    opt.zero_grad()
    loss.backward()
    opt.step()
