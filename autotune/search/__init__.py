"""The search library: spaces, searchers, studies and their storage, with nothing of how a trial runs.

A :class:`Study` asks its searcher for a configuration, calls an objective function with it and
records the outcome in its storage; :mod:`autotune.tuner` runs the user's script as that function.
Light to import: scikit-optimize (and numpy) load only when a Bayesian searcher first proposes a
model-based configuration.
"""

from autotune.search.records import Infeasible, Measured, StudyRecord, Trial
from autotune.search.registry import make_searcher
from autotune.search.searchers import (
    BayesSearcher,
    GridSearcher,
    Observation,
    RandomSearcher,
    Searcher,
    SearchExhausted,
)
from autotune.search.space import Choice, Float, Int, Space
from autotune.search.storage import JsonlStorage, SqliteStorage, TrialStorage
from autotune.search.study import Study

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
    "StudyRecord",
    "Trial",
    "TrialStorage",
    "make_searcher",
]
