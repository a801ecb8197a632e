"""How far one configuration's throughput moves between separate processes, and the search's ratios.

A trial's own 95% interval says how steady its steps were inside its process. Two processes of the
same configuration differ by far more on a shared machine (on this project's 2-core machine,
``examples/train.py`` measured 130,821 and 81,813 samples/s in two runs of one configuration, each
±6-7% by its own interval). So a study runs the baseline's configuration as several processes, its
*anchors*: the baseline trial itself and re-runs during the search (``autotune tune --anchor-every``:
before the first search trial and every N-th after it, in that trial's slot). Their spread is the
between-process spread; every ratio of the search is taken against the anchor nearest in time, and
its interval carries that spread on both sides of the ratio:

    sd(log ratio)² = s² + max(s², w²)

with ``s`` the standard deviation of the anchors' log throughputs and ``w`` the trial's own (its
95% interval's half-width / 1.96, in log); the interval is Student's t with the anchors' degrees of
freedom. With one anchor the spread is unknown and a search ratio has no interval.

The terminal, summary.json, the report and the dashboard all take these figures from here.
Pure Python (the dashboard imports it).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from profilers.contract.intervals import t975

#: The normal 97.5% quantile: a trial's own 95% interval is ± this many standard deviations.
_Z975 = 1.96


@dataclass(frozen=True)
class AnchorRun:
    """One process of the baseline's configuration: the baseline trial (index 0) or a re-run."""

    index: int
    samples_per_s: float | None  # None when it did not finish ok
    samples_per_s_ci95: tuple[float | None, float | None] | None = None  # its own steps' interval
    started_at: float | None = None  # unix seconds
    ended_at: float | None = None
    other_load_cores: float | None = None
    #: A reference for the search's ratios: false for a baseline that ran alone while the search's
    #: trials ran several at once (it still counts in the spread).
    reference: bool = True
    #: Measured on a machine too busy for it (contract.load.too_busy): in neither the spread nor the
    #: references while another anchor is not.
    busy: bool = False

    @property
    def midpoint(self) -> float | None:
        """When it ran (the middle of its run), or None when not known."""
        return midpoint(self.started_at, self.ended_at)


def midpoint(started_at: float | None, ended_at: float | None) -> float | None:
    """The middle of a run (unix seconds) that a ratio is placed at in time; None when not known."""
    if started_at is None:
        return None
    return (started_at + (ended_at or started_at)) / 2


@dataclass(frozen=True)
class ProcessSpread:
    """The baseline's throughput over its separate processes (the study's anchors)."""

    processes: int  # anchors that finished ok
    low_samples_per_s: float | None
    high_samples_per_s: float | None
    log_sd: float | None  # sd of the log throughputs (None with fewer than 2 processes)
    #: Two anchors whose own 95% intervals do not overlap: the machine's speed moved between them
    #: (drift or contention), beyond what each run's steps said.
    beyond_own_intervals: bool

    @property
    def dof(self) -> int:
        """Degrees of freedom of ``log_sd``."""
        return max(self.processes - 1, 0)

    @property
    def spread_pct(self) -> float | None:
        """``log_sd`` as a percentage (about the coefficient of variation between processes)."""
        return None if self.log_sd is None else 100 * (math.exp(self.log_sd) - 1)

    def sentence(self) -> str:
        """One line for people: how the baseline measured across its processes."""
        if self.processes == 0 or self.low_samples_per_s is None or self.high_samples_per_s is None:
            return "the baseline's configuration finished ok in no process"
        if self.processes == 1 or self.spread_pct is None:
            return "the baseline ran as one process: the spread between processes is not measured"
        line = (
            f"the baseline's configuration measured {self.low_samples_per_s:,.0f}–"
            f"{self.high_samples_per_s:,.0f} samples/s in {self.processes} separate processes "
            f"(±{self.spread_pct:.0f}% between processes)"
        )
        if self.beyond_own_intervals:
            line += (
                "; they disagree beyond their own intervals: the machine's speed moved during the study, "
                "and every ratio of the search carries that spread"
            )
        return line


