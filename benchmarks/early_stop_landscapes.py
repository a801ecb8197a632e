"""The device time early stopping saves on the published and measured landscapes, and what it costs.

Each study of ``searcher_budget.py``'s landscapes (20% of the grid) runs twice on the same noise:
once with every trial running its whole budget, once stopping a trial whose optimistic throughput
falls below the study's floor. The trials are simulated, the rules are the tuner's own:

- a trial of a configuration of throughput ``v`` is a process whose speed is ``v × e^(σp·z)`` (the
  spread between processes, ``z`` one normal draw per process), running ``--steps`` measured steps of
  ``1 / speed × e^(σs·z)`` seconds each (the spread of one process's steps), after a start-up of
  ``--startup`` steps' worth of time (process start, model build, warm-up);
- the floor is :func:`autotune.tuner.early_stop.stop_floor` over the trials so far, the spread
  between processes taken from ``--anchors`` runs of the first configuration, as the study's
  anchors give it; a trial stops at the first measured step from ``min_measured_steps`` (8, the
  profiler's) at which samples per step over the lower end of its step time's 95% interval
  (:class:`profilers.runtime.stopping.StepTimeStats`, as the ``below_threshold`` rule reads it) is
  below the floor;
- a stopped trial tells the searcher its partial mean and is never the result
  (:func:`autotune.tuner.early_stop.best_result`).

Printed per searcher: the device time of the trials with early stopping over without (start-ups
included), the share of trials stopped, the share of studies whose result is within 2% of the result
without early stopping, and those 5% or more worse or better (true values: a stopped trial tells the
searcher a partial figure, so its path may change). The noise figures are parameters: this CPU measured
±2% between processes of one configuration (the README's study) and 2-10% within one.

    python benchmarks/early_stop_landscapes.py [--seeds 5] [--searchers structured,bayes]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from searcher_budget import DATA, counted, published
from searchers import Landscape, measured

from autotune.search import make_searcher
from autotune.search.records import Trial
from autotune.search.searchers import derive_seed
from autotune.tuner.early_stop import STOPPED_LOSING, best_result, stop_floor
from autotune.tuner.objectives import Scoring
from profilers.contract.intervals import t975
from profilers.contract.schema import TrialStatus
from profilers.contract.study.spread import ProcessSpread
from profilers.runtime.stopping import Z_95, StepTimeStats

MIN_MEASURED_STEPS = 8


@dataclass
class Noise:
    """The spread of the simulated runs (log sd between processes and between steps)."""

    process: float
    step: float
    steps: int
    startup: float  # start-up time, in steps of the configuration's own step time


@dataclass
class Run:
    """One simulated trial: its partial or whole measurement and the time it held its device."""

    samples_per_s: float
    ci95: tuple[float, float]
    seconds: float
    stopped: bool


def simulate(value: float, noise: Noise, rng: random.Random, floor: float | None) -> Run:
    """A trial of true throughput ``value`` (samples/s, one sample a step), stopping below ``floor``."""
    speed = value * math.exp(noise.process * rng.gauss(0, 1))
    stats, seconds = StepTimeStats(), noise.startup / value
    for _ in range(noise.steps):
        step_s = math.exp(noise.step * rng.gauss(0, 1)) / speed
        stats.add(step_s * 1e9)
        seconds += step_s
        half = stats.half_width_ns(Z_95)
        if floor is not None and stats.n >= MIN_MEASURED_STEPS and half is not None:
            low_ns = stats.mean_ns - half
            if low_ns > 0 and 1e9 / low_ns < floor:
                return Run(1e9 / stats.mean_ns, _ci(stats), seconds, True)
    return Run(1e9 / stats.mean_ns, _ci(stats), seconds, False)


def _ci(stats: StepTimeStats) -> tuple[float, float]:
    half = stats.half_width_ns(Z_95) or 0.0
    low_ns, high_ns = max(stats.mean_ns - half, 1.0), stats.mean_ns + half
    return 1e9 / high_ns, 1e9 / low_ns


def spread_of(value: float, noise: Noise, rng: random.Random, anchors: int) -> ProcessSpread:
    """What ``anchors`` runs of one configuration say of the spread between processes."""
    rates = [simulate(value, noise, rng, None).samples_per_s for _ in range(anchors)]
    logs = [math.log(r) for r in rates]
    return ProcessSpread(len(rates), min(rates), max(rates), statistics.stdev(logs), False)


@dataclass
class Study:
    """One simulated study's outcome."""

    true_best: float | None  # the true value of the configuration it names as the result
    seconds: float  # device time of its trials
    trials: int
    stopped: int


