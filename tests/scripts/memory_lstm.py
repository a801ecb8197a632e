"""A word-level LSTM language model updated by hand (no optimizer), as pytorch/examples' is.

Its steps are found from backward passes, so the profiler's FLOP count and trace run in the middle
of the measured steps. ``--report-rss`` prints the script's own memory figures on its last line:
``rss_after_torch=<bytes> max_rss=<bytes>`` (resident memory once torch is imported, and the
process's peak), for a test to compare with what the profiler says.
"""

import argparse
import resource
import sys

import psutil
import torch
from torch import nn

RSS_AFTER_TORCH = psutil.Process().memory_info().rss


class WordLM(nn.Module):
    def __init__(self, vocab: int, width: int) -> None:
        super().__init__()
        self.encoder = nn.Embedding(vocab, width)
        self.rnn = nn.LSTM(width, width, 2)
        self.decoder = nn.Linear(width, vocab)

    def forward(self, tokens: torch.Tensor, hidden: tuple[torch.Tensor, torch.Tensor]) -> tuple:
        output, hidden = self.rnn(self.encoder(tokens), hidden)
        return self.decoder(output), hidden


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--vocab", type=int, default=20000)
    parser.add_argument("--report-rss", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = WordLM(args.vocab, 200)
    hidden = (torch.zeros(2, 20, 200), torch.zeros(2, 20, 200))
    for _ in range(args.steps):
        data = torch.randint(0, args.vocab, (35, 20))
        model.zero_grad()
        hidden = (hidden[0].detach(), hidden[1].detach())
        logits, hidden = model(data, hidden)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), data.flatten())
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-0.5)
    if args.report_rss:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(f"rss_after_torch={RSS_AFTER_TORCH} max_rss={peak}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
