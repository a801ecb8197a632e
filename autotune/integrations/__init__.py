"""Callbacks that profile a framework's training with its own step boundaries.

``from autotune.integrations import AutotuneCallback`` (Lightning: ``Trainer(callbacks=[...])``) and
``from autotune.integrations import AutotuneTrainerCallback`` (Hugging Face:
``Trainer(callbacks=[...])``). Each framework is imported only when its callback is asked for, so
``import autotune`` (and this package) imports neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autotune.lazy import lazy_attributes

if TYPE_CHECKING:
    from autotune.integrations.huggingface import AutotuneTrainerCallback
    from autotune.integrations.lightning import AutotuneCallback

__all__ = ["AutotuneCallback", "AutotuneTrainerCallback"]

_LAZY = {
    "AutotuneCallback": "autotune.integrations.lightning",
    "AutotuneTrainerCallback": "autotune.integrations.huggingface",
}


__getattr__ = lazy_attributes(globals(), _LAZY, "autotune.integrations")
