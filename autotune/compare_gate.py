"""``autotune compare A B --fail-if-slower PCT``: one decision, for CI, on whether B trains slower than A.

Everything the comparison claims about B's throughput against A's comes from two records made
once each: :class:`Evidence` (:func:`weigh`: the ratio B / A, its 95% interval with the spread
between processes, whether the loads were alike burst by burst, and what stops a decision) and
:class:`GateDecision` (:func:`decide`: pass, fail or undecided, with its exit code and its reason
in one line). The compare verdict sentence reads the same evidence, so it never claims a
difference beyond the noise that the gate would not act on; the terminal line, ``--format json``
and the exit status all come from the decision.

The gate fails (exit 1) only when the whole interval of B / A lies below ``1 − PCT/100``, the two
runs' loads were alike burst by burst (:func:`~profilers.contract.load.match_loads`) and both
have enough measured steps; it passes (exit 0) when B is not shown slower by more than PCT; it is
undecided (exit 3) when it cannot tell: loads that differ, too few steps or load readings, a side
without a throughput (a trace) or without its interval. ``compare A A`` (one run, by one path or
two) is the same run: exit 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from profilers.contract.json_checks import JsonObject
from profilers.contract.load import LoadMatch, LoadProfile, match_loads


class Side(Protocol):
    """What the gate reads of one side of a comparison (``autotune.compare.Side`` holds it)."""

    @property
    def kind(self) -> str: ...  # "profile", "trace" or "trial"
    @property
    def steps(self) -> int: ...  # measured steps behind the figures
    @property
    def samples_per_s(self) -> float | None: ...
    @property
    def samples_per_s_ci95(self) -> tuple[float, float] | None: ...
    @property
    def load_profile(self) -> LoadProfile | None: ...
    @property
    def source(self) -> str | None: ...  # two sides of one source are the same run

#: The spread between two separate processes of one script on one machine, as the sd of the log
#: of their throughputs: measured on this 2-core machine (a neighbour busy on about one core) with
#: ``OMP_NUM_THREADS=1 autotune profile --quiet --run-dir runs/qN examples/train.py --epochs 1``,
#: six processes one after the other: 12,277 to 13,849 samples/s, log-sd 0.042, where each run's
#: own 95% interval gave a log-sd of 0.012 (±2.3%): the processes differ 3.5 times more than their
#: intervals say. (That machine had no idle CPU, the run's core and the neighbour's, which
#: ``match_loads`` calls contended and leaves undecided: conservative, as the readings cannot tell
#: one competitor from three.) Six more beside two ``python -c 'while 1: pass'`` spread 3,712 to
#: 10,785 samples/s (log-sd 0.39): contended too, undecided rather than widened. A script whose
#: step waits like a GPU step (tests/scripts/gate_step.py, six processes each way) spread less
#: quiet (log-sd 0.011) and as much beside the two loops (0.045). The figure below, 0.042 rounded
#: up, enters the interval of B / A once for each side: at least ±13% around the measured ratio.
BETWEEN_PROCESS_LOG_SD = 0.045
#: Measured steps each side needs. The profiler's own early stop waits for 8; 20 puts two steps
#: beyond each of the p10 and p90 a run reports, and the t quantile of its interval within 7% of
#: the normal's (2.09 against 1.96), so a run's own interval is worth folding in.
MIN_MEASURED_STEPS = 20
#: ``outcome`` → exit status (2 is bad input, raised before any decision).
EXIT_CODES = {"pass": 0, "fail": 1, "undecided": 3}
_Z95 = 1.959964


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the two sides' throughputs say, computed once (:func:`weigh`)."""

    ratio: float | None  # B / A samples per second
    #: 95% interval of B / A: each run's own interval and the between-process spread, twice
    ratio_ci95: tuple[float, float] | None
    loads: LoadMatch | None
    problem: str | None  # why no decision can be taken (one line); None when one can
    same_run: str | None = None  # the run's path when A and B are one run

    @property
    def load_problem(self) -> bool:
        """Whether what stops a decision is the load (the verdict then says it can explain a difference)."""
        return self.problem is not None and self.loads is not None and self.problem == self.loads.problem

    def interval_text(self) -> str:
        """The ratio in words: B / A throughput 0.83× (95% interval 0.80–0.86× with the spread ...)."""
        if self.ratio is None:
            return "B / A throughput unknown"
        if self.ratio_ci95 is None:
            return f"B / A throughput {self.ratio:.2f}×"
        lo, hi = self.ratio_ci95
        return (
            f"B / A throughput {self.ratio:.2f}× (95% interval {lo:.2f}–{hi:.2f}× with the spread between "
            "processes)"
        )

    def to_dict(self) -> JsonObject:
        """The evidence for JSON."""
        return {
            "ratio": self.ratio,
            "ratio_ci95": list(self.ratio_ci95) if self.ratio_ci95 else None,
            "between_process_log_sd": BETWEEN_PROCESS_LOG_SD,
            "loads": self.loads.to_dict() if self.loads is not None else None,
            "problem": self.problem,
            "same_run": self.same_run,
        }


