"""Typed records of the advice: a rule's threshold and a recommendation with its evidence."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from autotune.fmt import format_number, format_usd
from profilers.contract import lenient
from profilers.contract.json_checks import JsonObject
from profilers.contract.schema import Params

#: Severity order, most urgent first.
SEVERITIES: tuple[str, ...] = ("high", "medium", "low")


@dataclass(frozen=True, slots=True)
class Threshold:
    """One row of the rules table: when a rule fires, and where the figure comes from."""

    rule: str  # rule id, e.g. "input_bound"
    title: str  # what the rule detects, e.g. "Input-bound"
    metric: str  # the measured quantity, e.g. "data-wait share of the step time"
    comparison: str  # ">" or "<"
    value: float  # the threshold, in ``unit``
    unit: str  # "%", "x", "µs", "σ"…
    source: str  # where the threshold comes from (a public rule set), or "this project"

    def limit_text(self) -> str:
        """The condition in words: ``"> 5%"``, ``"> 1.05x"``, ``"> 3 σ"``, ``"> 0 trials"``."""
        glued = self.unit in ("%", "x", "×")
        return f"{self.comparison} {format_number(self.value, 6)}{'' if glued else ' '}{self.unit}".rstrip()


@dataclass(frozen=True, slots=True)
class Recommendation:
    """What one rule found in one run: the evidence, the action and what it is expected to gain.

    ``evidence`` holds figures from this run (each a short sentence with its number and unit);
    ``actions`` what to change, most effective first. ``speedup_estimate`` is the expected
    throughput factor (1.3 = 30% more samples/s) where it can be estimated, an upper bound unless
    ``measured`` is true (a tuning trial ran the recommended configuration). The cost fields are
    filled from the cost model when a price per GPU-hour is known.
    """

    rule: str
    severity: str  # one of SEVERITIES
    title: str  # one line, with the key figure: "Input-bound: 23% of each step waits for data"
    evidence: tuple[str, ...]
    actions: tuple[str, ...]
    speedup_estimate: float | None = None
    measured: bool = False
    saving_pct: float | None = None  # 1 - new cost / old cost, in % (0-100)
    saving_usd_per_month: float | None = None  # at the report's duty cycle and price
    params: Params = field(default_factory=dict)  # a tuned configuration to apply, if any
    #: The figures the evidence states, as numbers with their units in their names (the fields of
    #: the facts the rule read, ``speedup_bound``...): what report.json gives CI to read.
    figures: dict[str, Any] = field(default_factory=dict)

    def gain_parts(self) -> tuple[str, ...]:
        """The expected gain in words, for every renderer: ``("up to 1.30× throughput", "23% cheaper")``."""
        parts = []
        if self.speedup_estimate is not None:
            how = "measured" if self.measured else "up to"
            parts.append(f"{how} {self.speedup_estimate:.2f}× throughput")
        if self.saving_pct is not None:
            parts.append(f"{self.saving_pct:.0f}% cheaper")
        if self.saving_usd_per_month is not None:
            parts.append(f"{format_usd(self.saving_usd_per_month)} a month")
        return tuple(parts)


def figures_of(record: Any = None, **extra: Any) -> JsonObject:
    """A recommendation's figures: the fields of a fact record (a dataclass), and ``extra``."""
    out = dataclasses.asdict(record) if record is not None else {}
    out.update(extra)
    return out


def records_of(records: Any) -> list[JsonObject]:
    """The fields of each fact record (one per GPU, per rank...)."""
    return [dataclasses.asdict(r) for r in records]


@dataclass(frozen=True, slots=True)
class AdviceSection:
    """The recommendations, most urgent first, and the thresholds of the rules that were checked."""

    recommendations: tuple[Recommendation, ...] = field(metadata=lenient.records_of(Recommendation))
    rules_checked: tuple[Threshold, ...] = field(metadata=lenient.records_of(Threshold))
    not_checked: tuple[str, ...] = ()  # rules that had no data here, each with why

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AdviceSection:
        """The section back from report.json's ``advice`` (what ``dataclasses.asdict`` wrote).

        Read leniently (:mod:`profilers.contract.lenient`): a recommendation or rule lacking a
        field it needs is left out, a figure of the wrong type keeps its default.
        """
        return cls(**lenient.read_fields(cls, data))
