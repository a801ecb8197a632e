"""``autotune plan SCRIPT ARGS``: an unmodified script's step, traced in a child process, then planned.

Each precision × checkpointing to plan is one run of :mod:`autotune.plan.script_child` (the script
under fake tensors up to its second optimizer step; a few seconds). Its trace holds one optimizer
step: ``accumulation`` micro-batches of the script's own size and one optimizer update. The plan
needs every figure as a function of the micro-batch: from the one traced size, activations, the
forward and backward's FLOPs and bytes grow in proportion to it, parameters, gradients, optimizer
state, the optimizer's work and the number of kernels do not (:func:`scaled`). That holds when
every activation has the batch as a dimension: a GPT script traced at micro-batch 4 and scaled to 16
is within 5% of its trace at 16 (tests/autotune/plan/test_script.py). Each phase's own peak is
scaled (the forward's and backward's temporaries with the batch, the optimizer's not), and the
step's peak at another micro-batch is the largest of them: a step traced with its peak in the
optimizer has it in the backward at a larger micro-batch.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.plan.blocks import ForwardSides
from autotune.plan.calibrate import CpuCalibration
from autotune.plan.envelope import MarkedStep, growing_categories, phase_of
from autotune.plan.fsdp_units import FsdpUnits
from autotune.plan.model import Affine, StepModel
from autotune.plan.plan import (
    NOTHING_FIT_WITHOUT_CHECKPOINTING,
    SELECTIVE,
    UNMIXED,
    Setting,
    fits_anywhere,
    plan_models,
    with_cpu,
)
from autotune.plan.probe import probe_costs
from autotune.plan.step import POLICY_PARAM_DTYPE, StepFigures, lowered
from autotune.plan.trace import ATTENTION, CATEGORIES, GEMM, OTHER
from autotune.plan.workspace import MemoryCalibration, config_label, fit_residuals
from profilers.contract.lenient import read_fields
from profilers.contract.plan_doc import PlanDocument, PlanModel

#: A script's trace in the child may take this long (its imports, its data, two steps).
CHILD_TIMEOUT_S = 600


#: How the child's one line begins when the script itself exited (sys.exit, argparse) too early.
EXITED = "the script exited"
#: How it begins when the script ran to its end without an optimizer step (nor an update by hand).
NO_STEP = "no optimizer step"


class ScriptError(Exception):
    """The script could not be traced; the message is one line for the user."""


class NoStepError(ScriptError):
    """The script never takes an optimizer step (nor updates by hand): not a training script to plan."""


@dataclass(frozen=True)
class ScriptTrace:
    """One optimizer step of a script, traced (what :mod:`autotune.plan.script_child` writes)."""

    figures: StepFigures
    accumulation: int  # micro-batches the script runs per optimizer step
    model_class: str
    units: FsdpUnits  # what FSDP gathers whole (the largest block, the root's own)
    has_blocks: bool
    start_bytes: int
    step_new_peak_bytes: int
    tokens_per_sample: int | None = None
    scalar_stand_ins: int = 0
    #: What the trace cannot see in this model (:mod:`autotune.plan.untrusted`).
    untrusted: tuple[str, ...] = ()

    @property
    def micro_batch(self) -> int:
        """The script's own micro-batch."""
        return self.figures.micro_batch


def run_child(
    script: str,
    args: list[str],
    precision: str = "as-is",
    checkpointing: bool | str = False,
    measure: bool = False,
    timeout_s: float = CHILD_TIMEOUT_S,
    env: dict[str, str] | None = None,
    module: bool = False,
    policy: str = "autocast",
    cwd: str | None = None,
) -> dict[str, Any]:
    """Run the script in a child (see the module's doc); its JSON, or ScriptError with its last line.

    ``env``: the child's environment (this process's by default); ``module``: ``script`` is a module;
    ``policy``: how a low precision is applied (autocast, or FSDP's ``param_dtype``); ``cwd``: where
    the child runs (this process's directory by default).
    """
    fd, out = tempfile.mkstemp(prefix="autotune-plan-", suffix=".json")
    os.close(fd)
    command = [sys.executable, "-m", "autotune.plan.script_child", "--out", out, "--precision", precision]
    command += ["--policy", policy]
    command += ["--checkpointing"] * bool(checkpointing) + ["--selective"] * (checkpointing == SELECTIVE)
    command += ["--measure"] * measure + ["--module"] * module
    command += ["--", script, *args]
    base = dict(os.environ if env is None else env)
    env = {**base, "PYTHONPATH": os.pathsep.join(filter(None, (_root(), base.get("PYTHONPATH"))))}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=cwd)
        text = Path(out).read_text(encoding="utf-8") if done.returncode == 0 else ""
    except subprocess.TimeoutExpired:
        raise ScriptError(f"{script}: not at its second optimizer step after {timeout_s:.0f} s") from None
    finally:
        os.unlink(out)
    if done.returncode != 0 or not text:
        # what Python prints at exit after the error (a __del__ that raised) is not the error
        stderr = done.stderr.split("\nException ignored in", 1)[0]
        lines = [line for line in stderr.strip().splitlines() if line.strip()]
        why = lines[-1] if lines else f"exit status {done.returncode}"
        if why.startswith(NO_STEP):
            raise NoStepError(
                f"{script}: {why}; the plan traces one training step, from an optimizer step to the next"
            )
        if why.startswith(EXITED) and len(lines) >= 2:  # the script's own last words come first
            why = f"{lines[-2].strip()} ({why})"
        raise ScriptError(f"cannot trace {script}: {why}")
    result: dict[str, Any] = json.loads(text)
    return result


