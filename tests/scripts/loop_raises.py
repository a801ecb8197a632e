"""Trains a few steps, then fails with the user's own ValueError."""

import argparse
import json
import os
import time

import torch
from torch import nn


def check_batch(step):
    if step == STEPS:
        raise ValueError("user bug 42")


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()
STEPS = args.steps

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
stamps = []
for step in range(1, STEPS + 1):
    loss = model(torch.randn(16, 32)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    stamps.append(time.perf_counter())
    if os.environ.get("AUTOTUNE_TEST_TIMING"):
        with open(os.environ["AUTOTUNE_TEST_TIMING"], "w") as f:
            json.dump({"stamps": stamps, "steps": len(stamps), "samples_per_step": 16}, f)
    check_batch(step)
