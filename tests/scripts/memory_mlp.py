"""A training script whose memory is known: an MLP of ``--layers`` Linear(width, width) blocks with AdamW.

Per step it holds the fp32 weights (``layers × width² × 4`` bytes plus biases), their gradients, and
AdamW's two moments, so 16 bytes per parameter, plus the activations the backward keeps
(``batch × width × 4`` bytes per Linear and per ReLU). A ``--batch`` large enough for one activation to
pass the GPU's memory ends the first step with CUDA's out-of-memory error, as a batch size copied
from a bigger GPU does. Runs on the CPU when there is no GPU.
"""

import argparse
import sys

import torch
from torch import nn


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    blocks = [m for _ in range(args.layers) for m in (nn.Linear(args.width, args.width), nn.ReLU())]
    model = nn.Sequential(*blocks).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(args.steps):
        x = torch.randn(args.batch, args.width, device=device)
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
