"""A plain training script that knows nothing of gpu-autotune: the README's quick start runs it.

A small classifier on synthetic data (nothing is downloaded), trained on CUDA when there is one.
Its options are what a tuner can search: ``--batch-size`` and ``--lr``.
"""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    """Train for ``--epochs`` epochs and print the last loss of each."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    features = torch.randn(8192, 128)
    labels = (features[:, :10].sum(dim=1) > 0).long()
    loader = DataLoader(TensorDataset(features, labels), batch_size=args.batch_size, shuffle=True)
    model = nn.Sequential(
        nn.Linear(128, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 2)
    ).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
