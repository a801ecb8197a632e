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
from typing import Any

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
    splits_and_checkpointing({k: cases[k][:4] for k in ("demo_gpt", "transformer_lm")})


def splits_and_checkpointing(workloads: dict[str, tuple[Any, Any, Any, Any]]) -> None:
    """Accumulated splits, the sizes between two traces, selective checkpointing, FSDP's policy."""
    import dataclasses
    import json
    import socket
    import subprocess

    from autotune.plan.layouts import Layout
    from autotune.plan.measure import batch_bytes, measured_step_peak_bytes, predicted_step_peak_bytes
    from autotune.plan.model import StepModel
    from autotune.plan.step import POLICY_PARAM_DTYPE, fsdp_units, trace_step

    def new_bytes(step: StepModel, batch_fn: Any, m: int, a: int) -> float:
        by = step.memory_by_category(m, gpu=False, accumulation=a)
        existing = by["parameters"] + by["optimizer_state"] + batch_bytes(batch_fn, m)
        return step.memory_bytes(m, gpu=False, accumulation=a) - existing

    def pct(predicted: float, measured: float) -> str:
        return f"{100 * (predicted / measured - 1):+.2f}%"

    print("a global batch of 8 split into accumulated micro-batches, planned from traces at 1 and 8, "
          "against the allocator (in brackets: without the gradients held between them):")  # fmt: skip
    for name, w in workloads.items():
        for precision in ("fp32", "bf16"):
            step = StepModel.fit(*(trace_step(*w, m, precision, False) for m in (1, 8)))
            cells = []
            for m, a in ((1, 8), (2, 4), (4, 2), (8, 1)):
                measured = measured_step_peak_bytes(*w, m, precision, False, a)
                held, alone = new_bytes(step, w[1], m, a), new_bytes(step, w[1], m, 1)
                cells.append(f"{m}x{a} {pct(held, measured)} ({pct(alone, measured)})")
            print(f"  {name:16s} {precision}: " + ", ".join(cells))
    gpt = workloads["demo_gpt"]
    a, b = (trace_step(*gpt, m, "fp32", False) for m in (1, 16))
    measured = measured_step_peak_bytes(*gpt, 2, "fp32", False)
    matched = new_bytes(StepModel.fit(a, b), gpt[1], 2, 1)
    unmatched = StepModel.fit(dataclasses.replace(a, marks=None), dataclasses.replace(b, marks=None))
    alone = new_bytes(unmatched, gpt[1], 2, 1)
    print(f"between two traces (demo GPT fp32, micro-batch 2 from 1 and 16): every op's line "
          f"{pct(matched, measured)}, each phase's two peaks alone {pct(alone, measured)}")  # fmt: skip
    print("selective checkpointing at micro-batch 16, against the allocator (activations kept, of none's: "
          "selective, full):")  # fmt: skip
    for name, w in workloads.items():
        for precision in ("fp32", "bf16"):
            traced = {mode: trace_step(*w, 16, precision, mode != "none", selective=mode == "selective")
                      for mode in ("none", "full", "selective")}  # fmt: skip
            predicted = predicted_step_peak_bytes(traced["selective"], batch_bytes(w[1], 16))
            measured = measured_step_peak_bytes(*w, 16, precision, True, selective=True)
            none = traced["none"].memory_by_category["activations"]
            kept = {k: f.memory_by_category["activations"] / none for k, f in traced.items()}
            print(f"  {name:16s} {precision}: {pct(predicted, measured)}  "
                  f"({kept['selective']:.0%}, {kept['full']:.0%})")  # fmt: skip
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    script = ROOT / "tests" / "scripts" / "fsdp_mixed_step.py"
    out = subprocess.run([sys.executable, str(script), "16", str(port)], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)  # fmt: skip
    if out.returncode != 0:
        print(f"FSDP's policy: the real step failed: {out.stderr.strip().splitlines()[-1:]}")
        return
    measured = json.loads(out.stdout.strip().splitlines()[-1])["measured_step_peak_bytes"]
    units = fsdp_units(gpt[0])
    errors = {}
    for policy in ("autocast", POLICY_PARAM_DTYPE):
        step = StepModel.fit(*(trace_step(*gpt, m, "bf16", False, policy=policy) for m in (1, 32)))
        step = step.fsdp_mixed() if policy == POLICY_PARAM_DTYPE else step
        peak, by = Layout("fsdp", 1, units).memory(step, 16, 1)
        keys = ("parameters", "optimizer_state", "framework_reserve", "allocator_rounding")
        errors[policy] = pct(peak - sum(by[k] for k in keys) - batch_bytes(gpt[1], 16), measured)
    print(f"a real FSDP2 step under MixedPrecisionPolicy(bf16, fp32), demo GPT, micro-batch 16, against "
          f"the plan's FSDP row: {errors[POLICY_PARAM_DTYPE]} (autocast: {errors['autocast']})")  # fmt: skip


if __name__ == "__main__":
    main()
