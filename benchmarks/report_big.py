"""How long the report takes on a big finished run (100k steps, 1M GPU samples), part by part.

    python benchmarks/report_big.py [--steps 100000] [--samples 1000000] [--run DIR] [--keep]

Writes the run once with the profiler's own store writer and summarizer (or reuses ``--run DIR``
when it already holds one, so two versions of the code can be timed on the same run), then times,
in this process: loading it (``load_run``), the advice, the section builders, and rendering HTML,
Markdown and JSON, and ``make_report`` whole. Prints seconds per part and the peak resident memory.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import resource
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from profilers.contract.records import DeviceSample


def _dashboard_bench():  # type: ignore[no-untyped-def]
    """The dashboard benchmark's run generators (the same steps and samples)."""
    spec = importlib.util.spec_from_file_location("dashboard_bench", ROOT / "benchmarks" / "dashboard.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_run(run_dir: Path, steps: int, samples: int, gpus: int, host: bool = True) -> None:
    """A finished run: run.db as the dashboard benchmark writes it, and the summary it gives.

    With ``host`` (as the profiler samples), each 100 ms tick holds one host reading beside the
    GPUs' (the host's CPU use, the process's RSS): ``samples`` readings in all.
    """
    from profilers.contract.figures import DeviceEntry
    from profilers.contract.json_checks import record_json
    from profilers.contract.reader import Snapshot
    from profilers.contract.records import DeviceInfo
    from profilers.contract.summarize import run_statistics
    from profilers.runtime.store import RunStore

    bench = _dashboard_bench()
    run_dir.mkdir(parents=True, exist_ok=True)
    store = RunStore(run_dir / "run.db")
    ticks = samples // (gpus + 1) if host else samples // gpus
    step_ns = max(1, ticks) * 100_000_000 // steps
    store.set_meta({"name": "bench", "command": ["train.py"], "world_size": 1})
    store.set_devices(
        [DeviceInfo(g, "gpu", "NVIDIA H200", 150_000_000_000) for g in range(gpus)]
        + [DeviceInfo(0, "host", "cpu", 2_000_000_000_000, cpu_cores=32)] * host
    )
    for first in range(1, steps + 1, bench.CHUNK):
        store.add_steps(bench._steps(first, min(bench.CHUNK, steps + 1 - first), step_ns))
    for first in range(0, ticks * gpus, bench.CHUNK):
        store.add_samples(bench._samples(first, min(bench.CHUNK, ticks * gpus - first), gpus))
    for first in range(0, ticks if host else 0, bench.CHUNK):
        store.add_samples(_host_samples(first, min(bench.CHUNK, ticks - first), bench.T0_NS))
    store.close()
    with Snapshot(run_dir / "run.db") as snap:
        records, (_, _, readings) = snap.steps(), snap.samples()
    stats = run_statistics(records, readings, gpu_names={g: "NVIDIA H200" for g in range(gpus)})
    device = DeviceEntry("cuda", "NVIDIA H200", 1, 0, tuple(range(gpus)))
    summary = replace(stats, name="bench", run_dir=str(run_dir), device=device, precision="bf16")
    (run_dir / "summary.json").write_text(json.dumps(record_json(summary), indent=2) + "\n")


def _host_samples(first: int, count: int, t0_ns: int) -> list[DeviceSample]:
    """Host readings of ticks ``first``.. (the host's CPU busy 30-50%, the process's RSS slowly swinging)."""
    from profilers.contract.records import DeviceSample

    return [
        DeviceSample(
            t_ns=t0_ns + tick * 100_000_000,
            device_index=0,
            kind="host",
            cpu_util_pct=40 + 10 * math.sin(tick / 500),
            process_cpu_pct=100.0,
            rss_bytes=int(6e9 + 2e8 * math.sin(tick / 700)),
            host_mem_used_bytes=300_000_000_000,
            host_mem_total_bytes=2_000_000_000_000,
        )
        for tick in range(first, first + count)
    ]


def timed(label: str, fn, *args):  # type: ignore[no-untyped-def]
    """Run ``fn(*args)``, print its time, return its result."""
    start = time.perf_counter()
    out = fn(*args)
    print(f"  {label:<22} {time.perf_counter() - start:7.2f} s", flush=True)
    return out


def main() -> int:
    """Write (or reuse) the run, then time the report's parts and the whole."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--samples", type=int, default=1_000_000)
    p.add_argument("--gpus", type=int, default=2)
    p.add_argument("--run", type=Path, help="the run directory (written when it holds no run)")
    p.add_argument("--keep", action="store_true", help="keep the run directory made in a temporary folder")
    p.add_argument("--no-host", action="store_true", help="GPU readings only (no host reading per tick)")
    args = p.parse_args()
    run_dir = args.run or Path(tempfile.mkdtemp(prefix="report-big-")) / "run"
    if not (run_dir / "summary.json").exists():
        print(f"writing {args.steps:,} steps and {args.samples:,} samples to {run_dir} ...", flush=True)
        write_run(run_dir, args.steps, args.samples, args.gpus, host=not args.no_host)
    from autotune.report import make

    try:
        from profilers.contract.rundir import load_run
    except ImportError:  # an older version of the code
        from autotune.report.rundata import load_run  # type: ignore[import-not-found,no-redef]
    from autotune.advice.advise import advise
    from autotune.report.build import build_report

    print(f"report of {run_dir}:")
    run = timed("load_run", load_run, run_dir)
    advice = timed("advise", advise, run)
    report = timed("build_report", build_report, run, advice)
    for fmt in ("html", "md", "json"):
        timed(f"render {fmt}", make.render, report, fmt)
    timed("make_report (whole)", make.make_report, run_dir)
    print(f"  peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    if args.run is None and not args.keep:
        shutil.rmtree(run_dir.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