def _root() -> str:
    """The directory holding the autotune package, so the child imports this very copy."""
    return str(Path(__file__).resolve().parents[2])


def trace_script(
    script: str,
    args: list[str],
    precision: str = "as-is",
    checkpointing: bool | str = False,
    env: dict[str, str] | None = None,
    module: bool = False,
    policy: str = "autocast",
    cwd: str | None = None,
) -> ScriptTrace:
    """The script's second optimizer step, traced under fake tensors in a child process.

    ``policy`` :data:`POLICY_PARAM_DTYPE`: a low precision as FSDP's mixed-precision policy runs it.
    """
    data = run_child(script, args, precision, checkpointing, env=env, module=module, policy=policy, cwd=cwd)
    figures = dict(data["figures"])
    marks = figures.get("marks")
    figures["marks"] = MarkedStep(**marks) if isinstance(marks, dict) else None
    figures["sides"] = ForwardSides(**figures.get("sides", {}))
    if figures["precision"] == "as-is":
        figures["precision"] = detected_precision(figures["dtype_flops"])
    return ScriptTrace(
        figures=StepFigures(**figures),
        accumulation=int(data["accumulation"]),
        model_class=str(data["model_class"]),
        units=FsdpUnits(**{k: int(v) for k, v in data["units"].items()}),
        has_blocks=bool(data["has_blocks"]),
        start_bytes=int(data["start_bytes"]),
        step_new_peak_bytes=int(data["step_new_peak_bytes"]),
        **read_fields(ScriptTrace, data, skip=_TRACED),
    )


#: The facts every traced script has (the child always writes them; the others may be missing).
_TRACED = ("figures", "accumulation", "model_class", "units", "has_blocks", "start_bytes",
           "step_new_peak_bytes")  # fmt: skip


def detected_precision(dtype_flops: dict[str, int]) -> str:
    """The precision most of a step's matrix FLOPs run in: ``bf16``, ``fp16``, else ``fp32``."""
    names = {"bfloat16": "bf16", "float16": "fp16"}
    if not dtype_flops:
        return "fp32"
    dtype = max(dtype_flops, key=lambda d: dtype_flops[d])
    return names.get(dtype, "fp32")


