"""Training loop at module level: Adam, a DataLoader over a TensorDataset, steps/batch from argv.

Usage: loop_module_level.py [--steps N] [--batch-size B] [anything else, recorded and ignored]
With AUTOTUNE_TEST_TIMING=FILE it writes its own timing there (see ``timing`` below).
"""

import argparse
import json
import os
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=64)
args, unknown = parser.parse_known_args()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(args.steps * args.batch_size, 128)
y = torch.randint(0, 10, (args.steps * args.batch_size,))
loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True, drop_last=True)
loss_fn = nn.CrossEntropyLoss()

stamps = []
for xb, yb in loader:
    loss = loss_fn(model(xb), yb)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    stamps.append(time.perf_counter())

timing = {"stamps": stamps, "steps": len(stamps), "samples_per_step": args.batch_size, "argv": sys.argv}
if os.environ.get("AUTOTUNE_TEST_TIMING"):
    with open(os.environ["AUTOTUNE_TEST_TIMING"], "w") as f:
        json.dump(timing, f)
