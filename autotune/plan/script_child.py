"""Run an unmodified training script with fake tensors and trace one of its optimizer steps.

``python -m autotune.plan.script_child --out F.json [--precision P] [--checkpointing] -- SCRIPT ARGS``
is what ``autotune plan SCRIPT ARGS`` runs, once per precision × checkpointing, in a child process
of its own. The script runs from its start inside ``FakeTensorMode``: every tensor it makes (the
model's parameters, the optimizer's state, its batches) has a shape, a dtype and a device but no
memory, so a model of any size runs here in seconds. Real tensors it reads (a memory-mapped dataset)
are turned fake where they meet the model.

The script's own optimizer marks the steps (torch's global optimizer-step hooks). The first step
creates the optimizer's state; the second is traced op by op by
:class:`~autotune.plan.trace.StepTracer`, from the end of the first ``optimizer.step()`` to the end
of the second: data, forward, loss, backward (as many micro-batches as the script accumulates),
gradient clipping, the optimizer. Then the script is stopped. The step's model is the first module
called at the top level for training (gradients on, training mode), as ``autotune profile`` finds
it; its input gives the micro-batch (the batch dimension; dimension 1 when the model holds a
time-major recurrent or attention layer) and, for token ids, the tokens per sample. A script with
no optimizer updates by hand: each backward is a step, provided an op between one backward and the
next writes to a parameter; one that steps no optimizer and updates nothing is no training script
to plan (:class:`NoOptimizerStep`, one line, ``autotune plan`` exits 2).

A fake tensor has no value. Small tensors (indexes, counters, random offsets into a dataset) are
also computed for real beside their fake twins, so the values a loop reads from them are the real
ones; ``loss.item()`` and other reads of a value computed from the model get a stand-in
(:class:`ScalarStandIn`): 1 for numbers, and for a truth value whatever keeps a training loop going
(``isnan``/``isinf`` checks read false, ``isfinite`` true, others true). ``--precision bf16``/``fp16``
runs the step model's forward under autocast, or with ``--policy param_dtype`` as FSDP's
``MixedPrecisionPolicy(param_dtype=...)`` does (the weights themselves in it); ``--checkpointing``
wraps its repeated blocks for activation checkpointing as ``autotune.prepare`` does: the script is
not changed.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import runpy
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils.data import _utils
from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter

from autotune.plan.blocks import BlockWatch
from autotune.plan.fsdp_units import units_of
from autotune.plan.gpu_kernels import AsOnAGpu
from autotune.plan.script import EXITED, NO_STEP
from autotune.plan.stand_in import ScalarStandIn
from autotune.plan.step import POLICY_PARAM_DTYPE, figures_of, lowered, refuse_policy
from autotune.plan.trace import StepTracer, state_tensors
from autotune.plan.untrusted import untrusted_notes
from autotune.prepared import _blocks, _checkpoint_blocks
from profilers.runtime.hooks import input_tensor

_AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}
#: Optimizer steps before the traced one (the first creates the optimizer's state).
WARM_STEPS = 1


class NoOptimizerStep(BaseException):
    """The script trains nothing the plan can trace: no optimizer step, and no update by hand.

    A BaseException, as :class:`PlanDone`: raised from a backward hook, the script's own ``except
    Exception`` does not swallow it.
    """


def _no_optimizer_step(state: _Trace, tracer: StepTracer | None) -> None:
    """Raise :class:`NoOptimizerStep` when the script never stepped an optimizer nor updated by hand.

    A script without an optimizer counts each backward as a step (it may update by hand); it is
    one only when an op after the backward wrote to a parameter (``p -= lr * p.grad``).
    """
    if state.optimizers_made and state.optimizer is None:
        raise NoOptimizerStep("it builds an optimizer but never calls its step()")
    if state.optimizers_made:
        return
    if state.model is None or state.steps == 0:
        raise NoOptimizerStep("it makes no optimizer and runs no backward of a model")
    if tracer is None or not tracer.wrote_any(_own_params(state)):
        raise NoOptimizerStep(
            "it makes no optimizer and does not update its parameters between one loss.backward() and "
            "the next"
        )


class PlanDone(BaseException):
    """Raised from the optimizer's step hook once the traced step ended: it stops the script.

    A BaseException, so the script's own ``except Exception`` does not swallow it.
    """


@dataclasses.dataclass
class _Trace:
    """What the hooks learn while the script runs."""

    precision: str
    checkpointing: bool
    selective: bool = False  # checkpointing per op (torchtitan's op mode), not whole blocks
    #: "autocast", or step.POLICY_PARAM_DTYPE: a low precision as FSDP's mixed-precision policy
    #: applies it (the model's weights and floating inputs in it, no autocast)
    policy: str = "autocast"
    model: nn.Module | None = None
    optimizer: torch.optim.Optimizer | None = None
    steps: int = 0
    depth: int = 0
    tracer: StepTracer | None = None
    micro_batch: int | None = None
    tokens_per_sample: int | None = None
    batch_dim: int = 0
    forwards: int = 0  # of the step model, during the traced step
    later_from: int | None = None  # the memory mark where the traced step's second micro-batch began
    autocast: Any = None
    result: dict[str, Any] | None = None
    measure: bool = False  # real tensors: the allocator's own peak of the step instead of a trace
    profiler: Any = None
    start_bytes: int = 0  # live tensor bytes the traced step starts with
    after_backward: int | None = None  # ops recorded when the last backward ended
    optimizers_made: int = 0  # torch.optim optimizers the script built (none: it updates by hand)
    optimizer_note: str | None = None  # how the optimizer was run for the plan, when not as written
    blocks: BlockWatch | None = None  # the step model's repeated blocks, watched
    gpu_ops: AsOnAGpu | None = None  # ops traced as a GPU runs them


def trace_script(
    script: str,
    argv: list[str],
    precision: str,
    checkpointing: bool,
    measure: bool = False,
    fake: bool = True,
    module: bool = False,
    selective: bool = False,
    policy: str = "autocast",
) -> dict[str, Any]:
    """Run ``script`` with ``argv`` under fake tensors and return its traced step (see the module's doc).

    With ``measure``, the script runs with real tensors and the step is measured instead: the peak
    of the CPU allocator's own running total over the step, above its start (torch.profiler's
    ``profile_memory``), to check a plan against. With ``fake=False`` the tracer follows a real step.
    With ``module``, ``script`` is a module name run as ``python -m`` would. ``policy``
    :data:`POLICY_PARAM_DTYPE` runs a low ``precision`` as FSDP's ``MixedPrecisionPolicy(param_dtype)``
    does (the model's floating weights and its positional floating inputs in it, no autocast).
    """
    state = _Trace(precision, checkpointing, selective=checkpointing and selective, measure=measure)
    state.policy = POLICY_PARAM_DTYPE if lowered(precision, policy) else "autocast"
    stand_in = ScalarStandIn()
    sys.argv = [script, *argv]
    sys.path.insert(0, os.getcwd() if module else str(Path(script).resolve().parent))
    try:
        with _patched(state), contextlib.ExitStack() as modes:
            if fake and not measure:  # fake tensors, and the stand-ins above them
                modes.enter_context(FakeTensorMode(allow_non_fake_inputs=True))
                modes.enter_context(stand_in)
                modes.enter_context(stand_in.numpy_arrays())
                state.gpu_ops = modes.enter_context(AsOnAGpu())
            if module:
                runpy.run_module(script, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(script, run_name="__main__")
    except PlanDone:
        pass
    finally:
        tracer_seen = state.tracer
        if state.tracer is not None:  # the script ended or failed inside the traced step
            state.tracer.__exit__(None, None, None)
        if state.profiler is not None and state.result is None:
            state.profiler.__exit__(None, None, None)
    if state.result is None:
        _no_optimizer_step(state, tracer_seen)
        raise RuntimeError(
            f"the script ended after {state.steps} optimizer step(s); the plan traces the step after "
            f"the first, so it needs {WARM_STEPS + 1} (give it enough steps or data)"
        )
    state.result["scalar_stand_ins"] = stand_in.stand_ins
    if "untrusted" in state.result:  # a trace (a measured run has no notes)
        state.result["untrusted"] = [*state.result["untrusted"], *stand_in.notes()]
    return state.result


@contextlib.contextmanager
def _patched(state: _Trace) -> Iterator[None]:
    """Torch's hooks and the few patches a fake run of a whole script needs, undone after it."""
    original_backward = torch.autograd.backward

    def backward(*args: Any, **kwargs: Any) -> Any:
        if state.tracer is not None:
            state.tracer.set_phase("backward")
        result = original_backward(*args, **kwargs)
        _after_backward(state)
        return result

    handles = [
        register_optimizer_step_pre_hook(lambda opt, a, k: _before_step(state, opt)),
        register_optimizer_step_post_hook(lambda opt, a, k: _after_step(state, opt)),
        # torch uses what a global pre-hook returns as the module's inputs (its stub says None)
        nn.modules.module.register_module_forward_pre_hook(
            lambda m, a: _forward_in(state, m, a)  # type: ignore[arg-type]
        ),
        # torch calls an always-call hook without the kwargs when the forward raised (a
        # checkpoint's recomputation stops that way): (module, args, output) then
        nn.modules.module.register_module_forward_hook(
            lambda m, a, *rest: _forward_out(state, m, a, rest[0] if len(rest) == 2 else {}),
            with_kwargs=True,
            always_call=True,
        ),
    ]
    original_swap = torch.utils.swap_tensors

    def swap_tensors(t1: torch.Tensor, t2: torch.Tensor) -> None:
        # Module.to() swaps every fake parameter for its converted copy, and the swap fails whenever
        # something holds a weak reference to the parameter (fake tensor mode's own memo does, and
        # two modules share a tied embedding): with nothing changed there is nothing to do; a new
        # dtype or device (model.to(torch.bfloat16), .half()) goes in place, as .data would
        try:
            original_swap(t1, t2)
        except Exception:
            if (t1.device, t1.dtype, t1.shape) == (t2.device, t2.dtype, t2.shape):
                return
            if not (isinstance(t1, FakeTensor) and isinstance(t2, FakeTensor)) or t1.shape != t2.shape:
                raise
            with torch.no_grad():
                t1.data = t2.data

    original_format = FakeTensor.__format__

    def format_scalar(tensor: torch.Tensor, spec: str) -> str:
        # f"{loss:.4f}": a real 0-d tensor formats its value; a fake one, its stand-in
        return format(tensor.item(), spec) if tensor.dim() == 0 else original_format(tensor, spec)

    original_init = torch.optim.Optimizer.__init__

    def optimizer_init(self: Any, *args: Any, **kwargs: Any) -> None:
        state.optimizers_made += 1
        original_init(self, *args, **kwargs)

    original_deepcopy = FakeTensor.__deepcopy__

    def deepcopy_fake(tensor: torch.Tensor, memo: dict[int, Any]) -> torch.Tensor:
        # torch's deepcopy of a tensor rebuilds it on a copy of its storage, which a fake tensor
        # cannot take (a metric's default value, an EMA's buffers): a detached clone is the same
        copied = tensor.detach().clone().requires_grad_(tensor.requires_grad)
        memo[id(tensor)] = copied
        return copied

    restore_loader = _real_data_loader_workers()
    torch.autograd.backward = backward
    torch.optim.Optimizer.__init__ = optimizer_init  # type: ignore[method-assign]
    FakeTensor.__deepcopy__ = deepcopy_fake  # type: ignore[method-assign]
    torch.utils.swap_tensors = swap_tensors
    FakeTensor.__format__ = format_scalar  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.autograd.backward = original_backward
        torch.optim.Optimizer.__init__ = original_init  # type: ignore[method-assign]
        FakeTensor.__deepcopy__ = original_deepcopy  # type: ignore[method-assign]
        torch.utils.swap_tensors = original_swap
        FakeTensor.__format__ = original_format  # type: ignore[method-assign]
        restore_loader()
        for handle in handles:
            handle.remove()


def _after_backward(state: _Trace) -> None:
    """Gradients are gradients; what follows is per step, unless another micro-batch does."""
    params = _params(state.optimizer) if state.optimizer is not None else _own_params(state)
    if state.tracer is not None:
        state.tracer.recategorize([p.grad for p in params if p.grad is not None], "gradients")
        state.tracer.set_phase("optimizer")  # clipping, unscaling
        if state.optimizers_made:
            state.after_backward = len(state.tracer.ops)
    if not state.optimizers_made and state.model is not None:  # updated by hand: a backward is a step
        _step_boundary(state, params, None)


def _real_data_loader_workers() -> Any:
    """DataLoader worker processes load real batches, and their batches arrive real.

    A forked worker inherits the fake mode; its tensors could not be shared. The worker loop and
    the main process's reading of its queue run with no mode; the batch meets the fake model later.
    Returns the function that puts things back.
    """
    original_loop = _utils.worker._worker_loop
    original_get = _MultiProcessingDataLoaderIter._try_get_data

    def worker_loop(*args: Any, **kwargs: Any) -> Any:
        with _disable_current_modes():
            return original_loop(*args, **kwargs)

    def try_get_data(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _disable_current_modes():
            return original_get(self, *args, **kwargs)

    _utils.worker._worker_loop = worker_loop
    _MultiProcessingDataLoaderIter._try_get_data = try_get_data  # type: ignore[method-assign]

    def restore() -> None:
        _utils.worker._worker_loop = original_loop
        _MultiProcessingDataLoaderIter._try_get_data = original_get  # type: ignore[method-assign]

    return restore


def _own_params(state: _Trace) -> list[torch.Tensor]:
    """The step model's trainable parameters (a script that updates them by hand has no optimizer)."""
    return [p for p in state.model.parameters() if p.requires_grad] if state.model is not None else []


def _params(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [p for group in optimizer.param_groups for p in group["params"]]


def _forward_in(state: _Trace, module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """A forward starts: the step's model found (its first training forward), its precision entered.

    Under FSDP's policy the model's positional floating inputs are cast (what a forward pre-hook
    returns replaces them; torch's global hooks are called as the module's own).
    """
    state.depth += 1
    if state.depth != 1 or not (torch.is_grad_enabled() and module.training):
        return None
    if state.model is None:
        if not any(p.requires_grad for p in module.parameters()):
            return None  # a transform the DataLoader calls in this process, a loss module: not the model
        state.model = module
        if state.policy == POLICY_PARAM_DTYPE:  # the weights themselves, as FSDP gathers them
            refuse_policy(module)
            for p in module.parameters():
                if p.is_floating_point():
                    p.data = p.data.to(_AUTOCAST[state.precision])
        state.blocks = BlockWatch(module)
        if state.checkpointing:
            _checkpoint_blocks(module, selective=state.selective)
        time_major = any(
            isinstance(m, nn.RNNBase | nn.MultiheadAttention) and not m.batch_first for m in module.modules()
        )
        state.batch_dim = 1 if time_major else 0
    if module is not state.model:
        return None
    if state.tracer is not None:
        state.tracer.set_phase("forward")
        state.forwards += 1
        if state.forwards == 2:
            state.later_from = len(state.tracer.memory.phases)
        if state.after_backward is not None:  # the ops since the backward got the next micro-batch
            ops, since = state.tracer.ops, state.after_backward
            ops[since:] = [dataclasses.replace(op, phase="forward") for op in ops[since:]]
            state.after_backward = None
    if state.policy == POLICY_PARAM_DTYPE:
        low = _AUTOCAST[state.precision]
        return tuple(a.to(low) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)
    if state.precision in _AUTOCAST:
        device = next((p.device.type for p in module.parameters()), "cpu")
        state.autocast = torch.autocast(device, dtype=_AUTOCAST[state.precision])
        state.autocast.__enter__()
    return None


def _forward_out(state: _Trace, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    state.depth = max(0, state.depth - 1)
    if state.depth != 0 or module is not state.model:
        return
    if state.autocast is not None:
        autocast, state.autocast = state.autocast, None
        autocast.__exit__(None, None, None)
    if state.tracer is not None and state.micro_batch is None:
        tensor, _ = input_tensor(args, kwargs)
        if tensor is not None and tensor.dim() > state.batch_dim:
            state.micro_batch = int(tensor.shape[state.batch_dim])
            if not tensor.is_floating_point() and tensor.dim() >= 2 and state.micro_batch:
                state.tokens_per_sample = tensor.numel() // state.micro_batch


def _before_step(state: _Trace, optimizer: torch.optim.Optimizer) -> None:
    if state.optimizer is None:
        state.optimizer = optimizer
        state.optimizer_note = _as_on_a_gpu(optimizer)
    if optimizer is state.optimizer and state.tracer is not None:
        state.tracer.set_phase("optimizer")
        state.after_backward = None


def _as_on_a_gpu(optimizer: torch.optim.Optimizer) -> str | None:
    """Run ``optimizer`` the way torch runs it on a GPU, and say so; None when it already does.

    An optimizer left to choose (``foreach=None``, not fused, not differentiable) runs a loop over
    the parameters on a CPU and the foreach implementation on CUDA, which holds a whole group's
    intermediate per state tensor at once (an AdamW step of an 8.4M-parameter MLP: 42.0 MB in the
    loop, 67.2 MB foreach, 33.6 MB fused, measured on this CPU). The plan is for GPUs, so the
    trace (and the measurement it is checked against) runs foreach.
    """
    groups = optimizer.param_groups
    if not groups or any(
        "foreach" not in g or g["foreach"] is not None or g.get("fused") or g.get("differentiable")
        for g in groups
    ):
        return None
    for group in groups:
        group["foreach"] = True
    return (
        f"{type(optimizer).__name__} traced as it runs on a GPU: foreach (torch's CUDA default; a loop "
        "on the CPU), which holds one intermediate per state tensor of a whole group during the step"
    )


def _after_step(state: _Trace, optimizer: torch.optim.Optimizer) -> None:
    if optimizer is state.optimizer:
        _step_boundary(state, _params(optimizer), optimizer)


def _step_boundary(
    state: _Trace, params: list[torch.Tensor], optimizer: torch.optim.Optimizer | None
) -> None:
    """The end of an optimizer step (or, in a script that updates by hand, of a backward)."""
    state.steps += 1
    if state.measure:
        _measure(state)
        return
    if state.steps == WARM_STEPS:
        tracer = StepTracer()
        tracer.track(params, "parameters")
        if state.model is not None:
            tracer.track(list(state.model.buffers()), "parameters")
        if optimizer is not None:
            tracer.track(state_tensors(optimizer), "optimizer_state")
        tracer.track([p.grad for p in params if p.grad is not None], "gradients")
        state.start_bytes = sum(tracer.memory.by_category.values())
        tracer.start_step()
        tracer.set_phase("optimizer" if optimizer is None else "forward")  # a hand-made update comes next
        state.tracer = tracer
        if state.blocks is not None:
            state.blocks.watch(tracer.ops)
        tracer.__enter__()
    elif state.steps == WARM_STEPS + 1 and state.tracer is not None:
        tracer, state.tracer = state.tracer, None
        tracer.__exit__(None, None, None)
        if optimizer is None:  # a backward without an update between it and the last is no step
            _no_optimizer_step(state, tracer)
        if optimizer is not None:
            tracer.recategorize(state_tensors(optimizer), "optimizer_state")
        state.result = _result(state, tracer, params)
        raise PlanDone


def _result(state: _Trace, tracer: StepTracer, params: list[torch.Tensor]) -> dict[str, Any]:
    if state.micro_batch is None or state.model is None:
        raise RuntimeError("no training forward of a model with a tensor input was seen in the traced step")
    figures = figures_of(
        tracer,
        state.micro_batch,
        state.precision,
        state.checkpointing,
        params,
        state.blocks,
        state.later_from,
        policy=state.policy,
        selective=state.selective,
    )
    blocks = _blocks(state.model)
    units = units_of(state.model)
    return {
        "figures": dataclasses.asdict(figures),
        "accumulation": max(1, state.forwards),
        "tokens_per_sample": state.tokens_per_sample,
        "batch_dim": state.batch_dim,
        "model_class": type(state.model).__name__,
        "units": dataclasses.asdict(units),
        "has_blocks": blocks is not None,
        "untrusted": untrusted_notes(state.model)
        + [note for note in (state.optimizer_note, state.gpu_ops and state.gpu_ops.note()) if note],
        "start_bytes": state.start_bytes,
        "step_new_peak_bytes": tracer.memory.peak_new_bytes,
    }


def _measure(state: _Trace) -> None:
    """Measure mode, at the end of an optimizer step: start the allocator's record, or read it."""
    if state.steps == WARM_STEPS:
        state.profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
        state.profiler.__enter__()
        return
    if state.steps != WARM_STEPS + 1 or state.profiler is None:
        return
    prof, state.profiler = state.profiler, None
    prof.__exit__(None, None, None)
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        events = json.loads(Path(path).read_text(encoding="utf-8"))["traceEvents"]
    finally:
        os.unlink(path)
    totals = [e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]"]
    state.result = {"measured_step_peak_bytes": max([0, *totals]), "micro_batch": state.micro_batch}
    raise PlanDone


def main(argv: list[str] | None = None) -> int:
    """The child's command line; writes the trace as JSON to ``--out``, or a one-line error to stderr."""
    parser = argparse.ArgumentParser(prog="python -m autotune.plan.script_child")
    parser.add_argument("--out", required=True)
    parser.add_argument("--precision", default="as-is")
    parser.add_argument("--checkpointing", action="store_true")
    parser.add_argument("--selective", action="store_true")  # with --checkpointing: per op
    parser.add_argument("--policy", default="autocast")  # or param_dtype: FSDP's mixed precision
    parser.add_argument("--measure", action="store_true")
    parser.add_argument("--module", action="store_true")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    args_of_script = args.args[1:] if args.args[:1] == ["--"] else args.args
    try:
        result = trace_script(
            args.script, args_of_script, args.precision, args.checkpointing, args.measure, module=args.module,
            selective=args.selective, policy=args.policy,
        )
    except SystemExit as exc:  # the script exited before its second step
        print(f"{EXITED} ({exc.code}) before its second optimizer step", file=sys.stderr)
        return 3
    except NoOptimizerStep as exc:
        print(f"{NO_STEP}: {exc}", file=sys.stderr)
        return 3
    except Exception as exc:
        line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"{type(exc).__name__}: {line}"[:500], file=sys.stderr)
        return 3
    Path(args.out).write_text(json.dumps(result), encoding="utf-8")
    sys.stdout.flush()
    os._exit(0)  # the script's own threads and atexit handlers are not the plan's


if __name__ == "__main__":
    sys.exit(main())
