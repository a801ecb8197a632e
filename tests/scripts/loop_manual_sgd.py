"""No optimizer: ``loss.backward()`` then a hand-written SGD update. A step is a backward pass."""

import argparse
import json
import os
import sys
import time

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=0.01)
args = parser.parse_args()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
stamps = []
for _ in range(args.steps):
    xb = torch.randn(args.batch_size, 128)
    yb = torch.randint(0, 10, (args.batch_size,))
    loss = nn.functional.cross_entropy(model(xb), yb)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= args.lr * p.grad
            p.grad = None
    stamps.append(time.perf_counter())

timing = {"stamps": stamps, "steps": len(stamps), "samples_per_step": args.batch_size, "argv": sys.argv}
if os.environ.get("AUTOTUNE_TEST_TIMING"):
    with open(os.environ["AUTOTUNE_TEST_TIMING"], "w") as f:
        json.dump(timing, f)
