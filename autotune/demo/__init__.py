"""Built-in demo workloads: a small GPT-style language model and a small CNN on synthetic data.

``autotune demo`` profiles them, the overhead benchmark times them, and the tuner's tests reuse
:func:`autotune.demo.models.train`. Nothing is downloaded: every dataset is generated from a seed.
Import :mod:`autotune.demo.models` explicitly; this package does not import torch by itself.
"""
