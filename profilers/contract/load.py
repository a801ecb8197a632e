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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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


def load_of(summary: Mapping[str, Any]) -> RunLoad | None:
    """A profile summary's load; None when it was not recorded (or a rank's CPU was unknown)."""
    return load_from(summary.get("load"))


def load_from(load: Any, where: str = "load") -> RunLoad | None:
    """summary.json's ``load`` object as the record; None when it was not recorded or is unreadable.

    The load is a note beside the figures: an older or a partial one is left out, never an error
    (``where`` is for the nested readers' signature).
    """
    if not isinstance(load, Mapping):
        return None
    other, cores = load.get("other_cores"), load.get("machine_cores")
    if not isinstance(other, int | float) or not isinstance(cores, int) or cores <= 0:
        return None
    return RunLoad(float(other), cores)


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


__all__ = [
    "LOAD_BAND_SHARE",
    "LoadComparison",
    "RunLoad",
    "compare_loads",
    "is_loaded",
    "load_band_cores",
    "load_from",
    "load_line",
    "load_of",
    "load_phrase",
]
