"""A Hugging Face ``TrainerCallback`` that profiles ``Trainer.train`` with its own step boundaries.

``Trainer(..., callbacks=[AutotuneTrainerCallback(run_dir="runs/hf")])``: every option of
``autotune.profile`` is accepted. A step is one ``state.global_step`` (one optimizer step,
gradient accumulation included); evaluation inside training is the ``eval`` phase.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from autotune.integrations.region import CallbackRegion, RegionResult


class AutotuneTrainerCallback(RegionResult, TrainerCallback):
    """Profiles training: starts at ``on_train_begin``, ends at ``on_train_end`` (or at exit)."""

    def __init__(self, **options: Any) -> None:
        self.region = CallbackRegion("hf-trainer", dict(options))

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Training begins: the profile starts."""
        self.region.begin(int(state.global_step))

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """An optimizer step ended: so does the profiled step."""
        self.region.at_global_step(int(state.global_step))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Training ended: the run is saved."""
        self.region.end()
