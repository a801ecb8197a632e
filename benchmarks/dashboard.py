"""How fast the dashboard opens and refreshes on a big live run (100k steps, 1M GPU samples).

    python benchmarks/dashboard.py [--steps 100000] [--samples 1000000] [--gpus 2] [--keep DIR]

1. A child process writes the run with the profiler's own store writer (``RunStore``): ``--steps``
   steps of rank 0 and ``--samples`` GPU samples over ``--gpus`` GPUs at 10 Hz, no summary.json,
   its rank not finished: a run still being written. The child keeps the store open (its WAL file
   stays), as a training job would, until told to append.
2. This process opens the dashboard headless at 120×40 (``App.run_test``) and times app start to the
   first full render with the run's data (**open**).
3. The child appends 1,000 steps and 10,000 samples; one refresh is timed from its start to the
   render of the new data (**refresh**).
4. The peak resident memory of this process (the dashboard; the writer is the child) is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from profilers.contract.records import DeviceSample

T0_NS = 1_764_000_000_000_000_000
CHUNK = 50_000


def _steps(first: int, count: int, step_ns: int) -> list[object]:
    from profilers.contract.records import StepRecord

    out = []
    for s in range(first, first + count):
        d = int(step_ns * (1 + 0.05 * math.sin(s / 50)))
        out.append(
            StepRecord(
                s,
                0,
                T0_NS + (s - 1) * step_ns,
                d,
                d // 10,
                d * 3 // 10,
                d // 2,
                d // 20,
                d - d // 10 - d * 3 // 10 - d // 2 - d // 20,
                64,
                None,
                "measured",
                2.0,
            )
        )
    return out


def _samples(first: int, count: int, gpus: int) -> list[DeviceSample]:
    from profilers.contract.records import DeviceSample

    rows = []
    for i in range(first, first + count):
        tick, gpu = divmod(i, gpus)
        rows.append(
            DeviceSample(
                t_ns=T0_NS + tick * 100_000_000,
                device_index=gpu,
                kind="gpu",
                gpu_util_pct=80 + 15 * math.sin(tick / 300),
                mem_used_bytes=int(40e9 + 1e9 * math.sin(tick / 900)),
                mem_total_bytes=150_000_000_000,
                power_mw=int(500_000 + 80_000 * math.sin(tick / 200)),
                sm_clock_mhz=1830,
            )
        )
    return rows


def writer(run_dir: Path, steps: int, samples: int, gpus: int) -> None:
    """The child: write the run, say so, wait for a line on stdin, append, say so, wait, exit."""
    from profilers.contract.records import DeviceInfo
    from profilers.runtime.store import RunStore

    run_dir.mkdir(parents=True, exist_ok=True)
    store = RunStore(run_dir / "run.db")
    step_ns = max(1, samples // gpus) * 100_000_000 // steps
    store.set_meta(
        {
            "name": "bench",
            "command": ["train.py"],
            "started_ns": T0_NS,
            "host": "bench-host",
            "world_size": 1,
            "backends": ["nvml"],
            "options": {"max_steps": None},
        }
    )
    store.set_devices([DeviceInfo(g, "gpu", "NVIDIA H200", 150_000_000_000) for g in range(gpus)])
    store.set_rank(1, "bench-host", 1, None, None)
    for first in range(1, steps + 1, CHUNK):
        store.add_steps(_steps(first, min(CHUNK, steps + 1 - first), step_ns))  # type: ignore[arg-type]
    for first in range(0, samples, CHUNK):
        store.add_samples(_samples(first, min(CHUNK, samples - first), gpus))
    print("written", flush=True)
    sys.stdin.readline()
    store.add_steps(_steps(steps + 1, 1_000, step_ns))  # type: ignore[arg-type]
    store.add_samples(_samples(samples, 10_000, gpus))
    print("appended", flush=True)
    sys.stdin.readline()
    store.close()


async def measure(run_dir: Path, child: subprocess.Popen[str]) -> tuple[float, float, int, int]:
    """Open time, refresh time, and the steps shown before and after the refresh."""
    from tui.app import DashboardApp  # noqa: TID251 (the benchmark measures the dashboard)
    from tui.screen import DashboardScreen  # noqa: TID251

    start = time.perf_counter()
    app = DashboardApp(run_dir, refresh_s=3600)  # refreshes only when asked
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, DashboardScreen)
        while screen.polls < 1:
            await asyncio.sleep(0.005)
        await pilot.pause()
        opened = time.perf_counter() - start
        before = screen.snapshot.live.step if screen.snapshot and screen.snapshot.live else 0
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write("append\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "appended"
        start = time.perf_counter()
        screen.poll()
        while screen.polls < 2:
            await asyncio.sleep(0.002)
        await pilot.pause()
        refreshed = time.perf_counter() - start
        after = screen.snapshot.live.step if screen.snapshot and screen.snapshot.live else 0
        app.exit(0)
    return opened, refreshed, before or 0, after or 0


def main() -> int:
    """Write the run, measure, print."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--samples", type=int, default=1_000_000)
    p.add_argument("--gpus", type=int, default=2)
    p.add_argument(
        "--keep", type=Path, help="write the run here and keep it (default: a temporary directory)"
    )
    p.add_argument("--writer", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.writer:
        writer(args.writer, args.steps, args.samples, args.gpus)
        return 0
    tmp = None if args.keep else Path(tempfile.mkdtemp(prefix="dashboard-bench-"))
    run_dir = args.keep or (tmp / "run")  # type: ignore[operator]
    try:
        t = time.perf_counter()
        child = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--writer",
                str(run_dir),
                "--steps",
                str(args.steps),
                "--samples",
                str(args.samples),
                "--gpus",
                str(args.gpus),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "written"
        print(
            f"wrote {args.steps:,} steps and {args.samples:,} samples ({args.gpus} GPUs) in "
            f"{time.perf_counter() - t:.1f} s; run.db {(run_dir / 'run.db').stat().st_size / 2**20:.0f} MiB"
        )
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        opened, refreshed, before, after = asyncio.run(measure(run_dir, child))
        child.stdin.write("done\n")
        child.stdin.flush()
        child.wait(timeout=60)
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(f"open (app start to first full render): {opened:.2f} s (step {before:,} shown)")
        print(
            f"refresh after appending 1,000 steps and 10,000 samples: {refreshed * 1000:.0f} ms "
            f"(step {after:,} shown)"
        )
        print(
            f"peak RSS of the dashboard process: {peak_kib / 1024:.0f} MiB "
            f"({rss_before / 1024:.0f} MiB before the app started)"
        )
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
