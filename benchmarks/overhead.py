"""Overhead of the always-on profiler, next to full torch.profiler tracing, on the demo GPT.

One process, one model, four arms run interleaved round after round (baseline, always-on,
always-on sampling in the training process, torch.profiler, then the next round with the order
rotated) so drift in machine load hits every
arm alike. Each step is timed in the loop itself with ``time.perf_counter_ns`` (after a
``torch.cuda.synchronize()`` on CUDA). Every arm first runs the same number of untimed steps:
the profiler's warm-up and FLOP-counting steps, which are not what "always-on" costs.

torch runs with a fixed number of intra-op threads (``--threads``, default 1). One thread keeps
the measurement stable on a small shared CPU, but it also leaves a core free for the profiler's
sampling thread; ``--threads`` equal to the core count gives the fully subscribed worst case.

Arms:
- baseline: the plain training loop.
- always-on: inside ``autotune.profile(deep_profile=False)`` (step/phase hooks; sampling in the
  sampler process).
- always-on/thread: the same with ``AUTOTUNE_SAMPLER=thread`` (sampling on the recorder thread, in
  the training process): what moving sampling out of the training process saves.
- torch.profiler: inside ``torch.profiler.profile(record_shapes=True, with_flops=True)``.

Run from the repository root after ``pip install -e .``::

    python benchmarks/overhead.py [--rounds 60] [--steps 10] [--batch-size 8] [--device cpu]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import torch

import autotune
from autotune.demo.models import Trainer, resolve_device

ARMS: tuple[str, ...] = ("baseline", "always-on", "always-on/thread", "torch.profiler")
#: Untimed steps at the start of every arm: the profiler's warm-up plus its FLOP-counting step.
PROFILER_WARMUP_STEPS = 3
UNTIMED_STEPS = PROFILER_WARMUP_STEPS + 2
#: One intra-op thread: on a small shared machine two OpenMP threads make step times swing 10x
#: whenever another process wants a core, which drowns a sub-percent effect.
DEFAULT_THREADS = 1
DEFAULT_BATCH_SIZE = 8


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=60, help="interleaved rounds (default 60)")
    p.add_argument("--steps", type=int, default=10, help="timed steps per arm per round (default 10)")
    p.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_BATCH_SIZE,
        help=f"demo GPT batch (default {DEFAULT_BATCH_SIZE}: a ~30 ms step on one CPU thread)",
    )
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto (default cpu)")
    p.add_argument(
        "--threads",
        type=int,
        default=DEFAULT_THREADS,
        help=f"torch.set_num_threads value (default {DEFAULT_THREADS}; see the module docstring)",
    )
    return p.parse_args(argv)


def run_arm(trainer: Trainer, steps: int, sync: Callable[[], None]) -> list[tuple[int, int]]:
    """``UNTIMED_STEPS`` untimed steps, then ``steps`` steps timed one by one: (wall ns, CPU ns).

    The CPU time is the training thread's own (``time.thread_time_ns``): on a shared virtual
    machine it does not count time the thread waited for a core, so it shows the profiler's cost
    on the training thread with much less noise than the wall clock. The wall clock is the one
    that includes everything (the sampler thread taking the GIL, too).
    """
    for _ in range(UNTIMED_STEPS):
        trainer.step()
    sync()
    times = []
    for _ in range(steps):
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        trainer.step()
        sync()
        times.append((time.perf_counter_ns() - t0, time.thread_time_ns() - c0))
    return times


@contextmanager
def nothing() -> Iterator[None]:
    yield


@contextmanager
def sampling_in_thread(profile: AbstractContextManager[object]) -> Iterator[object]:
    """``profile`` with ``AUTOTUNE_SAMPLER=thread`` set while it starts (read once, at its start)."""
    before = os.environ.get("AUTOTUNE_SAMPLER")
    os.environ["AUTOTUNE_SAMPLER"] = "thread"
    try:
        with profile as entered:
            yield entered
    finally:
        if before is None:
            os.environ.pop("AUTOTUNE_SAMPLER", None)
        else:
            os.environ["AUTOTUNE_SAMPLER"] = before


def arm_context(
    arm: str, run_root: Path, round_index: int, device: torch.device
) -> AbstractContextManager[object]:
    if arm == "baseline":
        return nothing()
    if arm.startswith("always-on"):
        profile = autotune.profile(
            name=f"overhead-r{round_index}",
            run_dir=run_root / f"r{round_index}-{arm.replace('/', '-')}",
            warmup_steps=PROFILER_WARMUP_STEPS,
            deep_profile=False,
            quiet=True,
        )
        return sampling_in_thread(profile) if arm == "always-on/thread" else profile
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return torch.profiler.profile(activities=activities, record_shapes=True, with_flops=True)


def bootstrap_ci(ratios: list[float], draws: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% interval of the median per-round ratio, resampling rounds with replacement."""
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(draws))
    return medians[int(0.025 * draws)], medians[int(0.975 * draws)]


