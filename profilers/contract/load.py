"""The machine's load as a fact of every run: other processes' CPU over the measured steps.

A run's throughput on a shared machine moves with what else runs there. summary.json's ``load``
(:func:`profilers.contract.summarize.load_over`) holds the cores other processes kept busy while
the run's measured steps ran; a study's trials hold the same figure as ``other_load_cores``. Two
figures measured under loads further apart than :func:`load_band_cores` are not compared as if
the machine had been the same: the study verdict, ``autotune compare`` and the terminal, report
and dashboard lines all read the load and its wording from here. Pure Python (the dashboard
imports it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from profilers.contract.json_checks import WHEN_SET, JsonObject, SummaryError, checked_fields

#: Loads (other processes' busy cores) that differ by more than this share of the machine's cores
#: are "different load": on 2 cores, half a core (never less than half a core).
LOAD_BAND_SHARE = 0.25
_MIN_BAND_CORES = 0.5


def load_band_cores(machine_cores: float | None) -> float | None:
    """How far apart two loads may be and still count as the same load, in cores."""
    if not machine_cores:
        return None
    return max(_MIN_BAND_CORES, LOAD_BAND_SHARE * machine_cores)


@dataclass(frozen=True, slots=True)
class RunLoad:
    """Other processes' CPU during a run's measured steps."""

    other_cores: float
    machine_cores: int


@dataclass(frozen=True)
class LoadFigures:
    """summary.json's ``load``: the machine's CPU over the measured steps, in cores (summarize.load_over).

    ``other_cores`` is what other processes took: the machine's busy cores less the run's own (on a
    job of several ranks, less every rank's on rank 0's host: ``ranks`` of them); None when a rank's
    own CPU is unknown.
    """

    machine_cores: int
    busy_cores: float | None = None
    own_cores: float | None = None
    other_cores: float | None = None
    samples: int | None = None  # the host readings averaged
    ranks: int | None = field(default=None, metadata=WHEN_SET)  # a job's ranks on rank 0's host

    @property
    def known(self) -> RunLoad | None:
        """The load as the record the verdicts read; None when other processes' CPU is unknown."""
        if self.other_cores is None or self.machine_cores <= 0:
            return None
        return RunLoad(float(self.other_cores), self.machine_cores)

    @classmethod
    def parse(cls, data: Any, where: str = "load") -> LoadFigures | None:
        """summary.json's ``load`` object; None when not recorded or unreadable.

        The load is a note beside the figures: an older or a partial one is left out, never an error.
        """
        if not isinstance(data, Mapping):
            return None
        try:
            fields = checked_fields(cls, data, where)
        except SummaryError:
            return None
        if fields["machine_cores"] is None:
            return None
        return cls(**fields)


def load_of(summary: Mapping[str, Any]) -> RunLoad | None:
    """A profile summary's load; None when it was not recorded (or a rank's CPU was unknown)."""
    return load_from(summary.get("load"))


def load_from(load: Any, where: str = "load") -> RunLoad | None:
    """summary.json's ``load`` object as the record; None when it was not recorded or is unreadable."""
    figures = LoadFigures.parse(load, where)
    return None if figures is None else figures.known


def load_phrase(load: RunLoad) -> str:
    """The load in words: "other processes busy on 1.6 of 2 cores"."""
    return f"other processes busy on {load.other_cores:.1f} of {load.machine_cores} cores"


def is_loaded(load: RunLoad) -> bool:
    """Whether other processes took more than the band of an idle machine (its figures run slow)."""
    band = load_band_cores(load.machine_cores)
    return band is not None and load.other_cores > band


def load_line(load: RunLoad | None) -> str | None:
    """The one line a run's view shows about its load (terminal, report, dashboard)."""
    if load is None:
        return None
    text = load_phrase(load) + " during the measured steps"
    if is_loaded(load):
        text += ": its figures are slower than this machine gives when quiet"
    return text


@dataclass(frozen=True, slots=True)
class LoadComparison:
    """Two runs' loads side by side (A, then B)."""

    a: RunLoad | None
    b: RunLoad | None
    band_cores: float | None  # None when either is unknown or the machines' core counts differ

    @property
    def differs(self) -> bool:
        """Whether the two loads are further apart than the band."""
        return (
            self.a is not None
            and self.b is not None
            and self.band_cores is not None
            and abs(self.a.other_cores - self.b.other_cores) > self.band_cores
        )

    def explains(self, b_is_slower: bool) -> bool:
        """Whether the slower side ran under more load, by more than the band."""
        if not self.differs or self.a is None or self.b is None:
            return False
        slower, faster = (self.b, self.a) if b_is_slower else (self.a, self.b)
        return slower.other_cores > faster.other_cores


