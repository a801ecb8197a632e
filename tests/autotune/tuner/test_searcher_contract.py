"""One contract suite run on every searcher (bayes, random, grid), then searcher-specific tests.

The contract: asks lie inside the space with the right types; the same seed gives the same asks;
a 30-trial ask/tell loop runs; replaying the history into a fresh searcher reproduces the next ask
exactly (a resumed study); infeasible outcomes are accepted; no configuration is asked twice while
an untried one exists, and a finite space ends in ``done`` / ``SearchExhausted``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from autotune.search import (
    BayesSearcher,
    Choice,
    Float,
    GridSearcher,
    Int,
    RandomSearcher,
    Searcher,
    SearchExhausted,
    Space,
    make_searcher,
)
from autotune.search.space import Value

MIXED = Space(
    batch=Int(4, 512, log=True),
    micro=Int(8, 256, power_of_two=True),
    lr=Float(1e-5, 1e-1, log=True),
    precision=Choice("fp32", "bf16", "fp16"),
)
SMALL = Space(batch=Int(8, 64, power_of_two=True), precision=Choice("fp32", "bf16"))  # 8 points
MEDIUM = Space(layers=Int(1, 6), precision=Choice("fp32", "bf16", "fp16"))  # 18 points
LOOP = Space(batch=Int(2, 256, log=True), precision=Choice("fp32", "bf16"))  # 510 points, 2 dimensions

# Small settings keep the GP cheap: few initial points, few acquisition candidates.
FACTORIES: dict[str, Callable[..., Searcher]] = {
    "bayes": lambda space, seed=0, direction="maximize": BayesSearcher(
        space, seed, direction, n_initial_points=3, n_candidates=300
    ),
    "random": lambda space, seed=0, direction="maximize": RandomSearcher(space, seed, direction),
    "structured": lambda space, seed=0, direction="maximize": make_searcher(
        "structured", space, seed, direction, n_candidates=300
    ),
    "grid": lambda space, seed=0, direction="maximize": GridSearcher(
        space, seed, direction, points_per_dim=16
    ),
}


@pytest.fixture(params=sorted(FACTORIES))
def make(request: pytest.FixtureRequest) -> Callable[..., Searcher]:
    return FACTORIES[request.param]


def objective(params: dict[str, Value]) -> float | None:
    """A throughput-like landscape with an out-of-memory cliff (None = infeasible)."""
    batch = params.get("batch", params.get("layers", 8))
    assert isinstance(batch, int)
    if batch * (2 if params.get("precision") == "fp32" else 1) > 256:
        return None
    speed = {"fp32": 1.0, "bf16": 1.8, "fp16": 1.7}[str(params["precision"])]
    lr = params.get("lr", 1e-3)
    assert isinstance(lr, float)
    return speed * math.log2(batch) - 0.1 * (math.log10(lr) + 3) ** 2


def run(searcher: Searcher, n: int) -> list[dict[str, Value]]:
    asked = []
    for _ in range(n):
        params = searcher.ask()
        asked.append(params)
        value = objective(params)
        searcher.tell(params, value, feasible=value is not None)
    return asked


# --------------------------------------------------------------------------- contract


def test_asks_are_inside_the_space_with_the_right_types(make):
    for params in run(make(MIXED), 12):
        assert MIXED.contains(params), params
        assert type(params["batch"]) is int and type(params["micro"]) is int
        assert type(params["lr"]) is float and type(params["precision"]) is str


def test_same_seed_same_asks_other_seed_other_asks(make):
    # 16 asks: the structured searcher's start and line searches are a design (seed-free on a space
    # with no unordered knob but precision); its seed acts once its model takes over
    first, again, other = (
        run(make(MIXED, seed=7), 16),
        run(make(MIXED, seed=7), 16),
        run(make(MIXED, seed=8), 16),
    )
    assert first == again
    assert first != other


def test_thirty_trial_loop(make):
    searcher = make(LOOP, seed=3)  # two dimensions keep 27 GP fits cheap
    asked = run(searcher, 30)
    assert len(searcher.history) == 30 and not searcher.done
    assert len({LOOP.key(p) for p in asked}) == 30 and all(LOOP.contains(p) for p in asked)


def test_replay_reproduces_the_next_asks_exactly(make):
    original = make(MIXED, seed=5)
    run(original, 7)
    rebuilt = make(MIXED, seed=5)
    rebuilt.replay(original.history)
    assert rebuilt.history == original.history
    assert run(rebuilt, 2) == run(original, 2)  # the next asks, told the same outcomes


def test_ask_is_pure_until_told(make):
    searcher = make(SMALL)
    run(searcher, 4)
    assert searcher.ask() == searcher.ask()


def test_infeasible_outcomes_are_accepted(make):
    searcher = make(MIXED, seed=1)
    for i in range(6):  # all infeasible, with and without a value: the search must go on
        params = searcher.ask()
        searcher.tell(params, None if i % 2 else 123.0, feasible=False)
    params = searcher.ask()
    assert MIXED.contains(params)
    searcher.tell(params, 1.0)
    assert MIXED.contains(searcher.ask())


def test_a_told_point_from_elsewhere_is_part_of_the_history(make):
    searcher = make(SMALL)
    baseline = {"batch": 12, "precision": "fp32"}  # outside the space (not a power of two)
    searcher.tell(baseline, 3.0)
    searcher.tell({"batch": 8, "precision": "bf16"}, 4.0)
    asked = run(searcher, 3)
    assert all(SMALL.contains(p) and p != {"batch": 8, "precision": "bf16"} for p in asked)


@pytest.mark.parametrize("space", [SMALL, MEDIUM], ids=["8-points", "18-points"])
def test_no_duplicates_until_exhausted(make, space):
    searcher = make(space, seed=2)
    asked = run(searcher, space.size)
    assert sorted(map(space.key, asked)) == sorted(map(space.key, space.points()))
    assert searcher.done
    with pytest.raises(SearchExhausted):
        searcher.ask()


def test_tell_rejects_malformed_outcomes(make):
    searcher = make(SMALL)
    with pytest.raises(ValueError, match="finite number"):
        searcher.tell({"batch": 8, "precision": "fp32"}, None)
    with pytest.raises(ValueError, match="finite number"):
        searcher.tell({"batch": 8, "precision": "fp32"}, float("nan"))
    with pytest.raises(ValueError, match="missing"):
        searcher.tell({"batch": 8}, 1.0)
    assert searcher.history == ()


def test_impossible_configurations_are_never_asked_and_replay(make):
    searcher = make(MEDIUM, seed=4)
    impossible = [{"layers": n, "precision": "fp16"} for n in (4, 5, 6)]
    for params in impossible:
        searcher.tell(params, None, feasible=False, impossible=True)
    asked = run(searcher, MEDIUM.size - len(impossible))
    assert not any(p in impossible for p in asked)
    assert searcher.done
    rebuilt = make(MEDIUM, seed=4)
    rebuilt.replay(searcher.history)  # 4-field observations
    assert rebuilt.history == searcher.history and rebuilt.history[0].impossible
    with pytest.raises(ValueError, match="cannot be feasible"):
        searcher.tell({"layers": 1, "precision": "fp32"}, 1.0, impossible=True)


# --------------------------------------------------------------------------- specific


def test_make_searcher_by_name():
    assert isinstance(make_searcher("bayes", SMALL, seed=1, n_initial_points=2), BayesSearcher)
    assert make_searcher("grid", SMALL, points_per_dim=2).grid[0] in list(SMALL.points())
    known = "bayes, structured, random, grid"
    with pytest.raises(ValueError, match=f"unknown searcher 'optuna'; choose one of: {known}"):
        make_searcher("optuna", SMALL)
    with pytest.raises(ValueError, match="direction"):
        RandomSearcher(SMALL, direction="max")  # type: ignore[arg-type]


def test_grid_visits_its_grid_then_is_done():
    searcher = GridSearcher(MIXED, seed=0, points_per_dim=2)
    assert len(searcher.grid) == 2 * 2 * 2 * 3
    asked = run(searcher, len(searcher.grid))
    assert sorted(map(MIXED.key, asked)) == sorted(map(MIXED.key, MIXED.grid(2)))
    assert searcher.done  # a Float space is infinite, but the grid is finite
    in_order = GridSearcher(SMALL, points_per_dim=4, shuffle=False)
    assert run(in_order, 3) == SMALL.grid(4)[:3]


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_bayes_moves_toward_the_optimum(direction):
    space = Space(x=Int(1, 200))
    searcher = BayesSearcher(space, seed=0, direction=direction, n_initial_points=3, n_candidates=300)
    for _ in range(10):
        params = searcher.ask()
        searcher.tell(params, float(params["x"]))  # a slope: the optimum is an end of the range
    xs = [o.params["x"] for o in searcher.history]
    assert (max(xs) >= 190) if direction == "maximize" else (min(xs) <= 10)


def test_bayes_penalty_sits_above_the_feasible_losses():
    searcher = BayesSearcher(SMALL, penalty_margin=0.5)  # not the default: round numbers
    assert searcher.penalty([-10.0, -4.0]) == pytest.approx(-1.0)  # worst + half the spread
    assert searcher.penalty([-4.0]) == pytest.approx(-2.0)  # one value: half its magnitude
    assert searcher.penalty([0.0, 0.0]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="n_initial_points"):
        BayesSearcher(SMALL, n_initial_points=0)
    with pytest.raises(ValueError, match="acq_func"):
        BayesSearcher(SMALL, acq_func="UCB")  # type: ignore[arg-type]


@pytest.mark.parametrize("acq_func", ["gp_hedge", "LCB", "PI"])
def test_bayes_other_acquisition_functions(acq_func):
    searcher = BayesSearcher(MEDIUM, seed=1, n_initial_points=2, acq_func=acq_func, n_candidates=200)
    asked = run(searcher, 8)
    assert len({MEDIUM.key(p) for p in asked}) == 8


def test_bayes_replaces_a_repeated_skopt_proposal(monkeypatch):
    """In a space with a Float, skopt's optimiser may land on a tried point: an untried one is taken."""
    import skopt

    space = Space(n=Choice("a", "b"), x=Float(0.0, 1.0))
    searcher = BayesSearcher(space, seed=0, n_initial_points=2, n_candidates=50)
    tried = [{"n": "a", "x": 1.0}, {"n": "b", "x": 0.5}, {"n": "a", "x": 0.25}]
    for params in tried:
        searcher.tell(params, params["x"])
    monkeypatch.setattr(skopt.Optimizer, "ask", lambda self: space.to_skopt_point(tried[0]))
    proposed = searcher.ask()
    assert space.contains(proposed) and not searcher.is_seen(proposed)
    assert proposed == searcher.ask()  # still deterministic


