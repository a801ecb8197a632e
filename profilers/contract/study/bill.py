"""What a tuning study cost, what its best configuration saves, and when the one pays back the other.

A study runs processes that hold devices: its trials (the baseline included, and those that failed
or were stopped early), the anchors (the baseline's configuration run again during the search) and
the re-measurements of the best against the baseline. Each is billed for its wall time on every
device it held (its ranks), as the cost model bills a run (:mod:`autotune.cost.model`):

    device-hours = Σ duration_s × devices / 3600,  dollars = device-hours × price per device-hour

What the study found is worth, per hour the team trains its baseline's work, the share of the
baseline's device-time the best configuration saves on the same samples:

    saving share = 1 − (devices_best / devices_base) / speedup

with ``speedup`` the verdict's headline (re-measured when the study re-measured,
:func:`profilers.contract.study.verdict.study_verdict`), claimed only when the verdict is to apply the
configuration; otherwise nothing is saved and the study does not pay back. The payback time is in
hours of training (the study's device-hours over the device-hours an hour of training saves: no
price needed), and in days at the team's usage (``--usage-hours-per-day``; unsaid, no days are
given and the month's check takes a full day, 24 h). A study that cannot pay back within a month
(365 / 12 = 30.4 days) of that usage says so.

The terminal, summary.json (``bill``), the report and the dashboard all take these figures from
:func:`profilers.contract.study.cost.study_bill`; this module holds the record and its words.
Pure Python (the dashboard imports it).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from profilers.contract.json_checks import JsonObject, checked_fields

#: Days in a month: 365 / 12, the month of the cost model (730 hours).
DAYS_PER_MONTH = 365 / 12
#: Hours in a day of training when the team did not say its usage: the most a day can hold.
FULL_DAY_HOURS = 24.0


@dataclass(frozen=True, slots=True)
class StudyBill:
    """What a study spent and what it found is worth (see the module's doc)."""

    device_hours: float  # every process the study ran, × the devices it held
    trials_device_hours: float  # of which the trials' (the baseline included)
    remeasure_device_hours: float  # of which the anchors' and the re-measurements'
    processes: int  # the processes counted
    processes_without_time: int  # processes with no wall time recorded (left out of the hours)
    price_per_gpu_hour: float | None  # USD per device-hour, None without a price
    price_source: str | None
    usd: float | None  # device_hours × price
    #: Share of the baseline's device-time the best configuration saves per sample (below 0: it costs
    #: more, faster on more devices; None when the verdict claims no saving).
    saving_share: float | None
    saving_device_hours_per_hour: float | None  # per hour the baseline's work trains
    usage_hours_per_day: float | None  # the team's, as said (None: not said)
    saving_usd_per_day: float | None  # at the usage (a full day when not said), with a price
    payback_training_hours: float | None  # hours of training that pay the study back
    payback_days: float | None  # at the usage said
    #: Whether the study pays back within a month of training at the usage (24 h a day when not said);
    #: False also when the verdict claims no saving.
    pays_back_in_month: bool

    def to_dict(self) -> JsonObject:
        """The JSON form (summary.json's ``bill``, the report's)."""
        return asdict(self)

    @classmethod
    def parse(cls, data: Any, where: str) -> StudyBill | None:
        """``bill`` of a summary, checked; None when missing (a study from before it was kept)."""
        if not data:
            return None
        fields = checked_fields(cls, data, where)
        needed = ("device_hours", "trials_device_hours", "remeasure_device_hours", "processes")
        if any(fields.get(name) is None for name in needed):
            return None  # written by another version: the views leave it out
        try:
            return cls(**fields)
        except TypeError:
            return None

    def cost_words(self) -> str:
        """What it cost: "0.42 device-hours ($1.30 at $3.10/device-hour) over 14 processes"."""
        hours = device_time(self.device_hours)
        usd = (
            f" (${self.usd:,.2f} at ${self.price_per_gpu_hour:,.2f}/device-hour)"
            if self.usd is not None
            else ""
        )
        missing = (
            f"; {self.processes_without_time} without a recorded time left out"
            if self.processes_without_time
            else ""
        )
        return f"{hours}{usd} over {self.processes} processes{missing}"

    def payback_words(self) -> str:
        """When the study pays back, or why it does not, in one sentence."""
        if self.saving_share is not None and self.saving_share <= 0:
            return (
                f"the best costs {-self.saving_share:.0%} more device-time per sample than the baseline "
                "(it is faster on more devices), so the study never pays back"
            )
        if self.saving_share is None or self.payback_training_hours is None:
            return "it claims no saving, so it does not pay back"
        per = f"saves {self.saving_share:.0%} of the baseline's device-time per sample"
        if self.saving_usd_per_day is not None:
            day = self.usage_hours_per_day or FULL_DAY_HOURS
            per += f", ${self.saving_usd_per_day:,.2f} a day at {day:g} h a day"
        back = f"pays back after {payback_time(self.payback_training_hours)} of training"
        if self.payback_days is not None:
            back += f" ({self.payback_days:.3g} days at {self.usage_hours_per_day:g} h a day)"
        if not self.pays_back_in_month:
            usage = self.usage_hours_per_day or FULL_DAY_HOURS
            back += f"; it does not pay back within a month of training {usage:g} h a day"
        return f"{per}; {back}"

    def sentence(self) -> str:
        """Both: what it cost, and when it pays back."""
        return f"the study used {self.cost_words()}; {self.payback_words()}"


def device_hours(duration_s: float | None, devices: int) -> float | None:
    """A process's device-hours: its wall time on every device it held; None without a time."""
    if duration_s is None or not math.isfinite(duration_s) or duration_s < 0:
        return None
    return duration_s * max(1, devices) / 3600.0


def device_time(hours: float) -> str:
    """Device-time in words: "3.2 device-hours", "12 device-minutes", "40 device-seconds"."""
    if hours >= 1:
        return f"{hours:.3g} device-hours"
    if hours * 60 >= 1:
        return f"{hours * 60:.2g} device-minutes"
    return f"{hours * 3600:.2g} device-seconds"


def payback_time(hours: float) -> str:
    """Hours of training in words: "41 s", "45 min", "3.2 h", "2.1 days"."""
    if hours * 60 < 1:
        return f"{hours * 3600:.2g} s"
    if hours < 1:
        return f"{hours * 60:.2g} min"
    if hours < 48:
        return f"{hours:.3g} h"
    return f"{hours / 24:.3g} days"
