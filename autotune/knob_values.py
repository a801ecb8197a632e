"""The built-in knobs a trial's parameters hold, read once into a typed record.

Apart from :mod:`autotune.knobs` (which reads a running trial's parameters and records what the
script used, through the profiler's session) so that the tuner's command line, which only reads
parameters it stores, starts without the profiler's runtime. Its fields are the names of
:data:`autotune.knobs.KNOBS`, with their types (a test holds the two together).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from profilers.contract.lenient import read_fields


@dataclass(frozen=True, slots=True)
class KnobValues:
    """The built-in knobs a set of parameters holds, typed; None where it sets none (or not its type).

    The parameters of a trial, or what a script read (``params_used``), are a JSON object of knob
    and user-parameter names; this reads the built-in knobs out of one once, so the tuner and the
    presets read ``knobs.micro_batch`` instead of testing a dict's values each time.

    >>> k = KnobValues.of({"micro_batch": 8, "precision": "bf16", "tensor_parallel": "2", "lr": 0.1})
    >>> k.micro_batch, k.precision, k.tensor_parallel
    (8, 'bf16', None)
    """

    precision: str | None = None
    layout: str | None = None
    world_size: int | None = None
    activation_checkpointing: bool | None = None
    compile: bool | None = None
    reshard_after_forward: bool | None = None
    global_batch: int | None = None
    micro_batch: int | None = None
    grad_accum: int | None = None
    tensor_parallel: int | None = None
    pipeline_parallel: int | None = None
    cpu_offload: bool | None = None

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> KnobValues:
        """The built-in knobs in ``params`` (other names are the user's own and are left out)."""
        return cls(**read_fields(cls, params))
