"""An input-bound loop for the advice tests: a DataLoader whose dataset sleeps in ``__getitem__``.

Each step waits ``--batch-size`` × ``--item-sleep-ms`` for its batch (single-process loading, the
default ``num_workers=0``), then trains a small MLP on it. ``--item-sleep-ms 0`` is the same loop
with free data.
"""

import argparse
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    """Random samples that each take ``sleep_s`` to "read"."""

    def __init__(self, n: int, sleep_s: float) -> None:
        self.n, self.sleep_s = n, sleep_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if self.sleep_s > 0:
            time.sleep(self.sleep_s)
        g = torch.Generator().manual_seed(i)
        return torch.randn(256, generator=g), int(i % 10)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--item-sleep-ms", type=float, default=0.5)
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = SlowDataset(args.steps * args.batch_size, args.item_sleep_ms / 1000)
    loader = DataLoader(data, batch_size=args.batch_size, num_workers=args.workers)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
