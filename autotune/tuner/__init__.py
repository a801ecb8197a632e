"""Tuning: the search space, the searchers and the in-process ``Study``.

Light to import: scikit-optimize (and numpy) load only when a Bayesian searcher first proposes a
model-based configuration.
"""

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
from autotune.tuner.study import Infeasible, JsonlStorage, Study, Trial, TrialStorage

__all__ = [
    "BayesSearcher",
    "Choice",
    "Float",
    "GridSearcher",
    "Infeasible",
    "Int",
    "JsonlStorage",
    "Observation",
    "RandomSearcher",
    "SearchExhausted",
    "Searcher",
    "Space",
    "Study",
    "Trial",
    "TrialStorage",
    "make_searcher",
]
