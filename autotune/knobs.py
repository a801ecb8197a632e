"""The built-in tuning knobs: their table, the trial's parameters and the batch plan.

A trial passes each tuned parameter to user code in ``AUTOTUNE_PARAM_<NAME>`` (JSON); :func:`param`
reads it, and a value there wins over the default given in code, which is the user's own (the
baseline). :data:`KNOBS` names every built-in knob and its allowed values, so a search space can
be checked against it; :func:`batch_plan` splits a fixed global batch into
``micro_batch × grad_accum × world_size``. :mod:`autotune.prepared` applies the other knobs to a
model. This module never imports torch, so the tuner can read the table cheaply.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from profilers.contract.schema import Params
from profilers.runtime.active import active_session
from profilers.runtime.parallel_degrees import PARAM_ENV_PREFIX, ranks_per_replica

#: Every parameter this process has read through param(), knob_value() or batch_plan(), with the
#: value it got (the trial's, else the default), so a trial can report what the script really used.
_USED: Params = {}


def used_params() -> Params:
    """The parameters this process read, with the values it used (JSON values), in reading order."""
    return dict(_USED)


def _note(name: str, value: Any) -> Any:
    if value is not None and isinstance(value, str | int | float | bool) and _USED.get(name, _NONE) != value:
        _USED[name] = value
        session = active_session()
        if session is not None:  # the run records it as it happens: a killed run keeps it
            session.note_params_used(used_params())
    return value


_NONE = object()


@dataclass(frozen=True)
class Knob:
    """One built-in knob: its name, the Python type of its values and what is allowed."""

    name: str
    type: type
    default: Any
    choices: tuple[Any, ...] | None = None
    #: Smallest allowed value of an ``int`` knob.
    minimum: int | None = None
    help: str = ""

    def check(self, value: Any) -> Any:
        """Return ``value`` if this knob allows it, else raise ValueError saying what is allowed."""
        if self.type is bool:
            ok = isinstance(value, bool)
        elif self.type is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
            ok = ok and (self.minimum is None or value >= self.minimum)
        else:
            ok = isinstance(value, self.type)
        if ok and self.choices is not None:
            ok = value in self.choices
        if not ok:
            raise ValueError(f"knob {self.name!r} got {value!r}; allowed: {self.allowed()}")
        return value

    def allowed(self) -> str:
        """The allowed values in words, for messages."""
        if self.choices is not None:
            return ", ".join(json.dumps(c) for c in self.choices)
        if self.type is int:
            return f"an integer >= {self.minimum}"
        return self.type.__name__


_PRECISION_HELP = "fp32; tf32 matmuls (Ampere+ CUDA); bf16 autocast; fp16 autocast + GradScaler"
_CHECKPOINT_HELP = "recompute each block of the model's largest nn.ModuleList during backward"
_TP_HELP = "ranks that split each layer (the script's own tensor parallelism)"
_PP_HELP = "pipeline stages (the script's own pipeline parallelism)"

#: Every built-in knob by name, with its type, default and allowed values.
KNOBS: Mapping[str, Knob] = MappingProxyType(
    {
        k.name: k
        for k in (
            Knob("precision", str, "fp32", ("fp32", "tf32", "bf16", "fp16"), help=_PRECISION_HELP),
            Knob("layout", str, "single", ("single", "ddp", "fsdp"), help="one device; DDP; FSDP2"),
            Knob("world_size", int, 1, minimum=1, help="ranks of the job (torchrun --nproc-per-node)"),
            Knob("activation_checkpointing", bool, False, (False, True), help=_CHECKPOINT_HELP),
            Knob("compile", bool, False, (False, True), help="torch.compile the prepared model"),
            Knob("reshard_after_forward", bool, True, (False, True), help="fsdp: blocks free after forward"),
            Knob("global_batch", int, None, minimum=1, help="samples per optimizer step, all ranks"),
            Knob("micro_batch", int, None, minimum=1, help="samples per forward/backward on one rank"),
            Knob("grad_accum", int, 1, minimum=1, help="micro-batches per optimizer step"),
            Knob("tensor_parallel", int, 1, minimum=1, help=_TP_HELP),
            Knob("pipeline_parallel", int, 1, minimum=1, help=_PP_HELP),
            Knob("cpu_offload", bool, False, (False, True), help="optimizer state and shards on the host"),
        )
    }
)


def check_knob(name: str, value: Any) -> Any:
    """Return ``value`` if knob ``name`` allows it; ValueError for an unknown knob or a bad value."""
    if name not in KNOBS:
        raise ValueError(f"unknown knob {name!r}; built-in knobs: {', '.join(KNOBS)}")
    return KNOBS[name].check(value)


def param_env_var(name: str) -> str:
    """The environment variable that carries parameter ``name`` into a trial."""
    return PARAM_ENV_PREFIX + re.sub(r"[^A-Z0-9_]", "_", name.upper())


def param(name: str, default: Any = None) -> Any:
    """The value of tuned parameter ``name`` in this trial, else ``default``.

    Read from ``AUTOTUNE_PARAM_<NAME>`` (JSON: ``64``, ``true``, ``"bf16"``); outside a trial, or
    when the trial does not tune ``name``, ``default`` is returned. Bad JSON raises ValueError.

    >>> import os, autotune
    >>> autotune.param("batch_size", 32)  # outside a trial: the default
    32
    >>> os.environ["AUTOTUNE_PARAM_BATCH_SIZE"] = "128"  # what a trial of autotune tune sets
    >>> autotune.param("batch_size", 32)
    128
    >>> del os.environ["AUTOTUNE_PARAM_BATCH_SIZE"]
    """
    var = param_env_var(name)
    raw = os.environ.get(var)
    if raw is None:
        return _note(name, default)
    try:
        return _note(name, json.loads(raw))
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{var}={raw!r} is not valid JSON ({e.msg}); strings need quotes, e.g. {var}='\"bf16\"'"
        ) from None


def knob_value(name: str, default: Any = None) -> Any:
    """Built-in knob ``name``: the trial's value, else ``default``, else the table's; checked."""
    value = param(name, None)
    if value is None:
        value = KNOBS[name].default if default is None else default
    return value if value is None else _note(name, check_knob(name, value))


# ----------------------------------------------------------------------------------- batch plan


@dataclass(frozen=True)
class BatchPlan:
    """How one optimizer step's samples split: ``micro_batch × grad_accum × replicas == global_batch``.

    ``replicas`` is ``world_size`` over ``ranks_per_replica``, the tensor × pipeline degree of a
    model-parallel job (whose ranks of one replica train on the same samples); 1 without one.
    """

    micro_batch: int
    grad_accum: int
    world_size: int
    global_batch: int
    ranks_per_replica: int = 1

    @property
    def replicas(self) -> int:
        """Data-parallel replicas of the model: the ranks over the tensor × pipeline degree."""
        return self.world_size // self.ranks_per_replica

    @property
    def rank_batch(self) -> int:
        """Samples one rank processes per optimizer step (``micro_batch × grad_accum``)."""
        return self.micro_batch * self.grad_accum


def _runtime_world_size() -> int | None:
    """Ranks of the running job: an initialized process group, else torchrun's WORLD_SIZE."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return int(dist.get_world_size())
    env = os.environ.get("WORLD_SIZE")
    return int(env) if env else None


