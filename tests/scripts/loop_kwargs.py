"""A model called with keyword arguments only (as Hugging Face models are), labels first."""

import sys

import torch
from torch import nn


class KwargsModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.head = nn.Linear(16, 50)

    def forward(
        self, labels: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        logits = self.head(self.embed(input_ids) * attention_mask.unsqueeze(-1))
        return nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())


def main() -> int:
    torch.manual_seed(0)
    model = KwargsModel()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(16):
        ids = torch.randint(0, 50, (6, 10))
        batch = {"labels": ids.roll(1, 1), "input_ids": ids, "attention_mask": torch.ones(6, 10)}
        loss = model(**batch)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return 0


if __name__ == "__main__":
    sys.exit(main())