def direct_cost_us(rounds: int = 10, steps: int = 300) -> tuple[float, float]:
    """The profiler's own cost per step, measured on a tiny model whose step is mostly overhead.

    A 3-layer 4-wide MLP step takes ~0.4 ms, so the hooks' few tens of microseconds stand out of
    the noise; interleaved with and without the always-on profiler. Returns (baseline us, cost us).
    """
    model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(3)])
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    x = torch.randn(2, 4)

    def block() -> float:
        t0 = time.thread_time_ns()
        for _ in range(steps):
            loss = model(x).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return (time.thread_time_ns() - t0) / steps / 1e3

    block()
    base, prof = [], []
    with tempfile.TemporaryDirectory(prefix="autotune-direct-") as tmp:
        for r in range(rounds):
            base.append(block())
            with autotune.profile(
                run_dir=Path(tmp) / f"d{r}", deep_profile=False, count_flops=False, quiet=True
            ):
                block()  # warm-up steps and the switch to root-module hooks
                prof.append(block())
    return statistics.median(base), statistics.median(prof) - statistics.median(base)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    trainer = Trainer("gpt", batch_size=args.batch_size, device=device, seed=0)
    print(
        f"demo GPT, batch {trainer.batch_size}, device {device}, torch threads fixed at "
        f"{torch.get_num_threads()} (torch.set_num_threads({args.threads})); "
        f"{args.rounds} rounds x {args.steps} timed steps per arm, {UNTIMED_STEPS} untimed steps first"
    )
    for _ in range(5):  # first steps allocate and warm caches; time none of them
        trainer.step()

    clocks = ("wall", "cpu")
    times_ms: dict[tuple[str, str], list[float]] = {(a, c): [] for a in ARMS for c in clocks}
    round_medians: dict[tuple[str, str], list[float]] = {(a, c): [] for a in ARMS for c in clocks}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="autotune-overhead-") as tmp:
        for r in range(args.rounds):
            order = ARMS[r % len(ARMS) :] + ARMS[: r % len(ARMS)]
            for arm in order:
                with arm_context(arm, Path(tmp), r, device):
                    pairs = run_arm(trainer, args.steps, sync)
                for k, clock in enumerate(clocks):
                    ms = [p[k] / 1e6 for p in pairs]
                    times_ms[arm, clock] += ms
                    round_medians[arm, clock].append(statistics.median(ms))
    elapsed = time.perf_counter() - started

    print()
    print(f"{'arm':<18}{'clock':<7}{'median ms':>11}{'p10 ms':>9}{'p90 ms':>9}{'ratio':>8}{'paired':>8}")
    ratios: dict[tuple[str, str], float] = {}
    paired_ratios: dict[tuple[str, str], float] = {}
    for arm in ARMS:
        for clock in clocks:
            key = (arm, clock)
            med = statistics.median(times_ms[key])
            ratios[key] = med / statistics.median(times_ms["baseline", clock])
            # Paired: the median over rounds of (this arm's round median / baseline's round median).
            paired_ratios[key] = statistics.median(
                m / b for m, b in zip(round_medians[key], round_medians["baseline", clock], strict=True)
            )
            print(
                f"{arm:<18}{clock:<7}{med:>11.2f}{pct(times_ms[key], 0.1):>9.2f}"
                f"{pct(times_ms[key], 0.9):>9.2f}{ratios[key]:>8.3f}{paired_ratios[key]:>8.3f}"
            )
    print(f"({len(times_ms['baseline', 'wall'])} timed steps per arm; benchmark took {elapsed:.0f} s)")
    print()

    def describe(ratio: float) -> str:
        return f"{(ratio - 1) * 100:+.1f}% (ratio {ratio:.3f})"

    for arm in ARMS[1:]:
        per_round = [
            m / b for m, b in zip(round_medians[arm, "wall"], round_medians["baseline", "wall"], strict=True)
        ]
        lo, hi = bootstrap_ci(per_round)
        print(
            f"{arm}: paired median ratio {statistics.median(per_round):.3f}, "
            f"95% interval {lo:.3f} to {hi:.3f} over {len(per_round)} rounds"
        )
    per_round = [
        m / t
        for m, t in zip(
            round_medians["always-on", "wall"], round_medians["always-on/thread", "wall"], strict=True
        )
    ]
    lo, hi = bootstrap_ci(per_round)
    print(
        f"sampler process against sampling in the training process: paired median ratio "
        f"{statistics.median(per_round):.3f}, 95% interval {lo:.3f} to {hi:.3f} over {len(per_round)} rounds"
    )
    base_us, cost_us = direct_cost_us()
    base_step_ms = statistics.median(times_ms["baseline", "wall"])
    print(
        f"direct cost on the training thread: {cost_us:.0f} us per step (tiny-model step {base_us:.0f} us), "
        f"= {cost_us / 1e3 / base_step_ms * 100:.2f}% of this {base_step_ms:.1f} ms step"
    )

    print(
        f"overhead (median step, wall clock): always-on {describe(ratios['always-on', 'wall'])}, "
        f"torch.profiler full tracing {describe(ratios['torch.profiler', 'wall'])}"
    )
    print(
        "overhead (median step, training-thread CPU time): "
        f"always-on {describe(ratios['always-on', 'cpu'])}, "
        f"torch.profiler full tracing {describe(ratios['torch.profiler', 'cpu'])}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
