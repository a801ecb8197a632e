"""A study with 1, 2, 4 or 8 devices, simulated: its wall time and trials to 95% of the optimum.

The landscapes of ``benchmarks/searchers.py``: the analytic ``oom-cliff`` and ``lr-ridge``, and the
demo grids measured on this project's CPU (``benchmarks/data/grid-*.json``). A trial takes the time
its configuration's real trial took in the measured grid (``duration_s``); the analytic landscapes
replay the measured trials' durations in a seeded order. With D devices the Bayesian searcher keeps
D trials running, proposing each new one while the others run (``Searcher.ask_pending``, a
constant liar), as ``autotune tune --parallel D`` and ``--executor ray`` do; a finished trial is told
as it ends. For each D, over ``--seeds`` seeds (median): the simulated wall time until the best
trial reaches 95% of the optimum, and the trials run by then, beside D = 1 in the same run.

    python benchmarks/parallel_study.py [--seeds 8] [--budget 60]
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from searchers import TARGET, Landscape, landscapes  # noqa: E402

from autotune.search.searchers import SearchExhausted, make_searcher  # noqa: E402
from autotune.search.space import Value  # noqa: E402

DEVICES = (1, 2, 4, 8)


def measured_durations() -> list[float]:
    """Every measured trial's duration in the demo grids (seconds)."""
    out = []
    for path in sorted((ROOT / "benchmarks" / "data").glob("grid-*.json")):
        configs = json.loads(path.read_text())["configs"]
        out += [float(c["duration_s"]) for c in configs if c.get("duration_s")]
    return out


def simulate(
    land: Landscape,
    devices: int,
    seed: int,
    budget: int,
    durations: list[float],
    table: Callable[[dict[str, Value]], float] | None,
) -> tuple[float, int]:
    """(wall seconds, trials) until the best reaches the target; (inf, budget) if it never does.

    ``table``: each configuration's own duration, else one of ``durations`` drawn by the seed.
    """
    searcher = make_searcher("bayes", land.space, seed, "maximize")
    rng = random.Random(seed)
    clock, started, best = 0.0, 0, -math.inf
    running: list[tuple[float, int, dict[str, Value]]] = []  # (ends at, order, params)
    pending: list[dict[str, Value]] = []
    while True:
        while len(running) < devices and started < budget:
            try:
                params = searcher.ask_pending(pending)
            except SearchExhausted:
                break
            if land.skipped(params):  # never runs: told at once, as autotune tune skips it
                searcher.tell(params, None, feasible=False, impossible=True)
                continue
            took = table(params) if table is not None else rng.choice(durations)
            heapq.heappush(running, (clock + took, started, params))
            pending.append(params)
            started += 1
        if not running:
            return math.inf, started
        clock, _, params = heapq.heappop(running)
        pending.remove(params)
        value = land.fn(params)
        searcher.tell(params, value, feasible=value is not None)
        if value is not None and value > best:
            best = value
        if best >= TARGET * land.optimum:
            return clock, started - len(running)


def own_durations(land: Landscape) -> Callable[[dict[str, Value]], float] | None:
    """Each configuration's own trial duration, for a measured landscape (None for an analytic one)."""
    path = ROOT / "benchmarks" / "data" / f"grid-{land.name}.json"
    if not path.exists():
        return None
    doc = json.loads(path.read_text())
    table = {land.space.key(c["params"]): float(c["duration_s"] or 1.0) for c in doc["configs"]}
    return lambda p: table[land.space.key(p)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--landscapes", default="oom-cliff,lr-ridge,gpt-cpu,cnn-cpu")
    args = parser.parse_args()
    wanted = args.landscapes.split(",")
    durations = measured_durations()
    print(f"trial durations: {len(durations)} measured trials, median {statistics.median(durations):.1f} s")
    header = ("landscape", "devices", "wall s (median)", "speed-up", "trials", "vs 1")
    print(f"{header[0]:<12} {header[1]:>7} {header[2]:>16} {header[3]:>9} {header[4]:>7} {header[5]:>6}")
    for land in (x for x in landscapes() if x.name in wanted):
        rows, table = {}, own_durations(land)
        for devices in DEVICES:
            runs = [simulate(land, devices, i, args.budget, durations, table) for i in range(args.seeds)]
            rows[devices] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
        wall1, trials1 = rows[1]
        for devices, (wall, trials) in rows.items():
            speedup = wall1 / wall if math.isfinite(wall) and wall > 0 else math.nan
            more = trials / trials1
            print(f"{land.name:<12} {devices:>7} {wall:>16.1f} {speedup:>8.2f}x {trials:>7.1f} {more:>5.2f}x")


if __name__ == "__main__":
    main()