def _log_se(side: Side) -> float | None:
    """The standard error of the log of a side's throughput, from its 95% interval."""
    ci, rate = side.samples_per_s_ci95, side.samples_per_s
    if ci is None or rate is None or ci[0] <= 0 or ci[1] <= 0:
        return None
    return math.log(ci[1] / ci[0]) / (2 * _Z95)


def weigh(a: Side, b: Side) -> Evidence:
    """The evidence on B's throughput against A's (the one function the verdict and the gate read)."""
    if a.source is not None and a.source == b.source:
        return Evidence(1.0, (1.0, 1.0), None, None, same_run=a.source)
    no_rate = [
        f"{n} is a trace, with no throughput (profile the script with autotune profile)"
        if s.kind == "trace"
        else f"{n} has no throughput (its steps' samples were not seen)"
        for n, s in (("A", a), ("B", b))
        if not s.samples_per_s
    ]
    if no_rate:
        return Evidence(None, None, None, "; ".join(no_rate))
    assert a.samples_per_s and b.samples_per_s
    ratio = b.samples_per_s / a.samples_per_s
    se_a, se_b = _log_se(a), _log_se(b)
    ci = None
    if se_a is not None and se_b is not None:
        half = _Z95 * math.sqrt(se_a**2 + se_b**2 + 2 * BETWEEN_PROCESS_LOG_SD**2)
        ci = (ratio * math.exp(-half), ratio * math.exp(half))
    loads = match_loads(a.load_profile, b.load_profile)
    few = [f"{n} {s.steps}" for n, s in (("A", a), ("B", b)) if s.steps < MIN_MEASURED_STEPS]
    problem = None
    if few:
        problem = f"too few measured steps ({', '.join(few)}; {MIN_MEASURED_STEPS} needed): run longer"
    elif ci is None:
        missing = " and ".join(n for n, se in (("A", se_a), ("B", se_b)) if se is None)
        problem = f"{missing}'s throughput has no 95% interval (too few or too uneven steps): run longer"
    elif not loads.alike:
        problem = loads.problem
    return Evidence(ratio, ci, loads, problem)


@dataclass(frozen=True, slots=True)
class GateDecision:
    """``--fail-if-slower PCT``'s decision: the exit status, the terminal line and the JSON come from it."""

    outcome: str  # "pass", "fail" or "undecided"
    exit_code: int  # EXIT_CODES[outcome]
    fail_if_slower_pct: float
    floor_ratio: float  # 1 − PCT/100: B / A's whole interval below it fails
    ratio: float | None
    ratio_ci95: tuple[float, float] | None
    reason: str  # one line
    evidence: Evidence

    def line(self) -> str:
        """The terminal's one line."""
        return f"gate: {self.outcome} (exit {self.exit_code}): {self.reason}"

    def to_dict(self) -> JsonObject:
        """The decision for ``--format json`` (``gate``)."""
        return {
            "outcome": self.outcome,
            "exit_code": self.exit_code,
            "fail_if_slower_pct": self.fail_if_slower_pct,
            "floor_ratio": self.floor_ratio,
            "ratio": self.ratio,
            "ratio_ci95": list(self.ratio_ci95) if self.ratio_ci95 else None,
            "reason": self.reason,
            "evidence": self.evidence.to_dict(),
        }


def decide(evidence: Evidence, fail_if_slower_pct: float) -> GateDecision:
    """Pass, fail or undecided on ``evidence`` for a threshold of ``fail_if_slower_pct`` percent."""
    floor = 1 - fail_if_slower_pct / 100
    limit = f"the {floor:.2f}× that --fail-if-slower {fail_if_slower_pct:g}% allows"

    def made(outcome: str, reason: str) -> GateDecision:
        return GateDecision(outcome, EXIT_CODES[outcome], fail_if_slower_pct, floor, evidence.ratio,
                            evidence.ratio_ci95, reason, evidence)  # fmt: skip

    if evidence.same_run is not None:
        return made("pass", f"A and B are the same run ({evidence.same_run})")
    measured = evidence.interval_text()
    if evidence.problem is not None:
        return made("undecided", f"{evidence.problem}; {measured}" if evidence.ratio else evidence.problem)
    assert evidence.ratio_ci95 is not None
    if evidence.ratio_ci95[1] < floor:
        return made("fail", f"{measured}: all of it below {limit}, under alike loads")
    if evidence.ratio_ci95[0] < floor:
        return made("pass", f"{measured}: not shown below {limit}")
    return made("pass", f"{measured}: above {limit}")


def parse_pct(text: str) -> float:
    """``--fail-if-slower``'s value: a percentage in [0, 100), "5" or "5%"; ValueError in one line."""
    number = text.strip().removesuffix("%").strip()
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"expected a percentage such as 5 or 5%, got {text!r}") from None
    if not math.isfinite(value) or value < 0 or value >= 100:
        raise ValueError(f"expected a percentage from 0 to below 100, got {text!r}")
    return value


__all__ = [
    "BETWEEN_PROCESS_LOG_SD",
    "EXIT_CODES",
    "MIN_MEASURED_STEPS",
    "Evidence",
    "GateDecision",
    "decide",
    "parse_pct",
    "weigh",
]
