"""An unmodified Lightning fit: a tiny model on random data, with validation and gradient accumulation.

Prints the trainer's own global_step at the end (``global_step=N``), for the profiler's step count
to be checked against.
"""

import argparse
import sys

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class TinyRegressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return nn.functional.mse_loss(self(x), y)

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", nn.functional.mse_loss(self(x), y))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--accumulate", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=24)
    parser.add_argument("--val-every", type=int, default=10, help="validation every N training batches")
    parser.add_argument("--precision", default="32-true")
    parser.add_argument("--accelerator", default="cpu", help="cpu, or gpu (scripts/gpu_check.sh)")
    parser.add_argument("--autotune-callback", metavar="RUN_DIR", help="profile with autotune's callback")
    args = parser.parse_args()
    callbacks = []
    if args.autotune_callback:
        from autotune.integrations import AutotuneCallback

        callbacks.append(AutotuneCallback(run_dir=args.autotune_callback, quiet=True))
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(2048, 32), torch.randn(2048, 1))
    val = TensorDataset(torch.randn(256, 32), torch.randn(256, 1))
    trainer = L.Trainer(
        accelerator=args.accelerator,
        devices=1,
        max_steps=args.max_steps,
        accumulate_grad_batches=args.accumulate,
        val_check_interval=args.val_every,
        limit_val_batches=4,
        num_sanity_val_steps=2,
        precision=args.precision,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
    )
    trainer.fit(
        TinyRegressor(),
        DataLoader(data, batch_size=args.batch_size, shuffle=True),
        DataLoader(val, batch_size=64),
    )
    print(f"global_step={trainer.global_step}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
