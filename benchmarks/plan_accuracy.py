"""How close ``autotune plan``'s memory is to a real step's, and how long a plan takes.

    python benchmarks/plan_accuracy.py

For the demo GPT and CNN and three models the planner was not written around (a transformer LM, a
residual CNN, an LSTM LM: tests/autotune/plan/workloads.py), at micro-batches 4 and 16, in fp32 and
bf16 autocast, with and without activation checkpointing where the model has repeated blocks: the
step's peak predicted from a fake-tensor trace against the CPU allocator's own peak during the
real step (torch.profiler profile_memory), side by side; then the same with the kernel workspace
measured on this CPU (``autotune plan --calibrate``: a line per setting through the residuals of
real steps at other configurations). Then the step time on this CPU after
calibration (``autotune plan --calibrate``): costs fitted on timed configurations, checked on
others the fit did not see. Then the time of a whole plan of the demo GPT over every GPU of the
table × 28 configurations.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from autotune.demo.plan import demo_plan, demo_workload
    from autotune.plan.gpus import GPUS
    from autotune.plan.measure import batch_bytes, measured_step_peak_bytes, predicted_step_peak_bytes
    from autotune.plan.step import trace_step
    from tests.autotune.plan.workloads import WORKLOADS, adamw

    cases = {name: (*w[:3], adamw, w[3]) for name, w in WORKLOADS.items()}
    for name in ("gpt", "cnn"):
        factory, batch_fn, loss_fn, optimizer_fn, _ = demo_workload(name)
        cases[f"demo_{name}"] = (factory, batch_fn, loss_fn, optimizer_fn, name == "gpt")
    errors: dict[str, list[float]] = {}
    print(
        f"{'model':16s} {'precision':9s} {'ckpt':5s} {'mb':>3s} {'predicted':>12s} {'measured':>12s} "
        f"{'error':>8s}"
    )
    for name, (factory, batch_fn, loss_fn, optimizer_fn, blocks) in cases.items():
        for precision in ("fp32", "bf16"):
            for ckpt in (False, True) if blocks else (False,):
                for mb in (4, 16):
                    figures = trace_step(factory, batch_fn, loss_fn, optimizer_fn, mb, precision, ckpt)
                    predicted = predicted_step_peak_bytes(figures, batch_bytes(batch_fn, mb))
                    measured = measured_step_peak_bytes(
                        factory, batch_fn, loss_fn, optimizer_fn, mb, precision, ckpt
                    )
                    error = predicted / measured - 1
                    errors.setdefault(name, []).append(error)
                    print(f"{name:16s} {precision:9s} {ckpt!s:5s} {mb:3d} {predicted / 2**20:9.2f} MiB "
                          f"{measured / 2**20:9.2f} MiB {100 * error:+7.2f}%")  # fmt: skip
    print("median |error| per model: " + ", ".join(
        f"{name} {100 * statistics.median(abs(e) for e in errs):.2f}%"
        for name, errs in errors.items()))  # fmt: skip
    from autotune.demo.plan import CALIBRATE_ON, HELD_OUT, MEMORY_ALSO_ON
    from autotune.plan.workspace import calibrate_memory

    print("memory on this CPU with the workspace measured (a line per setting; held-out configurations):")
    for name, (factory, batch_fn, loss_fn, optimizer_fn, blocks) in cases.items():
        fit_on = [c for c in CALIBRATE_ON + MEMORY_ALSO_ON if blocks or not c[2]]
        held = [c for c in HELD_OUT if blocks or not c[2]]
        memory = calibrate_memory(factory, batch_fn, loss_fn, optimizer_fn, fit_on, held)
        errors = [p / m - 1 for _, p, m in memory.held_out]
        worst = max(errors, key=abs)
        print(f"  {name:16s} median |error| {100 * (memory.held_out_median_error or 0):5.2f}%  worst "
              f"{100 * worst:+6.2f}%  ({len(fit_on)} measured, {len(held)} held out)")  # fmt: skip
    from autotune.demo.plan import demo_calibration

    for name in ("gpt", "cnn"):
        cpu = demo_calibration(name)
        print(f"step time on this CPU, demo {name}: costs fitted on {len(cpu.fitted_on)} timed "
              f"configurations, checked on {len(cpu.held_out)} others")  # fmt: skip
        for label, predicted, measured in cpu.held_out:
            print(f"  {label:34s} predicted {predicted * 1e3:7.2f} ms  measured {measured * 1e3:7.2f} ms  "
                  f"{100 * (predicted / measured - 1):+6.1f}%")  # fmt: skip
        print(f"  median |error| {100 * (cpu.held_out_median_error or 0):.1f}%")
    started = time.perf_counter()
    result = demo_plan("gpt", global_batch=64, checkpointing=(False, True))
    took = time.perf_counter() - started
    print(f"plan of the demo GPT: {len(GPUS)} GPUs x {len(result.configs) // len(GPUS)} configurations "
          f"in {took:.1f} s (tracing {result.trace_s:.1f} s)")  # fmt: skip


if __name__ == "__main__":
    main()
