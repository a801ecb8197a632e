"""Tuning the user's script: trials of it in their own processes, the study that searches them.

The search itself (spaces, searchers, the ``Study``) is :mod:`autotune.search`; this package runs
the script for each configuration (``trials``), on local devices or a Ray cluster (``running``,
``devices``, ``ray_executor``), re-measures the best (``confirm``) and writes the study's summary.
"""
