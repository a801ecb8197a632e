"""Skip a configuration the plan predicts will not fit the memory budget, before it runs.

With a memory budget, the first time a study proposes a combination of the other parameters
(precision, checkpointing...), the trial's own command, with its parameters, runs under fake
tensors (:mod:`autotune.plan.script_child`: the script up to its second optimizer step, seconds,
no memory used) and its step is fitted in the batch parameter (:func:`autotune.plan.script.step_model`).
The predicted peak is the step's live tensors at their peak, with the CUDA caching allocator's
512-byte rounding, plus what the baseline trial measured above its own trace (the measured peak is
the process's resident growth on the CPU, ~100 MiB of libraries and buffers above the tensors of
the demo GPT; on a GPU ``max_memory_allocated``, close to the trace): a configuration predicted over
the budget is skipped with that figure. Another batch size of the same combination is predicted
from the same trace.

Where no trace can be made (several ranks per trial, a framework preset, the script failed under
fake tensors), it says nothing and the study falls back to the finished trials
(:class:`autotune.tuner.memory_model.MemoryModel`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from autotune.knob_values import KnobValues
from autotune.search.space import Space, Value, batch_param
from autotune.tuner.memory_model import GIB
from autotune.tuner.trials import TrialSettings, trial_env, trial_world_size

#: Parameters that change the micro-batch, not what is traced: one trace serves them all.
SCALED = ("grad_accum",)


class Traced(NamedTuple):
    """A combination's step, fitted in the batch parameter, and what its trace ran."""

    model: Any  # autotune.plan.model.StepModel
    accumulation: int  # micro-batches per optimizer step in the traced run
    tokens_per_sample: int | None
    micro_batch: int  # of the traced run
    units: Any = None  # autotune.plan.fsdp_units.FsdpUnits: the blocks and root FSDP and stages split


@dataclass
class PlanTraces:
    """The trial command's step, traced under fake tensors once per combination of parameters.

    The combinations are of the parameters that change what runs (not the batch parameter, not
    :data:`SCALED`); with several ranks, the single-device step of the same combination
    (``layout`` set to ``single``): each rank runs it.
    """

    settings: TrialSettings
    space: Space
    traces: dict[tuple[tuple[str, str], ...], Traced | None] = field(default_factory=dict)
    #: Why traces could not be made, for the progress output.
    problems: list[str] = field(default_factory=list)

    def traced(self, params: Mapping[str, Value]) -> Traced | None:
        """The step of ``params``'s combination (traced at its first use), None when it cannot be."""
        batch = batch_param(self.space)
        if batch is None or batch not in params or self.settings.preset is not None:
            return None
        own = dict(params)
        if trial_world_size(self.settings, own) > 1 and KnobValues.of(own).layout in ("ddp", "fsdp"):
            own["layout"] = "single"
        if trial_world_size(self.settings, own) > 1:
            return None
        key = tuple(sorted((k, repr(v)) for k, v in own.items() if k != batch and k not in SCALED))
        if key not in self.traces:
            self.traces[key] = self._trace(own)
        return self.traces[key]

    def _trace(self, params: Mapping[str, Value]) -> Traced | None:
        from autotune.plan.script import ScriptError, step_model, trace_script  # torch: only when planning

        space = self.space if params else None  # none: the baseline, the script's own defaults
        args = [*self.settings.script_args, *(space.command_args(params) if space is not None else [])]
        try:
            trace = trace_script(
                self.settings.script, args, env=trial_env(self.settings, space, params),
                module=self.settings.module, cwd=self.settings.workdir,
            )  # fmt: skip
        except ScriptError as exc:
            self.problems.append(str(exc))
            return None
        return Traced(
            step_model(trace), trace.accumulation, trace.tokens_per_sample, trace.micro_batch, trace.units
        )

    def baseline(self) -> Traced | None:
        """The script with its own defaults (no parameter set), as the study's baseline ran it."""
        if self.settings.preset is not None or trial_world_size(self.settings, {}) > 1:
            return None
        key = (("", "the baseline"),)
        if key not in self.traces:
            self.traces[key] = self._trace({})
        return self.traces[key]


@dataclass
class PlanMemory:
    """Predicted peaks of a study's configurations, one fake-tensor trace per combination."""

    settings: TrialSettings
    space: Space
    budget_bytes: int | None
    plans: PlanTraces | None = None
    #: What the baseline measured above its own traced peak (None until calibrated).
    offset_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.plans is None:
            self.plans = PlanTraces(self.settings, self.space)

    @property
    def traces(self) -> dict[tuple[tuple[str, str], ...], Traced | None]:
        """The traces made so far (shared with the search's prior)."""
        assert self.plans is not None
        return self.plans.traces

    def calibrate(self, baseline_params: Mapping[str, Value], measured_peak_bytes: float | None) -> None:
        """Learn the measured-over-traced offset from the baseline (its parameters as it ran)."""
        if measured_peak_bytes is None or self.offset_bytes is not None:
            return
        own = {k: v for k, v in baseline_params.items() if k in self.space.names}
        traced = self.predicted_peak_bytes(own, offset=False)
        if traced is not None:
            self.offset_bytes = max(0, int(measured_peak_bytes) - traced)

    def predict_oom(self, params: Mapping[str, Value]) -> str | None:
        """Why ``params`` would not fit the budget, or None (unknown, or it fits)."""
        peak = self.predicted_peak_bytes(params)
        if peak is None or self.budget_bytes is None or peak <= self.budget_bytes:
            return None
        batch = batch_param(self.space)
        return (
            f"the plan predicts a peak of {peak / GIB:.2f} GiB at {batch}={params.get(str(batch))}, over the "
            f"budget of {self.budget_bytes / GIB:.2f} GiB (the step traced under fake tensors)"
        )

    def predicted_peak_bytes(self, params: Mapping[str, Value], offset: bool = True) -> int | None:
        """The step's predicted peak at ``params`` (with the baseline's offset), or None when unknown."""
        assert self.plans is not None
        batch = batch_param(self.space)
        if self.budget_bytes is None or batch is None or trial_world_size(self.settings, params) > 1:
            return None
        traced = self.plans.traced(params)
        if traced is None:
            return None
        size = int(params[batch])
        accumulation = int(params.get("grad_accum", traced.accumulation))
        extra = (self.offset_bytes or 0) if offset else 0
        live = traced.model.live_peak_bytes(size, accumulation)
        return round(live + traced.model.rounding.at(size)) + extra


__all__ = ["PlanMemory", "PlanTraces", "Traced"]
