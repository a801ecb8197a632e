"""The searchers by name: ``make_searcher("bayes" | "structured" | "random" | "grid", ...)``."""

from __future__ import annotations

from typing import Any

from autotune.search.searchers import BayesSearcher, Direction, GridSearcher, RandomSearcher, Searcher
from autotune.search.space import Space
from autotune.search.structured import StructuredSearcher

#: The searcher a study uses unless told otherwise: on the searcher benchmark
#: (``benchmarks/searcher_budget.py``) it is the one most often near the optimum on a tenth of a grid.
DEFAULT_SEARCHER = "structured"

SEARCHERS: dict[str, type[Searcher]] = {
    "bayes": BayesSearcher,
    "structured": StructuredSearcher,
    "random": RandomSearcher,
    "grid": GridSearcher,
}


def make_searcher(
    name: str, space: Space, seed: int = 0, direction: Direction = "maximize", **options: Any
) -> Searcher:
    """The searcher called ``name`` ("bayes", "structured", "random" or "grid"); ``options`` go to it."""
    try:
        cls = SEARCHERS[name]
    except KeyError:
        raise ValueError(f"unknown searcher {name!r}; choose one of: {', '.join(SEARCHERS)}") from None
    return cls(space, seed, direction, **options)
