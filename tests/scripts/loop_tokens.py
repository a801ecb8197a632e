"""A tiny embedding language model fed integer token ids of shape (B, T)."""

import argparse
import json
import os
import sys
import time

import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab=1024, dim=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        h = self.embed(tokens)
        return self.head(h + self.mlp(h))


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--seq-len", type=int, default=64)
args = parser.parse_args()

torch.manual_seed(0)
vocab = 1024
model = TinyLM(vocab)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
stamps = []
for _ in range(args.steps):
    tokens = torch.randint(0, vocab, (args.batch_size, args.seq_len + 1))
    logits = model(tokens[:, :-1].contiguous())
    loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    stamps.append(time.perf_counter())

timing = {
    "stamps": stamps,
    "steps": len(stamps),
    "samples_per_step": args.batch_size,
    "tokens_per_step": args.batch_size * args.seq_len,
    "argv": sys.argv,
}
if os.environ.get("AUTOTUNE_TEST_TIMING"):
    with open(os.environ["AUTOTUNE_TEST_TIMING"], "w") as f:
        json.dump(timing, f)