def test_bayes_leaves_impossible_configurations_out_of_its_model(monkeypatch):
    """Not in the GP's data, not among the initial points; the failed ones are (as a penalty)."""
    fitted: list[list[dict[str, Value]]] = []
    model_suggest = BayesSearcher._model_suggest

    def spy(self, usable, feasible_losses, rng):
        fitted.append([o.params for o in usable])
        return model_suggest(self, usable, feasible_losses, rng)

    monkeypatch.setattr(BayesSearcher, "_model_suggest", spy)
    searcher = FACTORIES["bayes"](MEDIUM)  # 3 initial points
    for n in (4, 5, 6):
        searcher.tell({"layers": n, "precision": "fp16"}, None, feasible=False, impossible=True)
    searcher.tell({"layers": 1, "precision": "fp32"}, 1.0)
    searcher.tell({"layers": 2, "precision": "fp32"}, None, feasible=False)  # ran and failed
    searcher.ask()
    assert fitted == []  # 2 usable trials: still drawing the initial points
    searcher.tell({"layers": 3, "precision": "bf16"}, 2.0)
    searcher.ask()
    assert fitted == [[{"layers": 1, "precision": "fp32"}, {"layers": 2, "precision": "fp32"},
                       {"layers": 3, "precision": "bf16"}]]  # fmt: skip
