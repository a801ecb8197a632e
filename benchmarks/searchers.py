"""How many evaluations each searcher needs to reach 95% of a known optimum, and the GP's overhead.

Analytic landscapes (optimum known by exhaustive evaluation):

- ``oom-cliff``: throughput of micro-batch (powers of two, 1..1024) × precision (fp32, tf32,
  bf16, fp16) × activation checkpointing. Throughput saturates with the batch; memory grows with
  it, and above a budget the trial is out of memory (infeasible). Checkpointing saves memory at a
  25% cost. The optimum sits right at the cliff (bf16, 128, no checkpointing) and is the only
  configuration within 95% of it. 88 configurations.
- ``multimodal``: two continuous knobs in [0, 1] with three Gaussian bumps: the global one
  (height 1), and two traps at 85% and 70% of it.
- ``lr-ridge``: batch (4..1024, log) × learning rate (1e-5..1e-1, log) × precision: samples/s
  times a convergence factor whose best learning rate grows with sqrt(batch), with an
  out-of-memory cliff that depends on the precision.

For each landscape and searcher, over ``--seeds`` seeds: the number of evaluations until the best
value so far reaches 95% of the optimum (median and p90; ">N" when a seed never got there within
N evaluations: ``--budget`` for the Bayesian searcher, whose evaluations cost GP fits, and
``--cheap-budget`` for the others). "grid best" is the best grid point as a share of the
optimum: below 95%, the grid searcher cannot reach the target at all. The grid searcher visits
a grid of ``--points-per-dim`` points per dimension (the whole ``oom-cliff`` space at the
default 11) in a seeded order, and stops there.
Then the Bayesian searcher's ask+tell time with 49 trials already told (the 50th trial), averaged
over a few asks.

Measured landscapes: every ``benchmarks/data/grid-*.json`` that ``benchmarks/measure_grid.py``
wrote, replayed as a lookup table: the demo space (micro-batch × precision × layout) of one demo
model, each configuration's samples/s measured by a real trial on this project's CPU (None, i.e.
infeasible, when the trial did not end ok). The optimum is the best measured configuration, so
the target is 95% of the grid optimum, and the grid searcher visits the whole space. A
micro-batch that cannot split a rank's share of the global batch is skipped the way ``autotune
tune`` skips it: never run, not counted as an evaluation (nor in the "grid" column), and told to
the searcher as impossible, which the Bayesian searcher leaves out of its model
(``--penalize-impossible``: as a plain infeasible trial, a penalty in the model, as before). The
"of grid" column is the median as a share of the grid's size; "≤20%" says whether it is within
20% of it, the issue's criterion for the Bayesian searcher (which must also need fewer
evaluations than random search).

Run from the repository root::

    python benchmarks/searchers.py [--seeds 20] [--budget 60] [--searchers bayes,random,grid]
    python benchmarks/searchers.py --landscapes gpt-cpu,cnn-cpu --searchers bayes,bayes+plan,random

``bayes+plan`` (measured grids only): the Bayesian searcher with the plan's prediction of every
configuration as its prior mean, as ``autotune tune`` runs it (:mod:`autotune.tuner.plan_prior`);
the plan traces the demo target under fake tensors once per precision (about 5 s each) and probes
this CPU's costs at the grid's threads per rank.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from autotune.search import Choice, Float, Int, Space, make_searcher
from autotune.search.searchers import Searcher
from autotune.search.space import Value

TARGET = 0.95
#: The issue's criterion: the Bayesian searcher reaches TARGET within this share of the grid's size.
GRID_SHARE = 0.20
DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Landscape:
    """A search space, an objective (None = infeasible) and its optimum.

    ``skipped``: configurations known to be impossible without running them (a micro-batch that
    cannot split the global batch), which ``autotune tune`` tells the searcher as infeasible
    without counting them as trials; they count as no evaluation here either.
    """

    name: str
    space: Space
    fn: Callable[[dict[str, Value]], float | None]
    optimum: float
    skipped: Callable[[dict[str, Value]], bool] = lambda params: False
    #: The plan's prediction of each configuration (measured grids of a demo model), made on demand.
    plan: Callable[[], Callable[[dict[str, Value]], float | None]] | None = None


# --------------------------------------------------------------------------- landscapes

SPEED = {"fp32": 1.0, "tf32": 1.6, "bf16": 2.6, "fp16": 2.3}
BYTES_PER_SAMPLE = {"fp32": 4.0, "tf32": 4.0, "bf16": 2.2, "fp16": 2.2}
MEMORY_BUDGET_GB = 16.0


def oom_cliff(p: dict[str, Value]) -> float | None:
    batch, precision, ckpt = int(p["micro_batch"]), str(p["precision"]), bool(p["checkpointing"])
    memory_gb = 2.0 + 0.03 * BYTES_PER_SAMPLE[precision] * (0.3 if ckpt else 1.0) * batch
    if memory_gb > MEMORY_BUDGET_GB:
        return None
    return SPEED[precision] * batch / (batch + 24) / (1 + batch / 2048) * (0.75 if ckpt else 1.0)


BUMPS = ((0.75, 0.25, 0.15, 1.0), (0.2, 0.75, 0.2, 0.85), (0.7, 0.85, 0.1, 0.7))  # x, y, width, height


def multimodal(p: dict[str, Value]) -> float:
    x, y = float(p["x"]), float(p["y"])
    return sum(h * math.exp(-((x - bx) ** 2 + (y - by) ** 2) / (2 * w**2)) for bx, by, w, h in BUMPS)


def lr_ridge(p: dict[str, Value]) -> float | None:
    batch, lr, precision = int(p["batch"]), float(p["lr"]), str(p["precision"])
    if batch > (384 if precision == "fp32" else 768):
        return None
    best_lr = 1e-3 * math.sqrt(batch / 32)
    convergence = math.exp(-((math.log10(lr) - math.log10(best_lr)) ** 2) / (2 * 0.35**2))
    return SPEED[precision] * batch / (batch + 32) * convergence


def _optimum(space: Space, fn: Callable[[dict[str, Value]], float | None], fine: dict[str, int]) -> float:
    """The best value over every finite configuration, with Float axes on a fine grid."""
    axes: dict[str, list[Value]] = {}
    for name, param in space.params.items():
        if isinstance(param, Float):
            axes[name] = list(param.grid(fine[name]))
        else:
            axes[name] = list(param.values())
    best = -math.inf
    names = list(axes)

    def walk(i: int, params: dict[str, Value]) -> None:
        nonlocal best
        if i == len(names):
            value = fn(params)
            if value is not None:
                best = max(best, value)
            return
        for v in axes[names[i]]:
            params[names[i]] = v
            walk(i + 1, params)

    walk(0, {})
    return best


def measured(path: Path) -> Landscape | None:
    """A grid file of ``measure_grid.py`` as a lookup table (None for an unfinished measurement)."""
    doc = json.loads(path.read_text())
    if not doc.get("complete"):
        print(f"(skipping {path.name}: its measurement did not finish)")
        return None
    space = Space.from_dict(doc["space"], source=str(path))
    table: dict[tuple[object, ...], float | None] = {}
    impossible: set[tuple[object, ...]] = set()
    for config in doc["configs"]:
        ok = config["status"] == "ok" and config["samples_per_s"] is not None
        table[space.key(config["params"])] = float(config["samples_per_s"]) if ok else None
        if not config["feasible"]:
            impossible.add(space.key(config["params"]))
    missing = [p for p in space.points() if space.key(p) not in table]
    if missing:
        raise ValueError(f"{path}: {len(missing)} configurations of its space are missing, e.g. {missing[0]}")
    optimum = max(v for v in table.values() if v is not None)
    return Landscape(
        f"{doc['model']}-{doc['device']}",
        space,
        lambda p: table[space.key(p)],
        optimum,
        lambda p: space.key(p) in impossible,
        lambda: plan_prior(doc, space),
    )


def plan_prior(doc: dict[str, object], space: Space) -> Callable[[dict[str, Value]], float | None]:
    """What ``autotune tune`` gives its searcher for this grid: the plan's prediction of each configuration.

    The demo target traced under fake tensors per precision, this CPU's probed costs at the grid's
    threads per rank, scaled to the measured baseline; made once.
    """
    import torch

    from autotune.plan.probe import probe_costs
    from autotune.tuner.plan_memory import PlanTraces
    from autotune.tuner.plan_prior import PlanPrior
    from autotune.tuner.trials import TrialSettings

    settings = doc["settings"]
    baseline = doc["baseline"]
    assert isinstance(settings, dict) and isinstance(baseline, dict)
    batch = str(settings["global_batch"])
    script_args = ("--model", str(doc["model"]), "--device", "cpu", "--global-batch", batch)
    trial = TrialSettings(
        "autotune.demo.target", script_args, module=True, distributed_world_size=int(settings["world_size"])
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(int(settings["threads_per_rank"]))
    try:
        costs = probe_costs()
    finally:
        torch.set_num_threads(threads)
    prior = PlanPrior(PlanTraces(trial, space), "throughput", "cpu", costs, None, int(batch))
    prior.calibrate(baseline["params"], baseline["samples_per_s"])
    for p in space.points():  # every trace now, so the searchers' timing does not include them
        prior.predict(p)
    return prior.predict



def landscapes() -> list[Landscape]:
    cliff = Space(
        micro_batch=Int(1, 1024, power_of_two=True),
        precision=Choice("fp32", "tf32", "bf16", "fp16"),
        checkpointing=Choice(False, True),
    )
    bumps = Space(x=Float(0.0, 1.0), y=Float(0.0, 1.0))
    ridge = Space(
        batch=Int(4, 1024, log=True), lr=Float(1e-5, 1e-1, log=True), precision=Choice("fp32", "bf16")
    )
    lands = [
        Landscape("oom-cliff", cliff, oom_cliff, _optimum(cliff, oom_cliff, {})),
        Landscape("multimodal", bumps, multimodal, _optimum(bumps, multimodal, {"x": 401, "y": 401})),
        Landscape("lr-ridge", ridge, lr_ridge, _optimum(ridge, lr_ridge, {"lr": 801})),
    ]
    return lands + [land for path in sorted(DATA.glob("grid-*.json")) if (land := measured(path))]


# --------------------------------------------------------------------------- measuring


def build(
    variant: str,
    space: Space,
    seed: int,
    points_per_dim: int,
    prior: Callable[[dict[str, Value]], float | None] | None = None,
) -> Searcher:
    """``bayes``, ``bayes+plan`` (with ``prior``), ``random``, ``grid``, or ``bayes:key=value;...``."""
    name, _, opts = variant.partition(":")
    if name == "bayes+plan":
        return make_searcher("bayes", space, seed, "maximize", prior=prior)
    options: dict[str, object] = {}
    for item in filter(None, opts.split(";")):
        key, _, raw = item.partition("=")
        for kind in (int, float, str):
            try:
                options[key] = kind(raw)
                break
            except ValueError:
                continue
    if name == "grid":
        options.setdefault("points_per_dim", points_per_dim)
    return make_searcher(name, space, seed, "maximize", **options)


def evals_to_target(
    land: Landscape, variant: str, seed: int, budget: int, points_per_dim: int, penalize: bool = False
) -> float:
    """Evaluations until the best value reaches TARGET × optimum (inf if not within budget).

    Skipped configurations are told to the searcher as impossible (``penalize``: as infeasible,
    which the Bayesian searcher models as a penalty) but are no evaluation.
    """
    prior = None
    if variant == "bayes+plan" and land.plan is not None:
        if land.name not in _priors:
            _priors[land.name] = land.plan()
        prior = _priors[land.name]
    searcher = build(variant, land.space, seed, points_per_dim, prior)
    best, n = -math.inf, 0
    while n < budget and not searcher.done:
        params = searcher.ask()
        if land.skipped(params):
            searcher.tell(params, None, feasible=False, impossible=not penalize)
            continue
        n += 1
        value = land.fn(params)
        searcher.tell(params, value, feasible=value is not None)
        if value is not None:
            best = max(best, value)
        if best >= TARGET * land.optimum:
            return n
    return math.inf


_priors: dict[str, Callable[[dict[str, Value]], float | None]] = {}


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman's rank correlation (ties by their order)."""
    def ranks(v: list[float]) -> list[int]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        out = [0] * len(v)
        for r, i in enumerate(order):
            out[i] = r
        return out

    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    return 1 - 6 * sum((a - b) ** 2 for a, b in zip(rx, ry, strict=True)) / (n * (n * n - 1))


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (inf stays inf: a seed that never reached the target)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def fmt(x: float, budget: int, never: bool = False) -> str:
    """A count of evaluations; ">budget" when not reached, "never" when it cannot be."""
    if math.isinf(x):
        return "never" if never else f">{budget}"
    return f"{x:g}"


