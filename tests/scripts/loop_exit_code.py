"""Trains a few steps, then exits with status 7."""

import json
import os
import sys
import time

import torch
from torch import nn

STEPS = 6
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
stamps = []
for _ in range(STEPS):
    loss = model(torch.randn(16, 32)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    stamps.append(time.perf_counter())
if os.environ.get("AUTOTUNE_TEST_TIMING"):
    with open(os.environ["AUTOTUNE_TEST_TIMING"], "w") as f:
        json.dump({"stamps": stamps, "steps": len(stamps), "samples_per_step": 16}, f)
sys.exit(7)
