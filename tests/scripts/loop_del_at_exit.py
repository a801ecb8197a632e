"""A script that fails in its second step and leaves an object whose ``__del__`` raises at exit
(as timm's and others' loaders do): the error that matters is the first."""

import torch
from torch import nn


class Prefetcher:
    def __del__(self) -> None:
        raise RuntimeError("the prefetcher's stream was already closed")


loader = Prefetcher()
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    if step == 1:
        raise ValueError("bad sample at step 1")
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
