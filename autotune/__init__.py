"""gpu-autotune: profile a PyTorch training loop, tune it, and say what to change.

``import autotune`` stays light: torch is imported with ``autotune.profile`` or ``autotune.prepare``,
and plotly, textual and scikit-optimize only by the commands that draw or tune.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autotune.lazy import lazy_attributes

if TYPE_CHECKING:
    from autotune.api import Profile, profile, step
    from autotune.knobs import KNOBS, BatchPlan, Knob, batch_plan, param
    from autotune.prepared import Prepared, autocast, backward, prepare
    from autotune.search import Choice, Float, Infeasible, Int, Space, Study

__version__ = "0.1.0"
__all__ = [
    "KNOBS",
    "BatchPlan",
    "Choice",
    "Float",
    "Infeasible",
    "Int",
    "Knob",
    "Prepared",
    "Profile",
    "Space",
    "Study",
    "__version__",
    "autocast",
    "backward",
    "batch_plan",
    "param",
    "prepare",
    "profile",
    "step",
]

#: Public names imported on first use, so that ``import autotune`` does not import torch, and
#: ``import autotune.fmt`` (the dashboard's number formatting) loads no profiler module.
_LAZY = {
    "Profile": "autotune.api",
    "profile": "autotune.api",
    "step": "autotune.api",
    "KNOBS": "autotune.knobs",
    "BatchPlan": "autotune.knobs",
    "Knob": "autotune.knobs",
    "batch_plan": "autotune.knobs",
    "param": "autotune.knobs",
    "Prepared": "autotune.prepared",
    "autocast": "autotune.prepared",
    "backward": "autotune.prepared",
    "prepare": "autotune.prepared",
    # the search library: pure Python until a Bayesian searcher fits its first model (then skopt, numpy)
    "Choice": "autotune.search",
    "Float": "autotune.search",
    "Infeasible": "autotune.search",
    "Int": "autotune.search",
    "Space": "autotune.search",
    "Study": "autotune.search",
}


__getattr__ = lazy_attributes(globals(), _LAZY, "autotune")
