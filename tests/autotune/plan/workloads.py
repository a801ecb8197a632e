"""Three models the planner was not written around: a transformer LM, a residual CNN, an LSTM LM."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, SEQ = 1000, 48


class TransformerLM(nn.Module):
    """Embedding, torch's own encoder layers (causal), a head."""

    def __init__(self, d: int = 96, layers: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d, 4, 4 * d, batch_first=True) for _ in range(layers)
        )
        self.head = nn.Linear(d, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1])
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=True)
        return self.head(x)


class ResidualCNN(nn.Module):
    """Conv-BN-ReLU residual stages and a pooled head (a small ResNet)."""

    def __init__(self, width: int = 24) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
                          nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width))
            for _ in range(3)
        )  # fmt: skip
        self.head = nn.Linear(width, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.stem(images))
        for block in self.blocks:
            x = F.relu(x + block(x))
        return self.head(x.mean(dim=(2, 3)))


class LSTMLM(nn.Module):
    """Embedding, a 2-layer LSTM, a head."""

    def __init__(self, d: int = 128) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.lstm = nn.LSTM(d, d, num_layers=2, batch_first=True)
        self.head = nn.Linear(d, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out)


def token_batch(b: int) -> tuple[tuple[Any, ...], Any]:
    tokens = torch.randint(0, VOCAB, (b, SEQ))
    return (tokens,), tokens


def image_batch(b: int) -> tuple[tuple[Any, ...], Any]:
    return (torch.randn(b, 3, 32, 32),), torch.randint(0, 10, (b,))


def lm_loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), target.reshape(-1))


def class_loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out.float(), target)


def adamw(params: list[nn.Parameter]) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=1e-3)


#: name -> (model factory, batch_fn, loss_fn, has repeated blocks for checkpointing)
WORKLOADS: dict[str, tuple[Any, Any, Any, bool]] = {
    "transformer_lm": (TransformerLM, token_batch, lm_loss, True),
    "residual_cnn": (ResidualCNN, image_batch, class_loss, True),
    "lstm_lm": (LSTMLM, token_batch, lm_loss, False),
}
