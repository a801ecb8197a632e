"""Training loop in ``main()`` under ``if __name__ == "__main__"``, exiting with ``sys.exit(main())``.

Its ``--name`` option has the same spelling as one of ``autotune profile``'s own options: it must
reach this script untouched when given after the script path.
"""

import argparse
import json
import os
import sys
import time

import torch
from torch import nn


def parse_args(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--name", default="unnamed")
    parser.add_argument("--lr", type=float, default=1e-3)
    return parser.parse_args(argv)


def train(args):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(128, 1024), nn.Tanh(), nn.Linear(1024, 1024), nn.Tanh(), nn.Linear(1024, 1)
    )
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    stamps = []
    for _ in range(args.steps):
        xb = torch.randn(args.batch_size, 128)
        yb = torch.randn(args.batch_size, 1)
        loss = nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        stamps.append(time.perf_counter())
    return stamps


def main():
    args = parse_args(sys.argv[1:])
    stamps = train(args)
    timing = {
        "stamps": stamps,
        "steps": len(stamps),
        "samples_per_step": args.batch_size,
        "argv": sys.argv,
        "name": args.name,
        "lr": args.lr,
        "module_name": __name__,
    }
    if os.environ.get("AUTOTUNE_TEST_TIMING"):
        with open(os.environ["AUTOTUNE_TEST_TIMING"], "w") as f:
            json.dump(timing, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