def study(
    land: Landscape, name: str, seed: int, budget: int, noise: Noise, early: bool, anchors: int
) -> Study:
    """A study of ``land`` with ``name`` (``early``: stopping losers), on noise drawn from ``seed``."""
    searcher = make_searcher(name, land.space, seed, "maximize")
    scoring = Scoring("throughput")
    trials: list[Trial] = []
    truth: dict[int, float] = {}
    spread: ProcessSpread | None = None
    seconds, stopped, evaluations = 0.0, 0, 0
    while evaluations < budget and not searcher.done:
        params = searcher.ask()
        if land.skipped(params):
            searcher.tell(params, None, feasible=False, impossible=True)
            continue
        evaluations += 1
        value = land.fn(params)
        # the same noise for a configuration in both studies of a seed
        rng = random.Random(derive_seed("noise", f"{land.name}/{seed}/{sorted(params.items())}"))
        if value is None:  # out of memory or not run: it costs its start-up
            seconds += noise.startup / max(land.optimum, 1e-9)
            searcher.tell(params, None, feasible=False)
            continue
        if spread is None and anchors >= 2:  # the baseline's configuration run again: the first one
            spread = spread_of(
                value, noise, random.Random(derive_seed("anchors", f"{land.name}/{seed}")), anchors
            )
        floor = stop_floor(scoring, trials, 1, spread, 0.5) if early else None
        run = simulate(value, noise, rng, floor.samples_per_s if floor is not None else None)
        seconds += run.seconds
        stopped += run.stopped
        attrs: dict[str, object] = {"throughput_ci95": list(run.ci95), "world_size": 1}
        if run.stopped:
            attrs["stop_reason"] = STOPPED_LOSING
        trial = Trial(len(trials), dict(params), TrialStatus.OK, run.samples_per_s,
                      {"samples_per_s": run.samples_per_s}, run.seconds, None, attrs)  # fmt: skip
        trials.append(trial)
        truth[trial.id] = value
        searcher.tell(params, run.samples_per_s, feasible=True)
    best = best_result(trials)
    return Study(None if best is None else truth[best.id], seconds, len(trials), stopped)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--searchers", default="structured,bayes")
    parser.add_argument("--share", type=float, default=0.2, help="the study's budget, a share of the grid")
    parser.add_argument("--process-sd", type=float, default=0.02, help="log sd between processes")
    parser.add_argument("--step-sd", type=float, default=0.05, help="log sd between one process's steps")
    parser.add_argument("--steps", type=int, default=30, help="measured steps of a whole trial")
    parser.add_argument("--startup", type=float, default=10.0, help="start-up, in steps")
    parser.add_argument("--anchors", type=int, default=3, help="runs of the baseline for the spread")
    args = parser.parse_args()
    noise = Noise(args.process_sd, args.step_sd, args.steps, args.startup)
    lands = published() + [x for p in sorted(DATA.glob("grid-*.json")) if (x := measured(p))]
    dof = args.anchors - 1
    print(
        f"noise: {args.process_sd:.0%} between processes, {args.step_sd:.0%} between steps; {args.steps} "
        f"measured steps after a start-up of {args.startup:g} steps; t(0.975, {dof} dof) = {t975(dof):.2f}; "
        f"{len(lands)} landscapes x {args.seeds} seeds, {args.share:.0%} of each grid"
    )
    print(
        f"{'searcher':<12} {'device time':>12} {'stopped':>9} {'same result':>12} {'worse by 5%+':>13} "
        f"{'better by 5%+':>14}"
    )
    for name in filter(None, args.searchers.split(",")):
        full = early = 0.0
        trials = stopped = same = worse = better = studies = 0
        for land in lands:
            budget = max(1, math.ceil(args.share * counted(land)))
            for seed in range(args.seeds):
                a = study(land, name, seed, budget, noise, False, args.anchors)
                b = study(land, name, seed, budget, noise, True, args.anchors)
                full += a.seconds * land.optimum  # in steps of the landscape's optimum
                early += b.seconds * land.optimum
                trials, stopped, studies = trials + b.trials, stopped + b.stopped, studies + 1
                if a.true_best is not None and b.true_best is not None:
                    same += b.true_best >= 0.98 * a.true_best
                    worse += b.true_best < 0.95 * a.true_best
                    better += b.true_best > a.true_best / 0.95
        print(
            f"{name:<12} {early / full:>12.0%} {stopped / max(trials, 1):>9.0%} {same / studies:>12.0%} "
            f"{worse / studies:>13.0%} {better / studies:>14.0%}"
        )


if __name__ == "__main__":
    main()
