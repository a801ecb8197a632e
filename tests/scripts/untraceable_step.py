"""A step with a data-dependent shape (masked_select, as CTC losses have): fake tensors cannot trace it."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()

model = nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(args.steps):
    out = model(torch.randn(args.batch_size, 16))
    loss = out.masked_select(out > 0).sum()  # how many elements: known only from the data
    opt.zero_grad()
    loss.backward()
    opt.step()
