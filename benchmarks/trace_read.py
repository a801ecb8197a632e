"""Reading a large torch.profiler trace: this tool against Holistic Trace Analysis, side by side.

    python benchmarks/trace_read.py [--mb 200] [--hta-python PATH] [--keep DIR]

Builds a large trace by repeating the real V100 trace's events (tests/data/gpu_traces/v100_single)
back to back, each copy shifted in time by the trace's span and its correlation/external ids
offset, until the JSON passes ``--mb`` MB; writes it uncompressed. Then, each in a fresh process,
(1) this tool: stream the file and compute every rank figure (``analyse_file``: temporal
breakdown, overlap, steps, top kernels and ops, launch stats), and (2) HTA where ``--hta-python``
names a Python with ``holistictraceanalysis`` installed: ``TraceAnalysis(trace_dir=...)`` (its
parse) and ``get_temporal_breakdown()``. Prints MB/s and peak resident memory (ru_maxrss of the
child) for each, and their ratios, measured in the same run on the same file.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "data" / "gpu_traces" / "v100_single" / "rank-0.json.gz"

OURS = """
import resource, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from profilers.traces.analysis import analyse_file
t = time.perf_counter()
r = analyse_file(Path({path!r}))
s = time.perf_counter() - t
print(s, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, r.idle_pct, r.kernels)
"""
HTA = """
import logging, resource, time, warnings
warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
ta = TraceAnalysis(trace_dir={folder!r})
tb = ta.get_temporal_breakdown(visualize=False)
s = time.perf_counter() - t
print(s, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, float(tb["idle_time_pctg"].iloc[0]), -1)
"""


def build(target_mb: float, out: Path) -> tuple[int, int]:
    """Write the repeated trace to ``out``; returns (bytes, copies)."""
    with gzip.open(SOURCE) as f:
        doc = json.load(f)
    events = doc.pop("traceEvents")
    timed = [e for e in events if isinstance(e.get("ts"), int | float)]
    start = min(e["ts"] for e in timed)
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - start
    one = len(json.dumps(events))
    copies = max(1, int(target_mb * 1e6 / one) + 1)
    id_step = 10_000_000
    with out.open("w") as f:
        f.write(json.dumps(doc)[:-1] + ', "traceEvents": [')
        for c in range(copies):
            for i, e in enumerate(events):
                if c:
                    e = dict(e)
                    if isinstance(e.get("ts"), int | float):
                        e["ts"] = e["ts"] + c * span
                    args = e.get("args")
                    if isinstance(args, dict):
                        args = dict(args)
                        for key in ("correlation", "External id"):
                            if isinstance(args.get(key), int) and args[key] >= 0:
                                args[key] += c * id_step
                        e["args"] = args
                    if e.get("name", "").startswith("ProfilerStep#"):
                        e["name"] = f"ProfilerStep#{c * 1000 + i}"
                f.write(("," if c or i else "") + json.dumps(e))
        f.write("]}")
    return out.stat().st_size, copies


def run(python: str, code: str) -> tuple[float, int, float, int]:
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"{python}: failed\n{done.stderr[-2000:]}")
    seconds, rss, idle, kernels = done.stdout.strip().splitlines()[-1].split()
    return float(seconds), int(rss), float(idle), int(kernels)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=200.0, help="size of the built trace in MB (200)")
    parser.add_argument("--hta-python", help="a Python with holistictraceanalysis installed")
    parser.add_argument("--keep", type=Path, help="write the trace into this folder and keep it")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="trace-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "rank-0.json"
    try:
        t = time.perf_counter()
        size, copies = build(args.mb, path)
        built_s = time.perf_counter() - t
        print(f"trace: {size / 1e6:.0f} MB ({copies} copies of the V100 trace), built in {built_s:.0f} s")
        mb = size / 1e6
        ours = run(sys.executable, OURS.format(root=str(ROOT), path=str(path)))
        print(f"gpu-autotune  {ours[0]:7.1f} s  {mb / ours[0]:6.1f} MB/s  peak RSS {ours[1] / 2**20:7.0f} MiB"
              f"  idle {ours[2]:.2f}%  ({ours[3]:,} GPU activities)")  # fmt: skip
        if args.hta_python:
            hta = run(args.hta_python, HTA.format(folder=str(folder)))
            print(f"HTA           {hta[0]:7.1f} s  {mb / hta[0]:6.1f} MB/s  "
                  f"peak RSS {hta[1] / 2**20:7.0f} MiB  idle {hta[2]:.2f}%")  # fmt: skip
            print(
                f"ratio: {hta[0] / ours[0]:.1f}x HTA's throughput at {ours[1] / hta[1]:.2f}x its peak memory"
            )
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