def process_spread(anchors: Sequence[AnchorRun]) -> ProcessSpread:
    """The spread of the ok anchors' throughputs (busy ones only when all are)."""
    ok = [a for a in anchors if a.samples_per_s is not None and a.samples_per_s > 0]
    ok = [a for a in ok if not a.busy] or ok
    rates = [a.samples_per_s for a in ok if a.samples_per_s is not None]
    if not rates:
        return ProcessSpread(0, None, None, None, False)
    log_sd = statistics.stdev(math.log(r) for r in rates) if len(rates) > 1 else None
    return ProcessSpread(len(rates), min(rates), max(rates), log_sd, _apart(ok))


def _apart(anchors: Sequence[AnchorRun]) -> bool:
    """Whether some two anchors' own intervals do not overlap (an open or missing end overlaps)."""
    lows = [a.samples_per_s_ci95[0] for a in anchors if a.samples_per_s_ci95 and a.samples_per_s_ci95[0]]
    highs = [a.samples_per_s_ci95[1] for a in anchors if a.samples_per_s_ci95 and a.samples_per_s_ci95[1]]
    return bool(lows and highs) and max(lows) > min(highs)


@dataclass(frozen=True)
class SearchRatio:
    """A trial's throughput over the baseline's, as the search measured it."""

    ratio: float | None
    ci95: tuple[float, float] | None  # with the between-process spread; None with one anchor
    anchor: int | None  # the anchor it was taken against

    def holds_one(self) -> bool | None:
        """Whether the interval holds 1 (the same as the baseline within the noise); None without one."""
        return None if self.ci95 is None else self.ci95[0] <= 1 <= self.ci95[1]


def ratio_span(ci95: tuple[float, float]) -> str:
    """A ratio's interval for people: "0.62–1.48×", with ends beyond 100× or below 0.01× said so."""

    def end(value: float) -> str:
        if value >= 100:
            return "over 100"
        if value < 0.01:
            return "under 0.01"
        return f"{value:.2f}"

    return f"{end(ci95[0])}–{end(ci95[1])}×"


def nearest_anchor(anchors: Sequence[AnchorRun], when: float | None) -> AnchorRun | None:
    """The ok anchor that ran nearest ``when`` (unix seconds); the first ok one when times are unknown.

    Only references count, unless none of the ok anchors is one; busy ones only when all are.
    """
    ok = [a for a in anchors if a.samples_per_s]
    ok = [a for a in ok if not a.busy] or ok
    ok = [a for a in ok if a.reference] or ok
    if not ok:
        return None
    if when is None:
        return ok[0]
    timed = [a for a in ok if a.midpoint is not None]
    if not timed:
        return ok[0]
    return min(timed, key=lambda a: abs((a.midpoint or 0.0) - when))


def search_ratio(
    samples_per_s: float | None,
    ci95: Sequence[float | None] | None,
    when: float | None,
    anchors: Sequence[AnchorRun],
    anchor_index: int | None = None,
) -> SearchRatio:
    """A trial's throughput (its own ``ci95``, run at ``when``) over the nearest anchor's.

    ``anchor_index``: the anchor the trial was compared with as it ended (kept with it, so that the
    figure printed then stays the figure); its interval still takes every anchor's spread.
    """
    fixed = [a for a in anchors if a.index == anchor_index and a.samples_per_s]
    anchor = fixed[0] if fixed else nearest_anchor(anchors, when)
    if samples_per_s is None or samples_per_s <= 0 or anchor is None or not anchor.samples_per_s:
        return SearchRatio(None, None, None)
    ratio = samples_per_s / anchor.samples_per_s
    spread = process_spread(anchors)
    if spread.log_sd is None:
        return SearchRatio(ratio, None, anchor.index)
    own = _own_log_sd(samples_per_s, ci95)
    sd = math.sqrt(spread.log_sd**2 + max(spread.log_sd, own) ** 2)
    half = t975(spread.dof) * sd
    return SearchRatio(ratio, (ratio * math.exp(-half), ratio * math.exp(half)), anchor.index)


def _own_log_sd(rate: float, ci95: Sequence[float | None] | None) -> float:
    """A run's own standard deviation of its log throughput, from its 95% interval (0 when unknown)."""
    if not ci95 or len(ci95) != 2:
        return 0.0
    low, high = ci95
    if low is None or low <= 0:
        return 0.0
    top = high if high is not None and high > 0 else rate * rate / low  # an open end: mirrored
    return math.log(top / low) / 2 / _Z975
