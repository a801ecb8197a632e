"""A ``Trainer`` class whose ``fit()`` runs the loop, with 2 micro-batches accumulated per step.

One step is one optimizer step, so a step holds 2 x micro-batch samples.
"""

import argparse
import json
import os
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, micro_batch, accumulate=2):
        torch.manual_seed(0)
        self.accumulate = accumulate
        self.micro_batch = micro_batch
        self.model = nn.Sequential(
            nn.Linear(128, 1024), nn.GELU(), nn.Linear(1024, 1024), nn.GELU(), nn.Linear(1024, 10)
        )
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.loss_fn = nn.CrossEntropyLoss()

    def loader(self, steps):
        n = steps * self.accumulate * self.micro_batch
        data = TensorDataset(torch.randn(n, 128), torch.randint(0, 10, (n,)))
        return DataLoader(data, batch_size=self.micro_batch, drop_last=True)

    def fit(self, steps):
        stamps = []
        self.opt.zero_grad(set_to_none=True)
        for i, (xb, yb) in enumerate(self.loader(steps)):
            loss = self.loss_fn(self.model(xb), yb) / self.accumulate
            loss.backward()
            if (i + 1) % self.accumulate == 0:
                self.opt.step()
                self.opt.zero_grad(set_to_none=True)
                stamps.append(time.perf_counter())
        return stamps


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--micro-batch", type=int, default=32)
    args = parser.parse_args()
    trainer = Trainer(args.micro_batch)
    stamps = trainer.fit(args.steps)
    timing = {
        "stamps": stamps,
        "steps": len(stamps),
        "samples_per_step": 2 * args.micro_batch,
        "micro_batch": args.micro_batch,
        "argv": sys.argv,
    }
    if os.environ.get("AUTOTUNE_TEST_TIMING"):
        with open(os.environ["AUTOTUNE_TEST_TIMING"], "w") as f:
            json.dump(timing, f)
