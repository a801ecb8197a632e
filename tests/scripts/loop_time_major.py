"""A word-level language model whose inputs are time-major ``[seq, batch]`` (nn.LSTM default)."""

import argparse
import sys

import torch
from torch import nn


class RNNModel(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.encoder = nn.Embedding(200, 24)
        self.rnn: nn.Module = nn.LSTM(24, 32) if kind == "lstm" else nn.GRU(24, 32, batch_first=True)
        self.decoder = nn.Linear(32, 200)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        output, _ = self.rnn(self.encoder(tokens))
        return self.decoder(output)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", choices=["lstm", "gru-batch-first"], default="lstm")
    parser.add_argument("--seq", type=int, default=35)
    parser.add_argument("--batch", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = RNNModel("lstm" if args.kind == "lstm" else "gru")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    shape = (args.seq, args.batch) if args.kind == "lstm" else (args.batch, args.seq)
    for _ in range(14):
        data = torch.randint(0, 200, shape)
        out = model(data)
        loss = nn.functional.cross_entropy(out.flatten(0, 1), data.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
