"""What the tuner keeps with each trial, typed: its facts (the search library's ``attrs``) and metrics.

The search library (:mod:`autotune.search`) stores a trial's ``attrs`` and ``metrics`` as JSON
objects and knows nothing of their keys. The tuner writes them through :meth:`TrialFacts.to_attrs`
and the scoring (:meth:`autotune.tuner.objectives.Scoring.metrics`), and reads them back through
:func:`facts` and :func:`metrics`, so every reader sees one set of names and types. A study stored
by an older version lacks some facts: they read as None.

>>> from autotune.search.records import Trial
>>> t = Trial(1, {"micro_batch": 8}, "ok", 120.0, {"samples_per_s": 120.0}, 3.0,
...           attrs=TrialFacts(world_size=2, throughput_ci95=(110.0, 130.0)).to_attrs())
>>> facts(t).world_size, facts(t).throughput_ci95, metrics(t).samples_per_s, metrics(t).step_time_s
(2, (110.0, 130.0), 120.0, None)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from autotune.knob_values import KnobValues
from autotune.search.records import Trial
from profilers.contract.json_checks import JsonObject
from profilers.contract.lenient import read_fields
from profilers.contract.schema import Params


@dataclass(frozen=True, slots=True)
class TrialFacts:
    """A trial's facts beside its metrics: where and how it ran, what its script really used."""

    run_dir: str | None = None  # relative to the study
    world_size: int = 1
    params_used: Params = field(default_factory=dict)  # the knobs its code read, as used
    stop_reason: str | None = None  # why a step budget ended it
    measured_steps: int | None = None
    precision: str | None = None  # what the profiler saw the model run in
    samples_per_step: int | None = None
    flops_per_step: float | None = None
    loss_per_step: tuple[float | None, ...] | None = None
    device_memory_bytes: int | None = None  # the device's whole memory
    throughput_ci95: tuple[float | None, float | None] | None = None  # samples/s; an open end is None
    stable: bool | None = None  # its steps' spread within the study's bound
    other_load_cores: float | None = None  # other processes' load while it ran
    starved_share: float | None = None  # share of its measured steps it ran short of CPU
    busy_before: float | None = None  # its first run's starved share, when it ran again once calmer
    load_cores: int | None = None  # the cores other_load_cores is over (its slot's when pinned)
    anchor: int | None = None  # the anchor its ratio was taken against as it ended (contract.study.spread)
    threads_per_rank: int | None = None
    device_kind: str | None = None  # "cuda" or "cpu"
    device_name: str | None = None
    executor: str | None = None  # "local" or "ray"
    node: str | None = None
    devices: str | None = None  # "cuda:0", "cpu:1"
    started_at: float | None = None  # epoch seconds
    ended_at: float | None = None
    refused_precision: str | None = None  # a precision the machine cannot run: never tried again
    plan_predicted: float | None = None  # the plan prior's objective for it
    impossible: bool = False  # a configuration that cannot exist (a batch split that does not divide)
    same_as_baseline: bool = False
    #: Stopped early as losing (autotune.tuner.early_stop): the floor it fell below, how it was set
    #: ("spread" or "share") and the trial it was measured against.
    stop_floor: float | None = None
    stop_rule: str | None = None
    stop_best_id: int | None = None

    @classmethod
    def of(cls, attrs: Mapping[str, Any]) -> TrialFacts:
        """The facts in a trial's ``attrs`` (a wrong type reads as missing: the study was stored so)."""
        return cls(**read_fields(cls, attrs))

    def to_attrs(self) -> JsonObject:
        """The JSON object the study stores (tuples as lists; :meth:`of` reads it back)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for key in ("loss_per_step", "throughput_ci95"):
            if out[key] is not None:
                out[key] = list(out[key])
        out["params_used"] = dict(self.params_used)
        return out

    @property
    def run_precision(self) -> str | None:
        """The precision the script used: the knob it read, else what the profiler saw."""
        return KnobValues.of(self.params_used).precision or self.precision

    @property
    def global_batch(self) -> int | None:
        """Samples per optimizer step: the knob the script read, else what the profiler counted."""
        used = KnobValues.of(self.params_used).global_batch
        return used if used is not None else self.samples_per_step


@dataclass(frozen=True, slots=True)
class TrialMetrics:
    """A trial's metrics as the scoring wrote them (job-wide; None where it measured none)."""

    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    peak_memory_bytes: int | None = None
    step_time_s: float | None = None
    usd_per_million_samples: float | None = None
    joules_per_sample: float | None = None

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> TrialMetrics:
        """The metrics in a trial's ``metrics``."""
        return cls(**read_fields(cls, values))


def facts(trial: Trial) -> TrialFacts:
    """``trial``'s facts."""
    return TrialFacts.of(trial.attrs)


def metrics(trial: Trial) -> TrialMetrics:
    """``trial``'s metrics."""
    return TrialMetrics.of(trial.metrics)


__all__ = ["TrialFacts", "TrialMetrics", "facts", "metrics"]
