"""gpu-autotune: profile a PyTorch training loop, tune it, and say what to change.

``import autotune`` stays light: torch is imported when a profile starts, and plotly, textual and
scikit-optimize only by the commands that draw or tune.
"""

from autotune.api import Profile, profile, step

__version__ = "0.1.0"
__all__ = ["Profile", "__version__", "profile", "step"]
