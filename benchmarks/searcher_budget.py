"""How often each searcher lands within 2% (and 5%) of the optimum on a budget of 10% and 20% of the grid.

The issue's figure of merit for a searcher that needs few trials: over (landscape × seed) studies,
the share whose best value found within the budget is within 2% (5%) of the landscape's optimum.

Landscapes:

- published: ``benchmarks/data/published_landscapes.json`` (``transcribe_landscapes.py``; NVIDIA
  DeepLearningExamples and mosaicml/llm-foundry tables, each entry citing its repository, commit,
  file and table heading). A configuration the table does not publish (not measured, or out of
  memory) is an infeasible trial: it costs an evaluation and returns nothing. Knobs whose values
  are consecutive powers of two become ``Int(power_of_two=True)``, others a ``Choice`` of their
  values (numbers in increasing order).
- measured: every ``benchmarks/data/grid-*.json`` (the demo models measured on this project's CPU),
  through ``benchmarks/searchers.py``'s reader: a micro-batch that cannot split the global batch is
  told as impossible and is no evaluation, as ``autotune tune`` does.

Budget: ``ceil(share × n)`` evaluations, ``n`` the configurations that count (the whole product
of a published table's knob values, nulls included; a measured grid less its impossible
configurations); every landscape has at least 20 (``transcribe_landscapes.MIN_CELLS``), so 10% is
at least 2 evaluations. A study is run once to the 20% budget; its best value after the first
10%-budget evaluations is the 10% figure (``ask`` depends only on seed and history, so that is
exactly a study stopped there).

Held-in / held-out: the published landscapes are split in two halves by a hash of their names
(``derive_seed``), fixed before any searcher was tuned; designs and hyperparameters of the
``structured`` searcher were chosen looking at the held-in half, except its line search along
ordered knobs, measured on both halves before it landed (so the held-out figure is no longer a
blind one). Both halves are reported.

Searchers: ``bayes`` (scikit-optimize GP, the default so far), ``structured``
(:mod:`autotune.search.structured`), ``random``, and Optuna's ``tpe`` and ``gp`` samplers when
``optuna`` is installed (knobs of numbers or sizes such as "7b" as an integer index over their
sorted values, so the sampler sees their order, as the structured searcher does; other knobs
categorical). Optuna may propose a configuration twice: the
repeat is answered from the table and not counted as an evaluation (up to 100 repeats in a row).

    python benchmarks/searcher_budget.py [--seeds 10] [--searchers structured,bayes,random,tpe,gp]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from searchers import Landscape, measured

from autotune.search import Choice, Float, Int, Space, make_searcher
from autotune.search.searchers import derive_seed
from autotune.search.space import Param, Value
from autotune.search.structured import ordered_levels

DATA = Path(__file__).resolve().parent / "data"
SHARES = (0.10, 0.20)
TOLERANCES = (0.02, 0.05)
OPTUNA = ("tpe", "gp")


def _is_pow2_run(values: list[object]) -> bool:
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
        return False
    ints = sorted(int(v) for v in values)  # type: ignore[call-overload]
    return all(v & (v - 1) == 0 for v in ints) and all(b == 2 * a for a, b in itertools.pairwise(ints))


def published() -> list[Landscape]:
    """The published tables as landscapes (null: infeasible)."""
    doc = json.loads((DATA / "published_landscapes.json").read_text())
    lands = []
    for entry in doc["landscapes"]:
        params: dict[str, Param] = {}
        for name, values in entry["knobs"].items():
            if _is_pow2_run(values) and len(values) > 2:
                params[name] = Int(min(values), max(values), power_of_two=True)
            else:
                params[name] = Choice(*values)
        space = Space(**params)
        table = {space.key(c["params"]): c["value"] for c in entry["configs"]}
        optimum = max(v for v in table.values() if v is not None)
        lands.append(Landscape(entry["name"], space, _lookup(space, table), optimum))
    return lands


def _lookup(
    space: Space, table: dict[tuple[object, ...], float | None]
) -> Callable[[dict[str, Value]], float | None]:
    return lambda params: table[space.key(params)]


def held_out(name: str) -> bool:
    """The fixed half of the published landscapes not looked at while tuning the searcher."""
    return derive_seed("held-out", name) % 2 == 1


def counted(land: Landscape) -> int:
    return sum(not land.skipped(p) for p in land.space.points())


#: The plan's prediction of each measured grid, traced once per run.
_PLANS: dict[str, Callable[[dict[str, Value]], float | None]] = {}


def run_autotune(land: Landscape, variant: str, seed: int, budget: int) -> list[float]:
    """The best value after each evaluation (-inf while none was feasible).

    ``variant``: a searcher's name, or ``name:key=value;...`` to pass options (numbers or strings).
    """
    name, _, opts = variant.partition(":")
    options: dict[str, object] = {}
    for item in filter(None, opts.split(";")):
        key, _, raw = item.partition("=")
        options[key] = int(raw) if raw.lstrip("-").isdigit() else raw
    name, _, with_plan = name.partition("+")
    searcher = make_searcher(name, land.space, seed, "maximize", **options)
    if with_plan == "plan" and land.plan is not None:  # the plan's prediction, as autotune tune gives it
        if land.name not in _PLANS:
            _PLANS[land.name] = land.plan()
        searcher.prior = _PLANS[land.name]  # type: ignore[attr-defined]
    best, trace = -math.inf, list[float]()
    while len(trace) < budget and not searcher.done:
        params = searcher.ask()
        if land.skipped(params):
            searcher.tell(params, None, feasible=False, impossible=True)
            continue
        value = land.fn(params)
        searcher.tell(params, value, feasible=value is not None)
        best = max(best, value) if value is not None else best
        trace.append(best)
    return trace


#: Wall-clock seconds an Optuna study may take before it is stopped (``--optuna-cap``).
OPTUNA_CAP_S = [60.0]
#: Optuna studies stopped by the cap, by sampler.
CAPPED: dict[str, int] = {}


def run_optuna(land: Landscape, name: str, seed: int, budget: int) -> list[float]:
    """As ``run_autotune`` with an Optuna sampler through its ask/tell interface (capped in time)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    sampler = optuna.samplers.TPESampler(seed=seed) if name == "tpe" else optuna.samplers.GPSampler(seed=seed)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    axes: dict[str, list[Value]] = {
        n: list(ordered_levels(p.values()) or p.values())
        for n, p in land.space.params.items()
        if not isinstance(p, Float)
    }
    dists: dict[str, optuna.distributions.BaseDistribution] = {}
    for n, values in axes.items():
        numeric = ordered_levels(values) is not None  # numbers and sizes ("7b") are ordered
        dists[n] = (
            optuna.distributions.IntDistribution(0, len(values) - 1)
            if numeric
            else optuna.distributions.CategoricalDistribution(list(range(len(values))))
        )
    seen: dict[tuple[object, ...], float | None] = {}
    best, trace, repeats = -math.inf, list[float](), 0
    deadline = time.perf_counter() + OPTUNA_CAP_S[0]
    while len(trace) < budget and len(seen) < counted(land):
        if time.perf_counter() > deadline:
            CAPPED[name] = CAPPED.get(name, 0) + 1
            break
        trial = study.ask(dists)
        params = {n: axes[n][int(trial.params[n])] for n in axes}
        key = land.space.key(params)
        if land.skipped(params):
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        fresh = key not in seen
        if fresh or repeats >= 100:
            seen[key] = land.fn(params)
            repeats = 0
        else:
            repeats += 1
        value = seen[key]
        if value is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, value)
        if fresh or repeats == 0:
            best = max(best, value) if value is not None else best
            trace.append(best)
    return trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, default=10, help="studies per landscape and searcher")
    parser.add_argument("--searchers", default="structured,bayes,random,tpe,gp")
    parser.add_argument("--landscapes", default="", help="comma-separated names (default: all)")
    parser.add_argument("--per-landscape", action="store_true", help="also print each landscape's figures")
    parser.add_argument("--optuna-cap", type=float, default=60.0, help="seconds per Optuna study")
    args = parser.parse_args()
    OPTUNA_CAP_S[0] = args.optuna_cap

    chosen = [s for s in args.searchers.split(",") if s]
    try:
        import optuna  # noqa: F401
    except ImportError:
        if any(s in OPTUNA for s in chosen):
            print("(optuna is not installed: the tpe and gp columns are skipped; pip install optuna)")
        chosen = [s for s in chosen if s not in OPTUNA]
    lands = published() + [x for p in sorted(DATA.glob("grid-*.json")) if (x := measured(p))]
    if args.landscapes:
        lands = [x for x in lands if x.name in args.landscapes.split(",")]
    groups: dict[str, list[Landscape]] = {
        "held-in": [x for x in lands if x.name in _published_names() and not held_out(x.name)],
        "held-out": [x for x in lands if x.name in _published_names() and held_out(x.name)],
        "measured": [x for x in lands if x.name not in _published_names()],
    }
    print(
        f"{args.seeds} seeds; budget = ceil(share × configurations); success = best within tol of the optimum"
    )
    for group, members in groups.items():
        print(f"{group}: " + ", ".join(f"{x.name} ({counted(x)})" for x in members))
    # hits[searcher][group][(share, tol)] = successes; n[group] = studies
    hits: dict[str, dict[str, dict[tuple[float, float], int]]] = {}
    started = time.perf_counter()
    for name in chosen:
        run: Callable[[Landscape, str, int, int], list[float]] = (
            run_optuna if name in OPTUNA else run_autotune
        )
        t0 = time.perf_counter()
        for group, members in groups.items():
            for land in members:
                size = counted(land)
                budgets = {share: math.ceil(share * size) for share in SHARES}
                local = {(s, t): 0 for s in SHARES for t in TOLERANCES}
                for seed in range(args.seeds):
                    trace = run(land, name, seed, max(budgets.values()))
                    for share, budget in budgets.items():
                        best = trace[min(budget, len(trace)) - 1] if trace else -math.inf
                        for tol in TOLERANCES:
                            local[(share, tol)] += best >= (1 - tol) * land.optimum
                for k, v in local.items():
                    hits.setdefault(name, {}).setdefault(group, {}).setdefault(k, 0)
                    hits[name][group][k] += v
                if args.per_landscape:
                    cells = "  ".join(f"{local[(s, t)]:>2}" for s in SHARES for t in TOLERANCES)
                    print(f"  {name:<16} {land.name:<32} {size:>4}  {cells}")
        capped = f", {CAPPED[name]} studies capped at {args.optuna_cap:.0f} s" if name in CAPPED else ""
        print(f"({name}: {time.perf_counter() - t0:.0f} s{capped})")
    header = f"{'group':<9} {'searcher':<16} " + " ".join(
        f"{f'{t:.0%} @{s:.0%}':>8}" for s in SHARES for t in TOLERANCES
    )
    print("\nshare of studies within 2% / 5% of the optimum at 10% / 20% of the grid")
    print(header)
    print("-" * len(header))
    for group, members in [*groups.items(), ("published", groups["held-in"] + groups["held-out"])]:
        studies = len(members) * args.seeds
        if not studies:
            continue
        for name in chosen:
            parts = ("held-in", "held-out") if group == "published" else (group,)
            row = []
            for s in SHARES:
                for t in TOLERANCES:
                    total = sum(hits[name].get(g, {}).get((s, t), 0) for g in parts)
                    row.append(f"{total / studies:>8.0%}")
            print(f"{group:<9} {name:<16} " + " ".join(row))
    print(f"({time.perf_counter() - started:.0f} s)")


def _published_names() -> set[str]:
    doc = json.loads((DATA / "published_landscapes.json").read_text())
    return {entry["name"] for entry in doc["landscapes"]}


if __name__ == "__main__":
    main()
