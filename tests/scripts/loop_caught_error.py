"""A model whose submodule raises now and then and whose forward catches it (a fallback path)."""

import sys

import torch
from torch import nn


class Flaky(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls % 3 == 0:
            raise ValueError("caught by the caller")
        return self.inner(x)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.flaky = Flaky()
        self.head = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            h = self.flaky(x)
        except ValueError:
            h = x
        return self.head(h)


def main() -> int:
    torch.manual_seed(0)
    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(20):
        loss = model(torch.randn(8, 4)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