def compare_loads(a: RunLoad | None, b: RunLoad | None) -> LoadComparison:
    """The loads of two runs and the band they are compared with."""
    band = None
    if a is not None and b is not None and a.machine_cores == b.machine_cores:
        band = load_band_cores(a.machine_cores)
    return LoadComparison(a, b, band)


# -- burst by burst -------------------------------------------------------------------------------
#: Readings a run's measured steps must hold for its load to be known burst by burst: half a second
#: at the default 10 Hz. With fewer, the p90 is the single highest reading and a share of the
#: window moves in steps of a fifth or more.
MIN_LOAD_READINGS = 5
#: A reading's busy cores and the run's own are read a moment apart: on a steady machine other
#: processes' share jumps by up to 0.2 core (seen here). A machine busy within this of all its
#: cores had no idle CPU.
JITTER_CORES = 0.25
#: Two runs whose shares of the window spent contended (below) are further apart than this ran
#: under different loads.
CONTENDED_SHARE_BAND = 0.25
#: Beyond this share of a run's window contended, its load cannot be told alike with another's.
#: With no idle CPU the readings say how much of the machine other processes took, not how many of
#: them competed for it, and that sets a run's speed: the same script (its step mostly a wait)
#: beside one more busy loop on a saturated 2-core machine read as the same load and trained at
#: 0.87x; the same CPU-bound script in six processes beside two busy loops trained between 3,712
#: and 10,785 samples/s (its own CPU 0.33 to 0.7 of a core: which core it shared with whom).
MAX_CONTENDED_SHARE = 0.5
#: A run whose own CPU is below this share of what its threads could use, with no idle CPU, is short
#: of CPU: a one-thread run sharing its core with a busy loop gets about half of it (measured here:
#: 0.49-0.53 a reading), one with a core to itself 0.98-1.0.
STARVED_FRACTION = 0.75
#: A trial short of CPU (:meth:`LoadProfile.starved_share`) for more than this share of its measured
#: steps was measured on a machine too busy for its figures to be this machine's.
MAX_STARVED_SHARE = 0.5


def too_busy(starved_share: float | None) -> bool:
    """Whether a run short of CPU for ``starved_share`` of its measured steps measured a machine too busy.

    Its figures are then another machine's than this one's when quiet: the tuner measures such a run
    again when the machine is calmer, else leaves it out (status "busy"), never compares it.
    """
    return starved_share is not None and starved_share > MAX_STARVED_SHARE


@dataclass(frozen=True, slots=True)
class LoadProfile:
    """Other processes' CPU over a run's measured steps, reading by reading (about 0.1 s each)."""

    machine_cores: int
    others_cores: tuple[float, ...]  # other processes' cores at each reading (not clamped at 0)
    own_cores: tuple[float, ...]  # the run's own cores (its process and children) at each reading

    @property
    def readings(self) -> int:
        """Host readings over the measured steps."""
        return len(self.others_cores)

    @property
    def mean_cores(self) -> float:
        """Other processes' mean cores (summary ``load.other_cores`` of the same readings)."""
        return max(0.0, sum(self.others_cores) / len(self.others_cores)) if self.others_cores else 0.0

    @property
    def p90_cores(self) -> float:
        """Other processes' cores in the busiest tenth of the window (their bursts)."""
        return max(0.0, _quantile(self.others_cores, 0.9)) if self.others_cores else 0.0

    @property
    def contended_share(self) -> float:
        """The share of the window in which the run competed with other processes for the CPU.

        Readings with no idle CPU (the machine busy within :data:`JITTER_CORES` of its cores) while
        other processes took more than the band (:func:`load_band_cores`): a run that fills the
        machine alone is not contended.
        """
        if not self.others_cores:
            return 0.0
        band = load_band_cores(self.machine_cores) or 0.0
        full = self.machine_cores - JITTER_CORES
        hits = sum(
            1 for o, s in zip(self.others_cores, self.own_cores, strict=True) if o > band and o + s >= full
        )
        return hits / len(self.others_cores)

    def starved_share(self, demand_cores: float) -> float:
        """The share of the window in which the run got less CPU than its threads could use.

        Readings with no idle CPU (busy within :data:`JITTER_CORES` of the cores) in which the run's
        own cores fell below :data:`STARVED_FRACTION` of ``demand_cores`` (its threads × ranks, at
        most the cores): other processes held what it would have run on. A run that waits by
        nature (on data, on a lock) leaves CPU idle and is never starved.
        """
        if not self.others_cores or demand_cores <= 0:
            return 0.0
        want = STARVED_FRACTION * min(demand_cores, self.machine_cores)
        full = self.machine_cores - JITTER_CORES
        hits = sum(
            1 for o, s in zip(self.others_cores, self.own_cores, strict=True) if o + s >= full and s < want
        )
        return hits / len(self.others_cores)