def per_micro_batch(trace: ScriptTrace) -> StepFigures:
    """The traced step as one micro-batch and one optimizer update (the script's accumulation undone)."""
    f, a = trace.figures, trace.accumulation
    if a == 1:
        return f

    def split(by_class: dict[str, int], optimizer_part: int) -> dict[str, int]:
        out = {k: v // a for k, v in by_class.items()}
        if OTHER in by_class:
            out[OTHER] = (by_class[OTHER] - optimizer_part) // a + optimizer_part
        return out

    flops = split(f.flops_by_class, f.optimizer_flops)
    return dataclasses.replace(
        f,
        flops_by_class=flops,
        bytes_by_class=split(f.bytes_by_class, f.optimizer_bytes),
        ops_by_class=split(f.ops_by_class, f.optimizer_ops),
        ops=(f.ops - f.optimizer_ops) // a + f.optimizer_ops,
        flops=sum(flops.values()),
        dtype_flops={k: v // a for k, v in f.dtype_flops.items()},
    )


def scaled(f: StepFigures, micro_batch: int) -> StepFigures:
    """``f`` (one micro-batch and the optimizer) at another micro-batch (see the module's doc)."""
    r = micro_batch / f.micro_batch

    def grow(by_class: dict[str, int], optimizer_part: int) -> dict[str, int]:
        out = {k: round(v * r) for k, v in by_class.items() if k in (GEMM, ATTENTION)}
        if OTHER in by_class:
            out[OTHER] = round((by_class[OTHER] - optimizer_part) * r) + optimizer_part
        return out

    phases = f.memory_phases()
    scaled_phases = {phase: _scaled_memory(by, phase, r) for phase, by in phases.items()}
    peak_phase = max(scaled_phases, key=lambda phase: sum(scaled_phases[phase].values()))
    memory = scaled_phases[peak_phase]
    peak = sum(memory.values())
    flops = grow(f.flops_by_class, f.optimizer_flops)
    return dataclasses.replace(
        f,
        micro_batch=micro_batch,
        peak_bytes=peak,
        memory_by_category=memory,
        peak_phase=phase_of(peak_phase),
        phase_memory=scaled_phases,
        held_phase_memory={phase: _scaled_memory(by, phase, r) for phase, by in f.held_phase_memory.items()},
        marks=None,  # the traced size's
        flops=sum(flops.values()),
        flops_by_class=flops,
        bytes_by_class=grow(f.bytes_by_class, f.optimizer_bytes),
        dtype_flops={k: round(v * r) for k, v in f.dtype_flops.items()},
        rounding_bytes=round(f.rounding_bytes * peak / f.peak_bytes) if f.peak_bytes else 0,
        block_io_elements=round(f.block_io_elements * r),
        scaled_from=f.scaled_from or f.micro_batch,
    )


def _scaled_memory(by_category: dict[str, int], phase: str, r: float) -> dict[str, int]:
    """A phase's peak (or an op of :mod:`autotune.plan.envelope`) at ``r`` times the micro-batch.

    The activations grow, and the forward's and backward's temporaries; the optimizer's do not.
    """
    out = dict.fromkeys(CATEGORIES, 0) | by_category
    for category in growing_categories(phase):
        out[category] = round(out[category] * r)
    return out


def step_model(trace: ScriptTrace) -> StepModel:
    """The step as a function of the micro-batch, from the one traced size."""
    one = per_micro_batch(trace)
    return StepModel.fit(one, scaled(one, 2 * one.micro_batch))


def calibrate_script(
    script: str, args: list[str], traces: dict[Setting, ScriptTrace]
) -> CpuCalibration:
    """The machine at hand for a script's plan: the probe's costs, and the workspace its real step takes.

    Each traced setting's step is run once more with real tensors (:func:`run_child` ``measure``):
    what the allocator's peak holds beyond the trace's figure, at the script's own micro-batch, is
    the workspace, taken in proportion to the micro-batch (one size measured: not checked on others).
    """
    cpu = probe_costs()
    residuals = []
    for (precision, ckpt), trace in traces.items():
        try:
            measured = run_child(script, args, precision, ckpt, measure=True)["measured_step_peak_bytes"]
        except ScriptError as exc:  # the trace ran; the real step did not (memory, a device)
            raise ScriptError(f"--calibrate: {str(exc).replace('cannot trace', 'cannot run')}") from None
        config = (trace.micro_batch, trace.figures.precision, ckpt)  # full and selective apart
        residuals.append((config, float(measured - trace.step_new_peak_bytes)))
    memory = MemoryCalibration(fit_residuals(residuals), tuple(config_label(c) for c, _ in residuals), ())
    return dataclasses.replace(cpu, memory=memory)


def plan_script(
    script: str,
    args: list[str],
    global_batch: int | None = None,
    precisions: tuple[str, ...] = ("as-is",),
    checkpointing: tuple[bool | str, ...] = (False,),
    calibrate: bool = False,
    **options: Any,
) -> PlanDocument:
    """Plan an unmodified training script (``options``: :func:`autotune.plan.plan.plan_models`'s).

    With ``calibrate`` the plan also holds this machine's CPU (``this-cpu``): step times at the
    probe's costs, memory with the workspace measured in a real step (:func:`calibrate_script`).
    """
    started = time.perf_counter()
    keys = [(p, c) for p in precisions for c in checkpointing]
    first = trace_script(script, args, *keys[0])
    gpus = int(options.get("gpus_per_node") or 1)
    if global_batch is None and (first.micro_batch * first.accumulation) % gpus:
        raise ValueError(
            f"the script's global batch of {first.micro_batch * first.accumulation} (micro-batch "
            f"{first.micro_batch} × {first.accumulation} accumulated) does not split over {gpus} GPUs: "
            f"give --global-batch, a multiple of {gpus}"
        )
    traces = {keys[0]: first} | {(p, c): trace_script(script, args, p, c) for p, c in keys[1:]}
    models: dict[Setting, StepModel] = {
        (t.figures.precision, c): step_model(t) for (_, c), t in traces.items()
    }
    options.setdefault("tokens_per_sample", first.tokens_per_sample)
    figures = _figures(script, first)
    batch = global_batch or first.micro_batch * first.accumulation
    notes = _notes(script, first)
    common = {"units": first.units, "extra_micro_batches": (first.micro_batch,), **options}
    # FSDP's rows (with more than one GPU): the low precisions as its mixed-precision policy runs them
    fsdp_models: dict[Setting, StepModel] = {}
    many = gpus * int(options.get("nodes") or 1) > 1
    unmixed = _trace_fsdp(script, args, traces, fsdp_models) if many else None
    if checkpointing == (False,) and first.has_blocks and not calibrate:
        result = plan_models(
            models, figures, batch, notes=tuple(_with_unmixed(notes, unmixed)), search_bigger=False,
            fsdp_models=fsdp_models, **common,
        )  # fmt: skip
        if fits_anywhere(result):
            return dataclasses.replace(result, trace_s=time.perf_counter() - started)
        for precision in precisions:  # nothing fits: plan activation checkpointing too
            trace = trace_script(script, args, precision, True)
            traces[(precision, True)] = trace
            models[(trace.figures.precision, True)] = step_model(trace)
        if many and unmixed is None:
            unmixed = _trace_fsdp(script, args, traces, fsdp_models)
        notes.append(NOTHING_FIT_WITHOUT_CHECKPOINTING)
    trace_s = time.perf_counter() - started
    cpu = calibrate_script(script, args, traces) if calibrate else None
    if cpu is not None:
        common["cpu_memory"] = cpu.memory
        common["cpu_times"] = {
            (t.figures.precision, c): _cpu_seconds(cpu, t) for (_, c), t in traces.items()
        }
    result = plan_models(
        models, figures, batch, notes=tuple(_with_unmixed(notes, unmixed)), fsdp_models=fsdp_models, **common
    )
    return dataclasses.replace(result, calibration=with_cpu(result.calibration, cpu), trace_s=trace_s)


def _with_unmixed(notes: list[str], unmixed: str | None) -> list[str]:
    """The plan's notes, with why FSDP's rows are autocast's when its policy could not be traced."""
    return notes if unmixed is None else [*notes, f"{UNMIXED} ({unmixed})"]


def _trace_fsdp(
    script: str, args: list[str], traces: dict[Setting, ScriptTrace], fsdp_models: dict[Setting, StepModel]
) -> str | None:
    """FSDP's rows of the low-precision settings traced so far, into ``fsdp_models``, or why not.

    Each is traced again as FSDP's mixed-precision policy runs it: the weights themselves in bf16,
    as ``autotune.prepare`` sets it up for ``layout="fsdp"``. When the script's step cannot run so,
    its rows stay autocast's and the reason is returned.
    """
    for (_, checkpointing), trace in traces.items():
        precision = trace.figures.precision
        if not lowered(precision, POLICY_PARAM_DTYPE) or (precision, checkpointing) in fsdp_models:
            continue
        try:
            mixed = trace_script(script, args, precision, checkpointing, policy=POLICY_PARAM_DTYPE)
        except ScriptError as exc:
            fsdp_models.clear()
            return str(exc)[:200]
        fsdp_models[(precision, checkpointing)] = step_model(mixed).fsdp_mixed()
    return None


def _figures(script: str, first: ScriptTrace) -> PlanModel:
    """The plan's ``model``: what the script's traced step is."""
    return PlanModel(
        script=script,
        model_class=first.model_class,
        parameters=first.figures.parameters,
        parameter_bytes=first.figures.parameter_bytes,
        flops_per_sample=per_micro_batch(first).flops / first.micro_batch,
        ops_per_step=first.figures.ops,
        micro_batch=first.micro_batch,
        accumulation=first.accumulation,
        tokens_per_sample=first.tokens_per_sample,
    )


def _notes(script: str, first: ScriptTrace) -> list[str]:
    """What the plan of a script rests on: its one traced size, stand-ins, what it cannot see."""
    notes = [
        f"traced {script} at its own micro-batch of {first.micro_batch} × {first.accumulation} "
        f"accumulated; other micro-batches are scaled from it (activations and compute in proportion)"
    ]
    if first.scalar_stand_ins:
        notes.append(
            f"{first.scalar_stand_ins} value(s) the script read from fake tensors "
            "(a loss's item(), a sampler's shuffled indexes) got a stand-in: branches on them may differ "
            "from a real run"
        )
    return notes + list(first.untrusted)


def _cpu_seconds(cpu: CpuCalibration, trace: ScriptTrace) -> Affine:
    """Seconds of one micro-batch's step here at the probe's costs, as a line in the micro-batch."""
    one = per_micro_batch(trace)
    two = scaled(one, 2 * one.micro_batch)
    return Affine.through(one.micro_batch, cpu.predict_s(one), two.micro_batch, cpu.predict_s(two))


__all__ = [
    "NoStepError",
    "ScriptError",
    "ScriptTrace",
    "calibrate_script",
    "plan_script",
    "step_model",
    "trace_script",
]
