"""A user's small word-level LSTM language model script (no autotune in it), written to be planned.

Time-major batches as pytorch/examples' word_language_model makes them (``[seq, batch]``), a hidden
state carried between steps and detached, gradient clipping, plain SGD.
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=16)
parser.add_argument("--bptt", type=int, default=24)
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--width", type=int, default=96)
args = parser.parse_args()

VOCAB = 500
torch.manual_seed(0)
corpus = torch.randint(0, VOCAB, (args.bptt * (args.steps + 1) + 1, args.batch))


class WordLSTM(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.lstm = nn.LSTM(d, d, num_layers=2)
        self.head = nn.Linear(d, VOCAB)

    def forward(self, tokens, hidden):  # type: ignore[no-untyped-def]
        out, hidden = self.lstm(self.embed(tokens), hidden)
        return self.head(out), hidden


model = WordLSTM(args.width)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
hidden = None
for step in range(args.steps):
    i = step * args.bptt
    tokens, targets = corpus[i : i + args.bptt], corpus[i + 1 : i + 1 + args.bptt]
    if hidden is not None:
        hidden = tuple(h.detach() for h in hidden)
    logits, hidden = model(tokens, hidden)
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    optimizer.step()
    print(f"step {step} loss {loss.item():.3f}")
