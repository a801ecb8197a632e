"""Checkpoints a model and its optimizer mid-training, as real scripts do (exit 1 if one fails)."""

import copy
import io
import pickle
import sys

import torch
from torch import nn


def main() -> int:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(12):
        x = torch.randn(8, 16)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step in (5, 10):  # after the profiler's warm-up: its hooks are on the model by now
            buffer = io.BytesIO()
            torch.save(model, buffer)  # the whole module, as word_language_model saves it
            buffer.seek(0)
            restored = torch.load(buffer, weights_only=False)
            twin = copy.deepcopy(model)
            pickle.loads(pickle.dumps(model))
            pickle.loads(pickle.dumps(opt.state_dict()))
            copy.deepcopy(opt)
            with torch.no_grad():
                torch.testing.assert_close(restored(x), model(x))
                torch.testing.assert_close(twin(x), model(x))
    return 0


if __name__ == "__main__":
    sys.exit(main())
