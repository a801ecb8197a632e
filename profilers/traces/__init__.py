"""Offline analysis of torch.profiler (Kineto) traces: reading them, and GPU time per rank and job.

Used by the deep-profile window at the end of a run, by ``autotune report TRACE`` and by
``autotune compare``; it never runs inside a training step.
"""
