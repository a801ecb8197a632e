"""Images through a DataLoader in the main process (num_workers=0) whose dataset applies an
``nn.Module`` transform to each sample, as torchvision's transforms are: a module called at the
top level, gradients on, in training mode, before the model, with no parameter of its own."""

import argparse
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Flip(nn.Module):
    """A parameterless transform module (torchvision's RandomHorizontalFlip is one)."""

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return image.flip(-1)


class Images(Dataset):
    def __init__(self, count: int) -> None:
        self.images = torch.randn(count, 3, 16, 16)
        self.labels = torch.randint(0, 10, (count,))
        self.transform = Flip()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.transform(self.images[i]), self.labels[i]


class SmallConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8 * 16 * 16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(x)).flatten(1))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = SmallConvNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Images(args.steps * args.batch_size), batch_size=args.batch_size, num_workers=0)
    for images, labels in loader:
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
