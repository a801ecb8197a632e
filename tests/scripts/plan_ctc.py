"""A user's small speech-recognition training script (no autotune in it), written to be planned.

What CTC scripts do that shapes cannot tell in advance: the loss keeps only the frames and labels
that are not padding (``masked_select``, as Hugging Face's CTC heads do), and ``F.ctc_loss`` takes
the lengths as tensors, so its outputs' sizes depend on their values. With ``--numpy-features``
the features are computed with NumPy from a tensor, as audio feature extractors do.
"""

import argparse

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--frames", type=int, default=200)
parser.add_argument("--labels", type=int, default=30)
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--numpy-features", action="store_true", help="features made with NumPy, in this process")
args = parser.parse_args()

VOCAB, FEATURES = 32, 40


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(FEATURES, 128, kernel_size=5, padding=2)
        self.layers = nn.ModuleList(nn.Linear(128, 128) for _ in range(3))
        self.head = nn.Linear(128, VOCAB)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv(features.transpose(1, 2))).transpose(1, 2)
        for layer in self.layers:
            x = x + torch.relu(layer(x))
        return self.head(x).log_softmax(-1)


model = Encoder()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(args.steps):
    features = torch.randn(args.batch, args.frames, FEATURES)
    if args.numpy_features:  # as an audio feature extractor does: NumPy on the waveform's tensor
        waveform = torch.randn(args.batch, args.frames * 160).numpy()
        frames = waveform.reshape(args.batch, args.frames, 160)
        power = np.log1p((frames[..., :FEATURES] ** 2).astype(np.float32))
        features = torch.from_numpy(power)
    frame_lengths = torch.randint(args.frames // 2, args.frames + 1, (args.batch,))
    label_lengths = torch.randint(args.labels // 2, args.labels + 1, (args.batch,))
    labels = torch.randint(1, VOCAB, (args.batch, args.labels))
    label_mask = torch.arange(args.labels)[None, :] < label_lengths[:, None]
    log_probs = model(features)
    flat_labels = labels.masked_select(label_mask)  # the labels without padding, concatenated
    loss = F.ctc_loss(log_probs.transpose(0, 1), flat_labels, frame_lengths, label_lengths,
                      zero_infinity=True)  # fmt: skip
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    print(f"step {step}: loss {loss.item():.3f}")
