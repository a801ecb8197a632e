"""A leaking loop for the advice tests: every step's output (and its autograd graph) is kept.

``history.append(out)`` keeps each step's autograd graph alive, and with it the activations it
saved: the input (``--batch-size`` × 64 floats) and two ``--batch-size`` × 128 ReLU outputs, so the
process's resident memory grows by about 2.5 MiB every step at the default batch of 2048. ``--no-leak`` keeps
``loss.item()`` instead (a float): the same loop, flat memory. ``--step-sleep-ms`` stretches each
step so that the 10 Hz memory sampler sees enough readings during the measured steps.
"""

import argparse
import sys
import time

import torch
from torch import nn


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--step-sleep-ms", type=float, default=30.0)
    parser.add_argument("--no-leak", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    history = []
    for _ in range(args.steps):
        x = torch.randn(args.batch_size, 64)
        y = torch.randint(0, 10, (args.batch_size,))
        out = model(x)
        loss = nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward(retain_graph=not args.no_leak)
        opt.step()
        history.append(loss.item() if args.no_leak else out)  # the bug: a tensor with its graph
        time.sleep(args.step_sleep_ms / 1000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
