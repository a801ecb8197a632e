"""A user's small GPT-style training script (no autotune in it), written to be planned.

It does what real scripts do that a fake-tensor run must survive: random offsets into a NumPy token
array turned into Python ints for slicing, a tied embedding moved with ``.to(device)``, a NaN guard
on the loss, ``loss.item()`` in an f-string, gradient clipping, a learning-rate schedule, gradient
accumulation.
"""

import argparse
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--accum", type=int, default=1)
parser.add_argument("--seq", type=int, default=32)
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--width", type=int, default=64)
parser.add_argument("--layers", type=int, default=2)
parser.add_argument("--dropout", type=float, default=0.0, help="attention dropout")
parser.add_argument("--fail-at", type=int, default=0, help="raise at this step (0: never)")
args = parser.parse_args()

VOCAB = 97
rng = np.random.default_rng(0)
corpus = rng.integers(0, VOCAB, size=20_000, dtype=np.int64)


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, 4, d // 4).permute(2, 0, 3, 1, 4)
        dropout = args.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class TinyGPT(nn.Module):
    def __init__(self, d: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.pos = nn.Parameter(torch.zeros(1, args.seq, d))
        self.blocks = nn.ModuleList(Block(d) for _ in range(layers))
        self.head = nn.Linear(d, VOCAB, bias=False)
        self.head.weight = self.embed.weight  # tied

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos
        for block in self.blocks:
            x = block(x)
        logits = self.head(x)
        return F.cross_entropy(logits.view(-1, VOCAB), targets.reshape(-1))


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    starts = torch.randint(len(corpus) - args.seq - 1, (args.batch,))
    rows = [torch.from_numpy(corpus[int(i) : int(i) + args.seq + 1]) for i in starts]
    data = torch.stack(rows)
    return data[:, :-1], data[:, 1:]


device = "cpu"
model = TinyGPT(args.width, args.layers).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
for step in range(args.steps):
    if args.fail_at and step == args.fail_at:
        raise RuntimeError("the data ran out")
    for group in optimizer.param_groups:
        group["lr"] = 1e-3 * 0.5 * (1 + math.cos(math.pi * step / args.steps))
    for _ in range(args.accum):
        x, y = batch()
        loss = model(x.to(device), y.to(device)) / args.accum
        if torch.isnan(loss):
            print("skipping a NaN loss")
            continue
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    print(f"step {step}: loss {loss.item() * args.accum:.4f}")
