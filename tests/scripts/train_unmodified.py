"""An unmodified training script: it knows nothing of autotune and takes its batch size as an option.

Its default batch (8) is small for this model, so a larger ``--batch-size`` trains more samples
per second: a tuner searching ``--batch-size`` through an ``arg`` template should beat the
baseline. ``--ignore-batch-size`` makes it parse the option and train at 8 anyway (a script that
ignores the tuned parameter). ``--fail`` makes every run crash; a huge ``--lr`` makes the loss
overflow to NaN/inf within a few steps (a diverging configuration).
"""

import argparse
import sys

import torch
from torch import nn


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--ignore-batch-size", action="store_true")
    parser.add_argument("--fail", action="store_true")
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()
    if args.fail:
        raise RuntimeError("this script always fails")
    batch = 8 if args.ignore_batch_size else args.batch_size
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    for _ in range(args.steps):
        x = torch.randn(batch, 64)
        y = torch.randint(0, 10, (batch,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
