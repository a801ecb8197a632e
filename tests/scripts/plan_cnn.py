"""A user's small image-classifier training script with a DataLoader (no autotune in it), to plan."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=16)
parser.add_argument("--workers", type=int, default=0)
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()

images = torch.randn(256, 3, 32, 32)
labels = torch.randint(0, 10, (256,))
dataset = TensorDataset(images, labels)
loader = DataLoader(dataset, batch_size=args.batch, shuffle=True, num_workers=args.workers)
model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
    nn.Flatten(), nn.Linear(32, 10),
)  # fmt: skip
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(args.epochs):
    correct = 0
    for x, y in loader:
        out = model(x)
        loss = F.cross_entropy(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        correct += (out.argmax(1) == y).sum().item()
    print(f"epoch {epoch}: accuracy {correct / len(images):.3f}")
