"""The plan's GPU figures against real steps on the GPU at hand: memory and step time.

    python benchmarks/plan_gpu_check.py [--device cuda] [--gpu H200] [--out FILE]

For the demo GPT and CNN and the three models the planner was not written around
(tests/autotune/plan/workloads.py), in fp32 and bf16, at micro-batches 4 and 16: ``autotune plan``'s
row for ``--gpu`` (one GPU, no accumulation) against a real step run on ``--device``:

- memory: the plan's live tensors (its peak less the allocator rounding and the framework reserve it
  adds) against ``torch.cuda.max_memory_allocated`` over a second step, and the plan's whole peak
  against ``max_memory_reserved`` plus what the CUDA context and libraries hold outside the caching
  allocator (the process's GPU memory from NVML less reserved, when NVML is there);
- time: the plan's expected step time and interval against the median of 10 real steps.

Run by ``scripts/gpu_check.sh`` on a lent GPU; ``--device cpu`` runs the same code here (no CUDA
figures: time only), so the script is known to work before a GPU is spent on it. Prints a table
and writes every row as JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from autotune.demo.plan import demo_workload  # noqa: E402
from autotune.plan.plan import plan  # noqa: E402
from autotune.plan.step import prepare_step  # noqa: E402
from tests.autotune.plan.workloads import WORKLOADS, adamw  # noqa: E402


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def measured(workload: tuple[Any, ...], micro_batch: int, precision: str, device: str) -> dict[str, Any]:
    """A real step's memory (CUDA) and median time on ``device``."""
    factory, batch_fn, loss_fn, optimizer_fn = workload
    torch.manual_seed(0)
    step = prepare_step(factory(), batch_fn, loss_fn, optimizer_fn, micro_batch, precision, False, device)
    step.run()  # the optimizer's state
    out: dict[str, Any] = {}
    if device == "cuda":
        _sync(device)
        torch.cuda.reset_peak_memory_stats()
        step.run()
        _sync(device)
        out["allocated_bytes"] = torch.cuda.max_memory_allocated()
        out["reserved_bytes"] = torch.cuda.max_memory_reserved()
        out["outside_allocator_bytes"] = _outside_allocator(out["reserved_bytes"])
    times = []
    for i in range(13):
        _sync(device)
        start = time.perf_counter()
        step.run()
        _sync(device)
        if i >= 3:
            times.append(time.perf_counter() - start)
    out["step_s"] = statistics.median(times)
    return out


def _outside_allocator(reserved: int) -> int | None:
    """This process's GPU memory (NVML) beyond the caching allocator's: context, cuBLAS, cuDNN."""
    try:
        import os

        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        mine = [p for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle) if p.pid == os.getpid()]
        return int(mine[0].usedGpuMemory) - reserved if mine and mine[0].usedGpuMemory else None
    except Exception:  # NVML missing or not allowed: the figure is left out
        return None


def main() -> int:
    """Plan each case for ``--gpu``, run it on ``--device``, print and save the comparison."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = "cuda" if torch.cuda.is_available() else "cpu"
    p.add_argument("--device", choices=("cuda", "cpu"), default=here)
    p.add_argument("--gpu", default="H200", help="the plan's GPU key (the one at hand)")
    p.add_argument("--out", type=Path, help="write every row as JSON here")
    p.add_argument("--quick", action="store_true", help="the demo GPT in fp32 only (a check of the script)")
    args = p.parse_args()
    cases = {f"demo_{n}": demo_workload(n)[:4] for n in ("gpt", "cnn")}
    cases.update({name: (*w[:3], adamw) for name, w in WORKLOADS.items()})
    if args.quick:
        cases = {"demo_gpt": cases["demo_gpt"]}
    rows = []
    print(f"{'model':15s} {'prec':5s} {'mb':>3s} {'live pred':>10s} {'allocated':>10s} {'err':>7s} "
          f"{'step pred':>10s} {'measured':>10s} {'err':>7s}")  # fmt: skip
    for name, workload in cases.items():
        for precision in ("fp32",) if args.quick else ("fp32", "bf16"):
            for micro_batch in (4, 16):
                result = plan(*workload, global_batch=micro_batch, gpus=(args.gpu,), precisions=(precision,))
                row = next(
                    c for c in result.configs
                    if c.params.micro_batch == micro_batch and c.params.layout == "single"
                )  # the step as it runs (not the optimizer offloaded to the host)
                by = row.memory_by_category
                live = row.peak_memory_bytes - by.get("allocator_rounding", 0)
                live -= by.get("framework_reserve", 0)
                real = measured(workload, micro_batch, precision, args.device)
                entry = {"model": name, "precision": precision, "micro_batch": micro_batch, "gpu": args.gpu,
                         "device": args.device, "planned_live_bytes": live,
                         "planned_peak_bytes": row.peak_memory_bytes, "planned_step_s": row.step_time_s,
                         "planned_step_s_interval": row.step_time_s_interval, **real}  # fmt: skip
                rows.append(entry)
                alloc = real.get("allocated_bytes")
                mem_err = f"{100 * (live / alloc - 1):+6.1f}%" if alloc else "    n/a"
                planned_s = row.step_time_s
                time_err = f"{100 * (planned_s / real['step_s'] - 1):+6.0f}%" if planned_s else "  n/a"
                allocated = f"{alloc / 2**20:7.1f}MiB" if alloc else "       n/a"
                print(f"{name:15s} {precision:5s} {micro_batch:3d} {live / 2**20:7.1f}MiB "
                      f"{allocated} {mem_err} {1e3 * (row.step_time_s or 0):8.2f}ms "
                      f"{1e3 * real['step_s']:8.2f}ms {time_err}", flush=True)  # fmt: skip
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
