"""Overhead of the always-on profiler, next to full torch.profiler tracing, on the demo GPT.

One process, one model, three arms run interleaved round after round (baseline, always-on,
torch.profiler, then the next round with the order rotated) so drift in machine load hits every
arm alike. Each step is timed in the loop itself with ``time.perf_counter_ns`` (after a
``torch.cuda.synchronize()`` on CUDA). Every arm first runs the same number of untimed steps:
the profiler's warm-up and FLOP-counting steps, which are not what "always-on" costs.

torch runs with a fixed number of intra-op threads (``--threads``, default 1). One thread keeps
the measurement stable on a small shared CPU, but it also leaves a core free for the profiler's
sampling thread; ``--threads`` equal to the core count gives the fully subscribed worst case.

Arms:
- baseline: the plain training loop.
- always-on: inside ``autotune.profile(deep_profile=False)`` (step/phase hooks and the sampler).
- torch.profiler: inside ``torch.profiler.profile(record_shapes=True, with_flops=True)``.

Run from the repository root after ``pip install -e .``::

    python benchmarks/overhead.py [--rounds 8] [--steps 40] [--batch-size 16] [--device cpu]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import torch

import autotune
from autotune.demo.models import Trainer, resolve_device

ARMS: tuple[str, ...] = ("baseline", "always-on", "torch.profiler")
#: Untimed steps at the start of every arm: the profiler's warm-up plus its FLOP-counting step.
PROFILER_WARMUP_STEPS = 3
UNTIMED_STEPS = PROFILER_WARMUP_STEPS + 2
#: One intra-op thread: on a small shared machine two OpenMP threads make step times swing 10x
#: whenever another process wants a core, which drowns a sub-percent effect.
DEFAULT_THREADS = 1
DEFAULT_BATCH_SIZE = 8


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=8, help="interleaved rounds (default 8)")
    p.add_argument("--steps", type=int, default=40, help="timed steps per arm per round (default 40)")
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


def run_arm(trainer: Trainer, steps: int, sync: Callable[[], None]) -> list[int]:
    """``UNTIMED_STEPS`` untimed steps, then ``steps`` steps timed one by one, in ns."""
    for _ in range(UNTIMED_STEPS):
        trainer.step()
    sync()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter_ns()
        trainer.step()
        sync()
        times.append(time.perf_counter_ns() - t0)
    return times


@contextmanager
def nothing() -> Iterator[None]:
    yield


def arm_context(
    arm: str, run_root: Path, round_index: int, device: torch.device
) -> AbstractContextManager[object]:
    if arm == "baseline":
        return nothing()
    if arm == "always-on":
        return autotune.profile(
            name=f"overhead-r{round_index}",
            run_dir=run_root / f"r{round_index}",
            warmup_steps=PROFILER_WARMUP_STEPS,
            deep_profile=False,
            quiet=True,
        )
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return torch.profiler.profile(activities=activities, record_shapes=True, with_flops=True)


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

    times_ms: dict[str, list[float]] = {arm: [] for arm in ARMS}
    round_medians: dict[str, list[float]] = {arm: [] for arm in ARMS}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="autotune-overhead-") as tmp:
        for r in range(args.rounds):
            order = ARMS[r % len(ARMS) :] + ARMS[: r % len(ARMS)]
            for arm in order:
                with arm_context(arm, Path(tmp), r, device):
                    ms = [t / 1e6 for t in run_arm(trainer, args.steps, sync)]
                times_ms[arm] += ms
                round_medians[arm].append(statistics.median(ms))
    elapsed = time.perf_counter() - started

    base = statistics.median(times_ms["baseline"])
    print()
    print(f"{'arm':<16}{'median ms':>11}{'p10 ms':>9}{'p90 ms':>9}{'ratio':>8}{'paired':>8}")
    ratios: dict[str, float] = {}
    for arm in ARMS:
        med = statistics.median(times_ms[arm])
        ratios[arm] = med / base
        # Paired: the median over rounds of (this arm's round median / baseline's round median).
        paired = statistics.median(
            m / b for m, b in zip(round_medians[arm], round_medians["baseline"], strict=True)
        )
        print(
            f"{arm:<16}{med:>11.2f}{pct(times_ms[arm], 0.1):>9.2f}{pct(times_ms[arm], 0.9):>9.2f}"
            f"{ratios[arm]:>8.3f}{paired:>8.3f}"
        )
    print(f"({len(times_ms['baseline'])} timed steps per arm; benchmark took {elapsed:.0f} s)")
    print()

    def describe(ratio: float) -> str:
        return f"{(ratio - 1) * 100:+.1f}% (ratio {ratio:.3f})"

    print(
        f"overhead: always-on {describe(ratios['always-on'])}, "
        f"torch.profiler full tracing {describe(ratios['torch.profiler'])}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
