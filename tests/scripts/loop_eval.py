"""Training with periodic evaluation: no_grad + eval() forwards, and a generate-like loop."""

import argparse
import sys

import torch
from torch import nn


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--eval-batches", type=int, default=6)
    parser.add_argument("--eval-batch", type=int, default=32)
    parser.add_argument("--mode", choices=["no_grad", "inference", "eval_only"], default="no_grad")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(100, 32), nn.Flatten(), nn.Linear(32 * 12, 100))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(args.steps):
        if step % args.eval_every == 0:
            model.eval()
            context = {"no_grad": torch.no_grad, "inference": torch.inference_mode}.get(args.mode)
            with context() if context else torch.enable_grad():
                for _ in range(args.eval_batches):
                    model(torch.randint(0, 100, (args.eval_batch, 12)))
            model.train()
        x = torch.randint(0, 100, (args.batch, 12))
        loss = nn.functional.cross_entropy(model(x), x[:, 0])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
