"""Optimizers that take a closure: LBFGS (several evaluations per step) or SGD(closure)."""

import argparse
import sys

import torch
from torch import nn


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--optimizer", choices=["lbfgs", "sgd"], default="lbfgs")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--max-iter", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 1))
    if args.optimizer == "lbfgs":
        opt: torch.optim.Optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=args.max_iter)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
    evaluations = 0
    for _ in range(args.steps):
        x, y = torch.randn(args.batch, 32), torch.randn(args.batch, 1)

        def closure(x: torch.Tensor = x, y: torch.Tensor = y) -> torch.Tensor:
            nonlocal evaluations
            evaluations += 1
            opt.zero_grad()
            loss = (model(x) - y).square().mean()
            loss.backward()
            return loss

        opt.step(closure)
    print(f"closure evaluations: {evaluations}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
