"""An MLP trained with AdamW as scripts write it: the optimizer left to choose, or foreach, the loop
or fused asked for; the model cast to bf16 or fp16 with ``.to(dtype)``, or not.

Eight Linear layers of 1024 → 1024: 8,396,800 parameters, each weight 4 MiB in fp32, the whole
model 32 MiB.
"""

import argparse
import sys

import torch
from torch import nn

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def main() -> int:
    parser = argparse.ArgumentParser()
    implementations = ["default", "foreach", "loop", "fused"]
    parser.add_argument("--implementation", choices=implementations, default="default")
    parser.add_argument("--cast", choices=sorted(DTYPES), default="fp32")
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(*(layer for _ in range(8) for layer in (nn.Linear(1024, 1024), nn.ReLU())))
    dtype = DTYPES[args.cast]
    if dtype is not torch.float32:
        model = model.to(dtype)
    keywords = ({}, {"foreach": True}, {"foreach": False}, {"fused": True})
    chosen = dict(zip(implementations, keywords, strict=True))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, **chosen[args.implementation])
    for _ in range(args.steps):
        x = torch.randn(8, 1024, dtype=dtype)
        loss = model(x).float().pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
