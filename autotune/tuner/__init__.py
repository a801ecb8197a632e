"""Tuning: the search space, the searchers and the in-process ``Study``.

Light to import: scikit-optimize (and numpy) load only when a Bayesian searcher first proposes a
model-based configuration.
"""

from autotune.tuner.records import Infeasible, Measured, Trial
from autotune.tuner.searchers import (
    BayesSearcher,
    GridSearcher,
    Observation,
    RandomSearcher,
    Searcher,
    SearchExhausted,
    make_searcher,
)
from autotune.tuner.space import Choice, Float, Int, Space
from autotune.tuner.storage import JsonlStorage, SqliteStorage, TrialStorage
from autotune.tuner.study import Study

__all__ = [
    "BayesSearcher",
    "Choice",
    "Float",
    "GridSearcher",
    "Infeasible",
    "Int",
    "JsonlStorage",
    "Measured",
    "Observation",
    "RandomSearcher",
    "SearchExhausted",
    "Searcher",
    "Space",
    "SqliteStorage",
    "Study",
    "Trial",
    "TrialStorage",
    "make_searcher",
]
