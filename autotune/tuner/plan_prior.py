"""The plan's prediction of every configuration, as the Bayesian search's prior mean.

After the baseline, the study predicts each configuration's objective the way ``autotune plan``
does: the trial's own command traced under fake tensors once per combination of the parameters
that change what runs (:class:`autotune.tuner.plan_memory.PlanTraces`, shared with the memory
prediction), the step's FLOPs, bytes and ops priced at this device's costs, and the micro-batch ×
accumulation that keeps the script's global batch. The device's costs:

- a CPU: :func:`autotune.plan.probe.probe_costs` (a few seconds: fp32, bf16 and fp16 matrix products, a
  large add, a tiny network's step for the cost of an op), ops one after another; the ranks of a
  ddp/fsdp trial run at once as far as the cores hold them at their threads each (torchrun gives a
  rank one unless ``OMP_NUM_THREADS`` says otherwise), each its share of the global batch; their
  communication (gloo) is not modelled;
- a GPU of the plan's table (by its name): the plan's roofline with its expected efficiencies and,
  over several GPUs, its ring collectives less the measured overlap.

Every prediction is then scaled so the baseline's equals its measurement: what the search needs is
the ranking and the ratios, which the GP's residual corrects where trials show them wrong
(:mod:`autotune.search.prior`). Only the throughput and cost objectives get a prior; a
configuration whose trace could not be made gets none (a neutral guess in the search).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from autotune.fmt import format_number
from autotune.knob_values import KnobValues
from autotune.plan.gpus import gpu_spec, planned_as
from autotune.search.space import Value, batch_param
from autotune.tuner.host_load import machine_cores
from autotune.tuner.plan_memory import SCALED, PlanTraces, Traced
from autotune.tuner.trial_facts import TrialFacts
from autotune.tuner.trials import trial_world_size
from autotune.tuner.tune_checks import ranks_per_replica
from profilers.contract.study.summary import PriorPrediction
from profilers.contract.study.trials import usd_per_million
from profilers.hardware.gpus import match_gpu_model

#: Combinations of the non-batch parameters the prior will trace at most (each trace takes seconds).
MAX_COMBINATIONS = 24
#: A finite space up to this many configurations is predicted whole before the search starts.
MAX_PREDICTED_UPFRONT = 1000


@dataclass
class PlanPrior:
    """Predicted objective of each configuration (``predict``), scaled to the baseline's measurement."""

    plans: PlanTraces
    objective: str  # "throughput" or "cost"
    device: str  # "cpu" or the plan's key of the GPU the trials run on
    costs: Any = None  # CpuCalibration on a CPU
    price_per_gpu_hour: float | None = None
    #: Samples per optimizer step the script holds fixed (its ``batch_plan``'s), or None.
    global_batch: int | None = None
    scale: float = 1.0
    #: Every configuration predicted so far: its parameters and its prediction.
    predictions: dict[tuple[Any, ...], tuple[dict[str, Value], float | None]] = field(default_factory=dict)

    def calibrate(self, baseline_params: Mapping[str, Value], measured: float | None) -> None:
        """Scale every prediction so that the baseline's configuration predicts ``measured``.

        The baseline as the parameters it read say it ran; when it read no batch parameter (a
        script taking its batch as an argument), its own command traced with no parameter set.
        """
        own = {k: v for k, v in baseline_params.items() if k in self.plans.space.names}
        if not measured:
            return
        if batch_param(self.plans.space) in own:
            ranks = trial_world_size(self.plans.settings, own)
            rate = self.samples_per_s(own)
        else:
            ranks, base = 1, self.plans.baseline()
            rate = None if base is None else self._rate(base, base.micro_batch, base.accumulation, 1, {})
        predicted = None if rate is None else self._objective(rate, ranks)  # unscaled
        if predicted:
            self.scale = measured / predicted  # samples/s or $ per million samples alike
            self.predictions.clear()

    def predict(self, params: Mapping[str, Value]) -> float | None:
        """The objective predicted at ``params`` (None: no prediction); never raises."""
        key = self.plans.space.key(params)
        if key not in self.predictions:
            try:
                value = self._predict(params)
            except Exception as exc:  # a prior is advice to the search: it never stops a study
                self.plans.problems.append(f"the plan's prediction failed: {type(exc).__name__}: {exc}")
                value = None
            self.predictions[key] = (dict(params), value)
        return self.predictions[key][1]

    def predicted(self) -> list[PriorPrediction]:
        """Every configuration predicted so far, best first (what the search started from)."""
        rows = [(p, v) for p, v in self.predictions.values() if v is not None]
        rows.sort(key=lambda r: r[1], reverse=self.objective == "throughput")
        return [PriorPrediction(p, v) for p, v in rows]

    def samples_per_s(self, params: Mapping[str, Value]) -> float | None:
        """Predicted samples/s of ``params`` (unscaled), None when it cannot be predicted."""
        batch = batch_param(self.plans.space)
        traced = self.plans.traced(params)
        if batch is None or traced is None:
            return None
        ranks = trial_world_size(self.plans.settings, params)
        replicas = ranks // ranks_per_replica(params) if ranks % ranks_per_replica(params) == 0 else 0
        micro = int(params[str(batch)])
        if not replicas or (self.global_batch and self.global_batch % (micro * replicas)):
            return None  # the mesh or the micro-batch cannot split: the study skips it
        accumulation = self._accumulation(params, traced, micro, replicas)
        return self._rate(traced, micro, accumulation, ranks, params)

    def _rate(
        self, traced: Traced, micro: int, accumulation: int, ranks: int, params: Mapping[str, Value]
    ) -> float | None:
        """Samples/s of ``micro`` × ``accumulation`` on each replica of ``ranks`` (unscaled)."""
        replicas = ranks // ranks_per_replica(params)
        if self.device == "cpu":
            # every rank its share; as many ranks at once as the cores hold at their threads each
            # (a model-parallel replica's ranks split its work: the same total on the cores)
            per_rank = traced.model.cpu_step_time_s(self.costs, micro, accumulation)
            seconds = per_rank * replicas / self._at_once(ranks)
        else:
            seconds = self._gpu_step_s(traced, micro, accumulation, ranks, params)
        if not seconds or seconds <= 0:
            return None
        return micro * accumulation * replicas / seconds

    def _predict(self, params: Mapping[str, Value]) -> float | None:
        rate = self.samples_per_s(params)
        value = None if rate is None else self._objective(rate, trial_world_size(self.plans.settings, params))
        return None if value is None else value * self.scale

    def _objective(self, rate: float, ranks: int) -> float | None:
        """The objective at ``rate`` samples/s over ``ranks`` devices (unscaled)."""
        if self.objective == "throughput":
            return rate
        if self.price_per_gpu_hour is None:
            return None
        return usd_per_million(rate, ranks, self.price_per_gpu_hour)

    def _at_once(self, ranks: int) -> int:
        """Ranks of a CPU trial that run at once: the cores over each rank's threads (torchrun's 1)."""
        if ranks == 1:
            return 1
        raw = self.plans.settings.extra_env.get("OMP_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS") or "1"
        threads = int(raw) if raw.isdigit() and int(raw) > 0 else 1
        return max(1, min(ranks, machine_cores() // threads))

    def _accumulation(self, params: Mapping[str, Value], traced: Traced, micro: int, ranks: int) -> int:
        if "grad_accum" in params:
            return max(1, int(params["grad_accum"]))
        if self.global_batch:  # the script splits a fixed global batch (batch_plan)
            return max(1, self.global_batch // (micro * ranks))
        return traced.accumulation

    def _gpu_step_s(
        self, traced: Traced, micro: int, accumulation: int, ranks: int, params: Mapping[str, Value]
    ) -> float | None:
        from autotune.plan.layouts import Layout  # torch: only on a GPU

        spec = gpu_spec(self.device)
        if spec is None:
            return None
        knobs = KnobValues.of(params)
        name = "single" if ranks == 1 else knobs.layout if knobs.layout in ("ddp", "fsdp") else "ddp"
        tp, pp, offload = knobs.tensor_parallel or 1, knobs.pipeline_parallel or 1, knobs.cpu_offload is True
        units = {"units": traced.units} if traced.units is not None else {}  # FSDP's and the stages' split
        return Layout(name, ranks, tp=tp, pp=pp, offload=offload, **units).step_s(
            spec, traced.model, micro, accumulation
        )


def prior_for_study(
    plans: PlanTraces,
    scoring: Any,
    baseline: TrialFacts,
    baseline_value: float | None,
    device_kind: str,
    on_note: Callable[[str], None] | None = None,
) -> tuple[PlanPrior | None, str]:
    """The prior of a study after its baseline (scaled to it), or None and why not.

    A finite space of up to :data:`MAX_PREDICTED_UPFRONT` configurations is predicted whole at once,
    so the seconds the traces take are said (``on_note``) rather than a silent first ask. A prior is
    advice to the search: whatever fails in making it leaves the study searching without one.
    """
    try:
        return _prior_for_study(plans, scoring, baseline, baseline_value, device_kind, on_note)
    except Exception as exc:
        return None, f"no plan prior: it failed ({type(exc).__name__}: {exc})"


def _prior_for_study(
    plans: PlanTraces,
    scoring: Any,
    baseline: TrialFacts,
    baseline_value: float | None,
    device_kind: str,
    on_note: Callable[[str], None] | None,
) -> tuple[PlanPrior | None, str]:
    prior, note = make_prior(
        plans,
        scoring.objective,
        baseline.device_kind or device_kind,
        baseline.device_name,
        scoring.price_per_gpu_hour,
        KnobValues.of(baseline.params_used).global_batch,
    )
    if prior is None:
        return None, note
    say = on_note or (lambda line: None)
    say(f"{note}: predicting the configurations from fake-tensor traces of the script")
    prior.calibrate(baseline.params_used, baseline_value)
    size = plans.space.size
    if size is not None and size <= MAX_PREDICTED_UPFRONT:
        for params in plans.space.points():
            prior.predict(params)
        best = prior.predicted()[:1]
        if not best:  # every trace failed (a data-dependent op, a script the tracer cannot run)
            why = plans.problems[0] if plans.problems else "no configuration could be traced"
            return None, f"no plan prior: none of the {size} configurations could be predicted ({why})"
        if best:
            shown = ", ".join(f"{k}={v}" for k, v in best[0].params.items())
            predicted = format_number(best[0].predicted, 4)
            say(f"the plan's best: {shown} ({predicted} {scoring.metric} predicted)")
    return prior, note


def make_prior(
    plans: PlanTraces,
    objective: str,
    device_kind: str | None,
    device_name: str | None,
    price_per_gpu_hour: float | None,
    global_batch: int | None,
) -> tuple[PlanPrior | None, str]:
    """The prior of a study, or None and why not (shown with the study's progress)."""
    space = plans.space
    if objective not in ("throughput", "cost"):
        return None, f"no plan prior for the {objective} objective (throughput and cost only)"
    if batch_param(space) is None:
        return None, "no plan prior: the space has no batch parameter to scale a trace in"
    combinations = _combinations(space)
    if combinations is None or combinations > MAX_COMBINATIONS:
        return None, f"no plan prior: over {MAX_COMBINATIONS} combinations of the other parameters to trace"
    if device_kind == "cuda":
        model = match_gpu_model(device_name)
        spec = planned_as(model) if model else None
        if spec is None:
            return None, f"no plan prior: {device_name or 'this GPU'} is not in the plan's GPU table"
        prior = PlanPrior(plans, objective, spec.key, None, price_per_gpu_hour, global_batch)
        return prior, f"plan prior: {spec.key}"
    from autotune.plan.probe import probe_costs  # torch: only when a study plans

    return (
        PlanPrior(plans, objective, "cpu", probe_costs(), price_per_gpu_hour, global_batch),
        "plan prior: this CPU's probed costs",
    )


def _combinations(space: Any) -> int | None:
    """Distinct combinations of the parameters that are traced separately (None: not finite)."""
    skip = (batch_param(space), *SCALED, "layout")
    sizes = [param.size for name, param in space.params.items() if name not in skip]
    return None if None in sizes else math.prod(sizes)


__all__ = ["MAX_COMBINATIONS", "MAX_PREDICTED_UPFRONT", "PlanPrior", "make_prior", "prior_for_study"]