def resolve_world_size(explicit: int | None = None) -> int:
    """Ranks of the job: ``explicit``, else the running job's, else the tuned ``world_size``, else 1.

    ValueError when the trial's ``world_size`` differs from the ranks the job really runs.
    """
    if explicit is not None:
        return int(check_knob("world_size", explicit))
    runtime, tuned = _runtime_world_size(), param("world_size")
    if tuned is None:
        return runtime or 1
    check_knob("world_size", tuned)
    if runtime is not None and runtime != tuned:
        raise ValueError(
            f"{param_env_var('world_size')} says {tuned} ranks but this job runs {runtime}; "
            "launch it with torchrun --nproc-per-node matching the tuned world_size"
        )
    return int(tuned)


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def batch_plan(
    global_batch: int,
    micro_batch: int | None = None,
    grad_accum: int | None = None,
    world_size: int | None = None,
) -> BatchPlan:
    """Split ``global_batch`` into ``micro_batch × grad_accum × world_size``.

    Under tensor or pipeline parallelism (the ``tensor_parallel``/``pipeline_parallel`` knobs the
    script read, or a trial's) the batch splits over the data-parallel replicas instead: the ranks
    over the tensor × pipeline degree.

    Each value given here is the user's default; a trial's ``micro_batch``/``grad_accum`` (through
    :func:`param`) replace both of the user's, since the global batch is held fixed, and the
    missing one is derived (``grad_accum`` 1 when neither is set). ``world_size`` defaults to the
    running job's (process group, then torchrun's ``WORLD_SIZE``), else the tuned one, else 1. A
    trial may also move ``global_batch``. ValueError when the split is impossible.

    >>> import autotune
    >>> plan = autotune.batch_plan(64, micro_batch=8, world_size=2)  # outside a trial: as given
    >>> plan.micro_batch, plan.grad_accum, plan.world_size
    (8, 4, 2)
    """
    g = check_knob("global_batch", param("global_batch", global_batch))
    ranks = resolve_world_size(world_size)
    per_replica = ranks_per_replica(_USED, ranks)
    w = ranks // per_replica  # data-parallel replicas: each splits its share of the batch
    m_t, a_t = param("micro_batch"), param("grad_accum")
    source = "the trial" if (m_t, a_t) != (None, None) else "the defaults"
    m, a = (m_t, a_t) if source == "the trial" else (micro_batch, grad_accum)
    m = m if m is None else check_knob("micro_batch", m)
    a = a if a is None else check_knob("grad_accum", a)
    over = f"world_size {w}" if per_replica == 1 else f"{w} replicas ({ranks} ranks, {per_replica} a replica)"
    unit = "rank" if per_replica == 1 else "replica"
    if g % w:
        raise ValueError(f"global_batch {g} does not split evenly over {over}")
    per_rank = g // w
    if m is None:
        a = 1 if a is None else a
        if per_rank % a:
            raise ValueError(
                f"global_batch {g} over {over} is {per_rank} per {unit}, not a multiple of "
                f"grad_accum {a} (from {source}); grad_accum values that fit: {_divisors(per_rank)}"
            )
        m = per_rank // a
    elif a is None:
        if per_rank % m:
            raise ValueError(
                f"global_batch {g} over {over} is {per_rank} per {unit}, not a multiple of "
                f"micro_batch {m} (from {source}); micro_batch values that fit: {_divisors(per_rank)}"
            )
        a = per_rank // m
    elif m * a * w != g:
        raise ValueError(
            f"micro_batch {m} × grad_accum {a} × {over} = {m * a * w}, not global_batch {g} "
            f"(from {source}); give one of micro_batch and grad_accum and the other is derived"
        )
    for name, value in (("global_batch", g), ("micro_batch", m), ("grad_accum", a), ("world_size", ranks)):
        _note(name, value)
    return BatchPlan(
        micro_batch=m, grad_accum=a, world_size=ranks, global_batch=g, ranks_per_replica=per_replica
    )