def load_profile(
    others_cores: Sequence[float], own_cores: Sequence[float], machine_cores: int
) -> LoadProfile:
    """The record of a run's readings (``summarize.other_cores_series``)."""
    return LoadProfile(int(machine_cores), tuple(others_cores), tuple(own_cores))


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True, slots=True)
class LoadMatch:
    """Whether two runs' loads are alike burst by burst, and if not, why (one line)."""

    a: LoadProfile | None
    b: LoadProfile | None
    band_cores: float | None  # how far two loads' means (and p90s) may be apart
    problem: str | None  # None when the loads are alike

    @property
    def alike(self) -> bool:
        """Whether the two loads are alike: means, bursts and contention each within its band."""
        return self.problem is None

    def to_dict(self) -> JsonObject:
        """The figures for JSON (the readings left out)."""

        def side(p: LoadProfile | None) -> JsonObject | None:
            if p is None:
                return None
            return {
                "machine_cores": p.machine_cores,
                "readings": p.readings,
                "mean_cores": round(p.mean_cores, 3),
                "p90_cores": round(p.p90_cores, 3),
                "contended_share": round(p.contended_share, 3),
            }

        return {
            "alike": self.alike,
            "a": side(self.a),
            "b": side(self.b),
            "band_cores": self.band_cores,
            "problem": self.problem,
        }


def match_loads(a: LoadProfile | None, b: LoadProfile | None) -> LoadMatch:
    """Whether A's and B's loads were alike over their measured steps, burst by burst.

    Alike when both were recorded on machines of the same size with :data:`MIN_LOAD_READINGS`
    readings each, and other processes' mean cores, their p90 cores (the bursts) and the share of
    the window each run competed with them for the CPU (:attr:`LoadProfile.contended_share`) are
    each within their band (:func:`load_band_cores`, :data:`CONTENDED_SHARE_BAND`), and neither
    run was contended for more than :data:`MAX_CONTENDED_SHARE` of its window.
    """
    blank = LoadMatch(a, b, None, None)
    missing = [n for n, p in (("A", a), ("B", b)) if p is None or not p.readings]
    if missing or a is None or b is None:
        during = " and ".join(missing)
        return _with(blank, f"the machine's load during {during} was not recorded reading by reading")
    if a.machine_cores != b.machine_cores:
        sizes = f"{a.machine_cores} and {b.machine_cores} cores"
        return _with(blank, f"A and B ran on machines of different sizes ({sizes})")
    band = load_band_cores(a.machine_cores)
    assert band is not None
    share_a, share_b = a.contended_share, b.contended_share
    match = LoadMatch(a, b, band, None)
    few = [f"{n} {p.readings}" for n, p in (("A", a), ("B", b)) if p.readings < MIN_LOAD_READINGS]
    means = f"{a.mean_cores:.1f} cores on average during A and {b.mean_cores:.1f} during B"
    shares = f"{share_a:.0%} of A's window and {share_b:.0%} of B's"
    short = "the machine had no idle CPU, other processes above the band, in"
    problem = None
    if few:
        problem = (
            f"too few load readings to know its bursts ({', '.join(few)}; {MIN_LOAD_READINGS} needed): "
            "run longer"
        )
    elif abs(a.mean_cores - b.mean_cores) > band:
        problem = f"loads differ: other processes took {means} (band ±{band:.1f})"
    elif abs(a.p90_cores - b.p90_cores) > band:
        problem = (
            f"loads differ burst by burst: other processes' p90 {a.p90_cores:.1f} cores during A and "
            f"{b.p90_cores:.1f} during B (band ±{band:.1f}), though {means}"
        )
    elif abs(share_a - share_b) > CONTENDED_SHARE_BAND:
        problem = f"loads differ burst by burst: {short} {shares}"
    elif share_a > MAX_CONTENDED_SHARE or share_b > MAX_CONTENDED_SHARE:
        problem = (
            f"loads unknown: {short} {shares}; how many processes competed for it is not recorded, "
            "and that, not the code, can set a run's speed"
        )
    return match if problem is None else _with(match, problem)


def _with(match: LoadMatch, problem: str) -> LoadMatch:
    return replace(match, problem=problem)


__all__ = [
    "CONTENDED_SHARE_BAND",
    "JITTER_CORES",
    "LOAD_BAND_SHARE",
    "MAX_CONTENDED_SHARE",
    "MIN_LOAD_READINGS",
    "LoadComparison",
    "LoadFigures",
    "LoadMatch",
    "LoadProfile",
    "RunLoad",
    "compare_loads",
    "is_loaded",
    "load_band_cores",
    "load_from",
    "load_line",
    "load_of",
    "load_phrase",
    "load_profile",
    "match_loads",
    "too_busy",
]
