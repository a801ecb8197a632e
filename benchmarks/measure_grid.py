"""Measure the whole demo search space on this machine, trial by trial, for the searcher benchmark.

Every configuration of :func:`autotune.demo.target.demo_space` (micro-batch × precision × layout)
runs as a real trial of ``python -m autotune.demo.target --model M`` through the trial runner
(:func:`autotune.tuner.trials.run_trial`: its own process, ``torch.distributed.run`` with 2 ranks
for ddp and fsdp), and the result goes to ``benchmarks/data/grid-<model>-<device>.json``:

- ``machine``: CPU count, torch and Python versions, platform, date, the command, the git commit,
  ``OMP_NUM_THREADS`` and the load average before and after;
- ``settings``: steps, warm-up steps, repeats, seed, global batch, ranks of ddp/fsdp, threads;
- ``space``: the space in the TOML tables' form (``Space.from_dict`` reads it back);
- ``configs``: for every configuration its ``params``, ``status`` (the runner's: ok, oom, crashed,
  timeout, diverged), ``samples_per_s`` (job-wide), ``peak_memory_bytes``, ``step_time_s`` (median of the
  measured steps), ``duration_s`` (the whole trial, start-up included), the per-repeat values,
  and ``feasible``/``reason``: a micro-batch that does not divide the global batch per rank
  cannot exist (the trial crashes with ``batch_plan``'s ValueError, recorded as the runner says);
- ``baseline``: the target run with no parameter set, i.e. the user's defaults (the whole global
  batch in one micro-batch, fp32, single), measured in every pass like a configuration (it need
  not be in the space: the cnn's 96 is no power of two), and ``best``, with its speedup over it.

Noise: this project's machine has 2 cores shared with other work. Each trial runs torch with
``--threads`` intra-op threads per rank (default 1, what torchrun gives each rank anyway: one
core plays one device, and two OpenMP threads swing 10x when another process wants a core). The
grid runs ``--repeats`` times in interleaved passes, each in its own seeded shuffled order, and
the figures kept are the medians over the passes (of the ok ones).

Run from the repository root (about 20 minutes per model at the defaults on this project's shared
2-core machine: 19 for the gpt's 45 configurations, 20 for the cnn's 54, two passes each)::

    python benchmarks/measure_grid.py --model gpt [--repeats 2] [--max-steps 12]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autotune.demo.target import DEFAULT_GLOBAL_BATCH, demo_space, layout_world_size
from autotune.search.space import Value
from autotune.tuner.trials import TrialOutcome, TrialSettings, run_trial

ROOT = Path(__file__).resolve().parents[1]
#: The key of the baseline trial (no parameters set) among the configurations' keys.
BASELINE = ("baseline",)
DATA = ROOT / "benchmarks" / "data"
ERROR_CHARS = 400


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--model", choices=tuple(DEFAULT_GLOBAL_BATCH), default="gpt")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--global-batch", type=int, default=None, help="default: the model's")
    p.add_argument("--world-size", type=int, default=2, help="ranks of ddp and fsdp (default 2)")
    p.add_argument("--repeats", type=int, default=2, help="interleaved passes over the grid (default 2)")
    p.add_argument("--max-steps", type=int, default=12, help="steps per trial (default 12)")
    p.add_argument("--warmup-steps", type=int, default=2, help="steps left out of the figures (default 2)")
    p.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of every rank (default 1)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per trial (default 300)")
    p.add_argument("--seed", type=int, default=0, help="shuffles the order of each pass (default 0)")
    p.add_argument("--out", type=Path, default=None, help="(benchmarks/data/grid-<model>-<device>.json)")
    p.add_argument("--only", default="", help="a subset, e.g. 'layout=single;precision=fp32' (trying out)")
    return p.parse_args(argv)


def feasibility(params: dict[str, Value], global_batch: int, world_size: int) -> str | None:
    """Why the configuration cannot exist (micro-batch does not divide the rank's share), or None."""
    w = layout_world_size(str(params["layout"]), world_size)
    per_rank, micro = global_batch // w, int(params["micro_batch"])
    if global_batch % w or per_rank % micro:
        return f"micro_batch {micro} does not divide global_batch {global_batch} / {w} rank(s) = {per_rank}"
    return None


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def machine_facts(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    return {
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cuda_device": torch.cuda.get_device_name() if args.device == "cuda" else None,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "git_commit": git_commit(),
        "omp_num_threads_env": os.environ.get("OMP_NUM_THREADS"),
        "load_average_start": os.getloadavg(),
    }


def summarize(
    params: dict[str, Value], reason: str | None, outcomes: list[TrialOutcome], loads: list[float]
) -> dict[str, Any]:
    """One configuration's record: medians over its ok runs, every run's figures beside them."""
    ok = [o for o in outcomes if o.status == "ok"]
    statuses = [o.status for o in outcomes]

    def median(values: list[float | None]) -> float | None:
        kept = [v for v in values if v is not None]
        return statistics.median(kept) if kept else None

    peak = median([o.peak_memory_bytes for o in ok])
    errors = [o.error[-ERROR_CHARS:] for o in outcomes if o.error]
    return {
        "params": params,
        "status": "ok" if ok else statuses[0],
        "feasible": reason is None,
        "reason": reason,
        "samples_per_s": median([o.throughput for o in ok]),
        "peak_memory_bytes": None if peak is None else int(peak),
        "step_time_s": median([o.step_time_s for o in ok]),
        "duration_s": statistics.median(o.duration_s for o in outcomes),
        "runs": {
            "status": statuses,
            "samples_per_s": [o.throughput for o in outcomes],
            "step_time_s": [o.step_time_s for o in outcomes],
            "duration_s": [round(o.duration_s, 2) for o in outcomes],
            "load_average": loads,
        },
        "error": errors[0] if errors else None,
    }


def best_of(configs: list[dict[str, Any]], baseline: dict[str, Any] | None) -> dict[str, Any]:
    """The best measured configuration and its speedup over the baseline."""
    measured = [c for c in configs if c["status"] == "ok" and c["samples_per_s"] is not None]
    best = max(measured, key=lambda c: c["samples_per_s"], default=None)
    speedup = None
    if best is not None and baseline is not None and baseline["samples_per_s"]:
        speedup = best["samples_per_s"] / baseline["samples_per_s"]
    return {
        "best": None if best is None else {k: best[k] for k in ("params", "samples_per_s")},
        "speedup_over_baseline": speedup,
    }


def write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    global_batch = args.global_batch or DEFAULT_GLOBAL_BATCH[args.model]
    space = demo_space(args.model, device=args.device, world_size=args.world_size, global_batch=global_batch)
    points = list(space.points())
    for item in filter(None, args.only.split(";")):
        name, _, raw = item.partition("=")
        points = [p for p in points if str(p[name]) == raw]
    out = args.out or DATA / f"grid-{args.model}-{args.device}.json"
    script_args = ["--model", args.model, "--device", args.device, "--global-batch", str(global_batch)]
    base = TrialSettings(
        script="autotune.demo.target",
        module=True,
        script_args=tuple(script_args),
        max_steps=args.max_steps,
        warmup_steps=args.warmup_steps,
        timeout_s=args.timeout,
        extra_env={"OMP_NUM_THREADS": str(args.threads)},
        distributed_world_size=args.world_size,
    )
    doc: dict[str, Any] = {
        "schema": 1,
        "model": args.model,
        "device": args.device,
        "objective": "samples_per_s",
        "machine": machine_facts(args),
        "settings": {
            "global_batch": global_batch,
            "world_size": args.world_size,
            "max_steps": args.max_steps,
            "warmup_steps": args.warmup_steps,
            "repeats": args.repeats,
            "threads_per_rank": args.threads,
            "timeout_s": args.timeout,
            "seed": args.seed,
            "target": "python -m autotune.demo.target " + shlex.join(script_args),
        },
        "space": space.to_dict(),
        "complete": False,
        "baseline": None,
        "configs": [],
    }
    baseline: dict[str, Value] = {"micro_batch": global_batch, "precision": "fp32", "layout": "single"}
    outcomes: dict[tuple[Any, ...], list[TrialOutcome]] = {space.key(p): [] for p in points}
    loads: dict[tuple[Any, ...], list[float]] = {space.key(p): [] for p in points}
    outcomes[BASELINE], loads[BASELINE] = [], []
    started = time.monotonic()
    total = (len(points) + 1) * args.repeats
    with tempfile.TemporaryDirectory(prefix="measure-grid-") as work:
        done = 0
        for rep in range(args.repeats):
            order: list[dict[str, Value] | None] = [*points, None]  # None: the baseline
            random.Random(f"{args.seed}:{rep}").shuffle(order)
            for point in order:
                params = baseline if point is None else point
                key = BASELINE if point is None else space.key(point)
                world = layout_world_size(str(params["layout"]), args.world_size)
                settings = dataclasses.replace(base, world_size=world)
                run_dir = Path(work) / f"pass{rep}-{'-'.join(map(str, key))}"
                loads[key].append(round(os.getloadavg()[0], 2))
                outcome = run_trial(settings, space, {} if point is None else point, run_dir)
                outcomes[key].append(outcome)
                done += 1
                speed = "" if outcome.throughput is None else f" {outcome.throughput:9.1f} samples/s"
                label = "baseline (no parameters)" if point is None else str(params)
                print(
                    f"[{done:>3}/{total}] {time.monotonic() - started:6.0f} s  pass {rep + 1}  "
                    f"{label}  {outcome.status} in {outcome.duration_s:.1f} s{speed}",
                    flush=True,
                )
                if outcomes[BASELINE]:
                    doc["baseline"] = summarize(baseline, None, outcomes[BASELINE], loads[BASELINE])
                doc["configs"] = [
                    summarize(p, feasibility(p, global_batch, args.world_size), outcomes[k], loads[k])
                    for p in points
                    if (outcomes[k := space.key(p)])
                ]
                write(out, doc)
    doc["machine"]["load_average_end"] = os.getloadavg()
    doc["wall_time_s"] = round(time.monotonic() - started, 1)
    doc["complete"] = True
    doc.update(best_of(doc["configs"], doc["baseline"]))
    write(out, doc)
    print(f"wrote {out} ({len(points)} configurations x {args.repeats} passes, {doc['wall_time_s']:.0f} s)")
    for label in ("baseline", "best"):
        if doc[label] is not None:
            print(f"  {label}: {doc[label]['params']} {doc[label]['samples_per_s']:.1f} samples/s")
    if doc["speedup_over_baseline"] is not None:
        print(f"  speedup of the best over the baseline: {doc['speedup_over_baseline']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