def overhead_s(land: Landscape, n_told: int = 49, repeats: int = 3) -> tuple[int, float, float]:
    """Trials told, mean and max seconds of one ask+tell of the Bayesian searcher after them.

    ``n_told`` trials, or all but one configuration of a smaller finite space.
    """
    size = land.space.size
    n_told = n_told if size is None else min(n_told, size - 1)  # a small measured grid: its last trial
    filler = make_searcher("random", land.space, seed=123)
    for _ in range(n_told):
        params = filler.ask()
        value = land.fn(params)
        filler.tell(params, value, feasible=value is not None)
    times = []
    warm = make_searcher("bayes", land.space, seed=99)
    warm.replay(filler.history)
    warm.ask()  # the first model-based ask imports skopt, scikit-learn and scipy: not timed
    for r in range(repeats):
        searcher = make_searcher("bayes", land.space, seed=r)
        searcher.replay(filler.history)
        start = time.perf_counter()
        params = searcher.ask()
        value = land.fn(params)
        searcher.tell(params, value, feasible=value is not None)
        times.append(time.perf_counter() - start)
    return n_told, statistics.mean(times), max(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=60, help="most evaluations per Bayesian run")
    parser.add_argument(
        "--cheap-budget",
        type=int,
        default=1000,
        help="most evaluations per random or grid run (they cost nothing)",
    )
    parser.add_argument("--points-per-dim", type=int, default=11, help="grid searcher resolution")
    parser.add_argument(
        "--searchers",
        default="bayes,random,grid",
        help="comma-separated; 'bayes:acq_func=gp_hedge;n_initial_points=10' passes options",
    )
    parser.add_argument("--landscapes", default="", help="comma-separated names (default: all)")
    parser.add_argument(
        "--penalize-impossible",
        action="store_true",
        help="tell skipped configurations as plain infeasible ones (a penalty in the GP), not impossible",
    )
    args = parser.parse_args()

    chosen = [s for s in args.searchers.split(",") if s]
    lands = [x for x in landscapes() if not args.landscapes or x.name in args.landscapes.split(",")]
    columns = (
        "landscape", "grid", "grid best", "optimum", "searcher", "median", "p90", "reached", "of grid", "≤20%"
    )  # fmt: skip
    header = "{:<11} {:>5} {:>9} {:>8} {:<12} {:>6} {:>5} {:>8} {:>7} {:>4}".format(*columns)
    print(
        f"evaluations to reach {TARGET:.0%} of the optimum, {args.seeds} seeds; at most {args.budget} per"
        f" Bayesian run, {args.cheap_budget} per random or grid run"
    )
    print(header)
    print("-" * len(header))
    results: dict[tuple[str, str], float] = {}
    started = time.perf_counter()
    for land in lands:
        grid = [p for p in land.space.grid(args.points_per_dim) if not land.skipped(p)]
        grid_best = max(v for v in map(land.fn, grid) if v is not None) / land.optimum
        for variant in chosen:
            if variant == "bayes+plan" and land.plan is None:
                continue  # an analytic landscape: no script to plan
            budget = args.budget if variant.startswith("bayes") else args.cheap_budget
            never = variant == "grid" and grid_best < TARGET
            runs = [
                evals_to_target(land, variant, s, budget, args.points_per_dim, args.penalize_impossible)
                for s in range(args.seeds)
            ]
            median, p90 = statistics.median(runs), percentile(runs, 90)
            results[(land.name, variant)] = median
            reached = sum(not math.isinf(r) for r in runs)
            share = median / len(grid)
            within = "yes" if share <= GRID_SHARE else "no"
            print(
                f"{land.name:<11} {len(grid):>5} {grid_best:>9.1%} {land.optimum:>8.4g} {variant:<12} "
                f"{fmt(median, budget, never):>6} {fmt(p90, budget, never):>5} {reached:>4}/{args.seeds:<3}"
                f" {'-' if math.isinf(share) else f'{share:.0%}':>7} {within:>4}"
            )
    print(f"({time.perf_counter() - started:.0f} s)")

    print("\nBayesian ask+tell with 49 trials told (all but one configuration of a smaller space), seconds:")
    for land in lands:
        told, mean_s, max_s = overhead_s(land)
        print(f"  {land.name:<11} {told:>3} told: mean {mean_s:.3f}  max {max_s:.3f}")

    if "bayes" in chosen and "bayes+plan" in chosen:
        print("\nIssue 14: the plan as the search's prior (measured grids; median evaluations to target):")
        for land in lands:
            if land.name not in _priors:
                continue
            prior = _priors[land.name]
            points = [p for p in land.space.points() if not land.skipped(p) and land.fn(p) is not None]
            rho = spearman([prior(p) or 0.0 for p in points], [land.fn(p) or 0.0 for p in points])
            top = max(points, key=lambda p: prior(p) or 0.0)
            without, with_plan = results[(land.name, "bayes")], results[(land.name, "bayes+plan")]
            print(
                f"  {land.name:<11} without {fmt(without, args.budget)}, with the plan "
                f"{fmt(with_plan, args.budget)}; the plan's rank correlation with the measured grid "
                f"{rho:.2f}, its top pick {top} measured {(land.fn(top) or 0) / land.optimum:.0%} of the "
                "optimum"
            )

    if "bayes" in chosen:
        print("\nIssue 3 criteria (Bayesian, median over seeds):")
        for land in lands:
            grid_size = sum(not land.skipped(p) for p in land.space.grid(args.points_per_dim))
            bayes = results[(land.name, "bayes")]
            share = (
                "not reached" if math.isinf(bayes) else f"{bayes / grid_size:.0%} of the grid's {grid_size}"
            )
            share += " (within 20%)" if bayes <= GRID_SHARE * grid_size else " (NOT within 20%)"
            versus = ""
            if "random" in chosen:
                rand = results[(land.name, "random")]
                verdict = "fewer" if bayes < rand else "NOT fewer"
                versus = f"; random needs {fmt(rand, args.cheap_budget)}: {verdict}"
            print(f"  {land.name:<11} {fmt(bayes, args.budget)} evaluations = {share}{versus}")


if __name__ == "__main__":
    main()
