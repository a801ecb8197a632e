"""How many ranks hold one copy of the model: the tensor × pipeline degrees of a model-parallel job.

Under data parallelism every rank trains on samples of its own, so the job's throughput is the sum
of the ranks'. Under tensor parallelism the ranks of a group see the same samples, and under
pipeline parallelism every stage sees every sample of its replica: summing would count each sample
tensor × pipeline times. The degrees come from the knobs the script read (``tensor_parallel`` and
``pipeline_parallel`` through ``autotune.knob_value``), else from a tuning trial's parameters
(``AUTOTUNE_PARAM_TENSOR_PARALLEL``, ``AUTOTUNE_PARAM_PIPELINE_PARALLEL``, which a trial sets
whatever flags it also passes); without them a job counts as data-parallel.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

#: Prefix of the environment variables through which a trial passes its parameters.
PARAM_ENV_PREFIX = "AUTOTUNE_PARAM_"
#: The knobs whose product is the ranks that hold one replica of the model.
MODEL_PARALLEL_KNOBS = ("tensor_parallel", "pipeline_parallel")


def _degree(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def model_parallel_degrees(
    params_used: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> dict[str, int]:
    """``{"tensor_parallel": t, "pipeline_parallel": p}`` of the degrees known (a missing one is 1)."""
    environ = os.environ if environ is None else environ
    degrees: dict[str, int] = {}
    for name in MODEL_PARALLEL_KNOBS:
        value = _degree(params_used.get(name))
        raw = environ.get(PARAM_ENV_PREFIX + name.upper())
        if value is None and raw is not None:
            try:
                value = _degree(json.loads(raw))
            except json.JSONDecodeError:
                value = None
        degrees[name] = value or 1
    return degrees


def ranks_per_replica(params_used: Mapping[str, Any], world_size: int) -> int:
    """Ranks that hold one replica (tensor × pipeline degree), 1 when it does not divide the job."""
    degrees = model_parallel_degrees(params_used)
    per_replica = degrees["tensor_parallel"] * degrees["pipeline_parallel"]
    return per_replica if per_replica <= world_size and world_size % per_replica == 0 else 1
