"""How long a 70B plan takes on this machine, over every priced GPU, and what it says.

    python benchmarks/plan_speed.py [--gpus-per-node 8]

Two ways in, each timed from start to the finished plan:

1. ``autotune.plan.plan.plan`` on a Llama 3.1 70B shape (``benchmarks/llama_shape.py``: 70.6B
   parameters, sequence 8192), bf16, every GPU of the price table, 8 per node: every layout (data,
   tensor, pipeline parallel, FSDP, offload), micro-batch and GPU predicted, and the suggestion.
   Timed twice in one run: the two traces of each setting one after the other
   (``AUTOTUNE_PLAN_SERIAL=1``), then at once (one in a forked child), with their ratio.
2. ``autotune plan`` on an unmodified script (``tests/scripts/plan_lm.py`` at width 8192, 80 layers,
   sequence 2048: 64.4B parameters), in a child process as a user runs it.

The goal (issue 23): under 30 s each on this project's 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    args = parser.parse_args()

    from llama_shape import LLAMA_70B, llama_workload

    from autotune.plan.plan import plan

    factory, batch, loss, adamw, tokens = llama_workload(LLAMA_70B)

    def timed_plan() -> tuple[Any, float]:
        started = time.perf_counter()
        result = plan(factory, batch, loss, adamw, global_batch=16, gpus_per_node=args.gpus_per_node,
                      precisions=("bf16",), tokens_per_sample=tokens)  # fmt: skip
        return result, time.perf_counter() - started

    # the two traces of each setting one after the other, then at once (autotune.plan.two_at_once)
    os.environ["AUTOTUNE_PLAN_SERIAL"] = "1"
    serial, serial_s = timed_plan()
    del os.environ["AUTOTUNE_PLAN_SERIAL"]
    result, took = timed_plan()
    same = serial.configs == result.configs
    print(
        f"plan(): traces one after the other {serial_s:.1f} s, two at once {took:.1f} s: "
        f"{serial_s / took:.2f}x ({_cores()} cores); the same {len(result.configs)} configurations: {same}"
    )
    fits = [c for c in result.configs if c.fits]
    print(
        f"plan(): Llama 3.1 70B shape, {(result.model.parameters or 0) / 1e9:.1f}B parameters, "
        f"{args.gpus_per_node} GPUs per node: {len(result.configs)} configurations "
        f"({len(fits)} fit) in {took:.1f} s ({result.trace_s:.1f} s tracing)"
    )
    print(f"  suggestion: {result.suggestion_text}")
    layouts = sorted({c.params.layout for c in fits})
    print(f"  layouts that fit somewhere: {', '.join(layouts)}")

    script = ROOT / "tests" / "scripts" / "plan_lm.py"
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        command = [sys.executable, "-m", "autotune", "plan", "--gpus", str(args.gpus_per_node),
                   "--global-batch", "16", "--format", "json", "-o", out.name, str(script), "--width", "8192",
                   "--layers", "80", "--seq", "2048", "--batch", "2", "--steps", "3"]  # fmt: skip
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        took = time.perf_counter() - started
        if done.returncode != 0:
            print(f"autotune plan failed: {done.stderr.strip().splitlines()[-1:]}")
            return
        data = json.loads(Path(out.name).read_text(encoding="utf-8"))
    print(
        f"autotune plan SCRIPT: {data['model']['parameters'] / 1e9:.1f}B parameters, "
        f"{len(data['configs'])} configurations in {took:.1f} s ({data['trace_s']:.1f} s tracing)"
    )
    print(f"  suggestion: {data['suggestion']['text'] if data.get('suggestion') else None}")


if __name__ == "__main__":
    main()
