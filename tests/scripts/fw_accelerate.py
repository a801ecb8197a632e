"""A loop prepared by Hugging Face accelerate, with its gradient accumulation and mixed precision."""

import argparse
import sys

import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--accumulate", type=int, default=4)
    parser.add_argument("--batches", type=int, default=96)
    parser.add_argument("--mixed-precision", default="no")
    args = parser.parse_args()
    torch.manual_seed(0)
    accelerator = Accelerator(
        cpu=True, gradient_accumulation_steps=args.accumulate, mixed_precision=args.mixed_precision
    )
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = TensorDataset(
        torch.randn(args.batches * args.batch_size, 32),
        torch.randint(0, 4, (args.batches * args.batch_size,)),
    )
    loader = DataLoader(data, batch_size=args.batch_size)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    updates = 0
    for x, y in loader:
        with accelerator.accumulate(model):
            loss = nn.functional.cross_entropy(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            updates += accelerator.sync_gradients
    print(f"optimizer_updates={updates}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
