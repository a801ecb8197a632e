"""A Lightning callback that profiles ``Trainer.fit`` with Lightning's own step boundaries.

``Trainer(callbacks=[AutotuneCallback(run_dir="runs/pl")])``: every option of ``autotune.profile``
is accepted. A step is one ``trainer.global_step`` (one optimizer step, gradient accumulation
included); validation inside the fit is the ``eval`` phase. Works with the ``lightning`` package,
or ``pytorch_lightning`` when only that is installed.
"""

from __future__ import annotations

from typing import Any

from autotune.integrations.region import CallbackRegion, RegionResult

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the older package name
    from pytorch_lightning.callbacks import Callback  # type: ignore[assignment]


class AutotuneCallback(RegionResult, Callback):
    """Profiles the fit: starts at ``on_fit_start``, ends at ``on_fit_end`` or on an exception."""

    def __init__(self, **options: Any) -> None:
        super().__init__()
        self.region = CallbackRegion("lightning", dict(options))

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        """The fit begins: the profile starts."""
        self.region.begin(int(trainer.global_step))  # under torchrun every rank profiles its own steps

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """A batch ended: a step ended when it moved ``global_step`` (the last micro-batch)."""
        self.region.at_global_step(int(trainer.global_step))

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        """The fit ended: the run is saved."""
        self.region.end()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        """The fit failed: what was measured is saved, the exception goes on."""
        self.region.end()
