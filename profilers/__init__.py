"""Measurement layer: in-training code (``runtime``), trace analysis (``traces``), the run directory.

``contract`` is the run directory's definition, which every other layer reads runs through. Knows
nothing of tuning. Importing this package is cheap: torch, pynvml and nvtx are imported lazily by
the modules that need them.
"""
