"""Measurement layer: GPU/host sampling backends, step and phase timing, the run store.

Knows nothing of tuning. Importing this package is cheap: torch, pynvml and nvtx are imported
lazily by the modules that need them.
"""
