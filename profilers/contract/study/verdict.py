"""One verdict per tuning study: what the study can claim of its best configuration, and how firmly.

The search's own figure for its best trial is the maximum of many noisy measurements, biased upward;
the interleaved re-measurements (``confirmations``) are not. So the headline is the re-measured
speedup with its 95% interval whenever the study re-measured, and a configuration is recommended
(``recommend``, ``action`` "apply") only when that interval lies above 1, the gain (per core when the
cores differ) is above :data:`APPLY_MIN_SPEEDUP`, *and* the machine's load while re-measuring was
within the band (:func:`~profilers.contract.load.load_band_cores`) of the load the search's trials ran
under. Otherwise the verdict says why not (within the noise, too small, measured under different load,
measured once, not measured again, slower, nothing tuned had an effect) and what to do: keep the
current settings, or measure again.

The terminal, the report, the advice, the dashboard and summary.json (``verdict``) all take the study's
verdict from :func:`study_verdict`; none words its own. Pure Python (the dashboard imports it).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

from profilers.contract.json_checks import JsonObject
from profilers.contract.lenient import member_of, read_fields
from profilers.contract.load import load_band_cores
from profilers.contract.schema import TrialStatus
from profilers.contract.study.spread import ratio_span
from profilers.contract.study.summary import TrialEntry, TuningSummary


class VerdictStatus(StrEnum):
    """What a study's re-measurement found of its best configuration (``verdict.status``).

    A member is its JSON string (``"confirmed"``), as summary.json writes it.
    """

    CONFIRMED = "confirmed"  # re-measured, interval above 1, load within the band
    DIFFERENT_LOAD = "different_load"  # re-measured, but under a load outside the band of the search's
    MORE_CORES = "more_cores"  # re-measured above 1, but on a CPU only with more cores: per core not faster
    WITHIN_NOISE = "within_noise"  # re-measured, the interval holds 1
    SLOWER = "slower"  # re-measured, the interval lies below 1
    MEASURED_ONCE = "measured_once"  # one re-measured round: no interval
    NOT_MEASURED_AGAIN = "not_measured_again"  # --confirm-rounds 0, or the re-measurement failed
    SMALL_GAIN = "small_gain"  # re-measured above 1, but by no more than APPLY_MIN_SPEEDUP
    BASELINE_BEST = "baseline_best"  # no configuration beat the baseline
    NO_EFFECT = "no_effect"  # the study stopped: what it tunes changes nothing (a knob never read)
    TOO_BUSY = "too_busy"  # every search trial was left out: the machine was too busy to measure them
    NO_RESULT = "no_result"  # no trial finished ok


#: Every ``verdict.status``'s JSON string.
VERDICTS: tuple[str, ...] = tuple(v.value for v in VerdictStatus)
_V = VerdictStatus
#: Each status in a few words (a title's caveat, a card's caption): the one wording of each.
VERDICT_LABELS: dict[str, str] = {
    _V.CONFIRMED: "confirmed",
    _V.DIFFERENT_LOAD: "measured under different load",
    _V.MORE_CORES: "faster only with more cores",
    _V.WITHIN_NOISE: "within the noise",
    _V.SLOWER: "slower when measured again",
    _V.MEASURED_ONCE: "measured again only once",
    _V.NOT_MEASURED_AGAIN: "in the search, not measured again",
    _V.SMALL_GAIN: "a gain too small to act on",
    _V.BASELINE_BEST: "the baseline was best",
    _V.NO_EFFECT: "nothing tuned had an effect",
    _V.TOO_BUSY: "the machine was too busy to measure",
    _V.NO_RESULT: "no result",
}
#: A tuned configuration is worth applying only above this speedup (per core when the cores differ):
#: this project's trials are measured to ±5% (``autotune tune --stable-within 0.05``).
APPLY_MIN_SPEEDUP = 1.05
#: What a verdict tells the team to do; the one place each status is mapped to it.
ACTIONS: dict[str, str] = {
    _V.CONFIRMED: "apply",
    _V.DIFFERENT_LOAD: "measure again",
    _V.MEASURED_ONCE: "measure again",
    _V.NOT_MEASURED_AGAIN: "measure again",
    _V.MORE_CORES: "keep",
    _V.WITHIN_NOISE: "keep",
    _V.SLOWER: "keep",
    _V.SMALL_GAIN: "keep",
    _V.BASELINE_BEST: "keep",
    _V.NO_EFFECT: "keep",
    _V.TOO_BUSY: "measure again",
    _V.NO_RESULT: "",
}
FIRMER = (
    "measure again: autotune tune --resume --run-dir {run_dir} --confirm-rounds 6, "
    "with nothing else running on the machine"
)


@dataclass(frozen=True)
class StudyVerdict:
    """What a study claims of its best configuration against the baseline."""

    status: VerdictStatus = field(metadata=member_of(VerdictStatus))
    #: The headline speedup: the re-measured geometric mean when re-measured, else the search's.
    speedup: float | None
    speedup_ci95: tuple[float, float] | None
    search_speedup: float | None  # best / baseline throughput in the search (biased upward)
    rounds: int  # re-measured rounds with both runs ok
    #: Mean cores other processes kept busy during the search's baseline and best trials, and while
    #: re-measuring; and the band within which the two count as the same load.
    search_load_cores: float | None
    confirm_load_cores: float | None
    load_band_cores: float | None
    #: On a CPU: cores the best configuration's processes use over the baseline's (ranks x threads).
    cores_ratio: float | None
    per_core_speedup: float | None  # speedup / cores_ratio
    recommend: bool  # the configuration is to be applied (action "apply")
    headline: str  # one sentence, the same everywhere
    firmer: str  # what to run for a firmer answer ("" when confirmed)
    #: The search's ratio's 95% interval, with the spread between processes of the baseline.
    search_ci95: tuple[float, float] | None = None

    @property
    def action(self) -> str:
        """What to do: "apply", "keep" (the current settings) or "measure again" ("" without a result)."""
        return ACTIONS.get(self.status, "")

    @property
    def best_label(self) -> str:
        """What the study's top trial is called: the best only when it is to be applied."""
        return "Best" if self.action == "apply" else "Highest in the search"

    def to_dict(self) -> JsonObject:
        """summary.json's ``verdict`` (with its ``action``)."""
        out = asdict(self)
        out["speedup_ci95"] = list(self.speedup_ci95) if self.speedup_ci95 else None
        out["search_ci95"] = list(self.search_ci95) if self.search_ci95 else None
        out["action"] = self.action
        return out


def _scaled(load: float | None, over: int | None, machine: float | None) -> float | None:
    """A load measured over ``over`` cores (a trial's pinned slot) as the same share of the machine's."""
    if load is None or not over or not machine:
        return load
    return load * machine / over


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else None


def _cores(entry: TrialEntry, summary: TuningSummary) -> float | None:
    """Cores a trial's processes use on a CPU: its ranks times the study's threads per process."""
    if summary.device_kind not in (None, "cpu") or summary.threads_per_rank is None:
        return None
    return entry.world_size * summary.threads_per_rank


def _plain(value: float) -> str:
    """A ratio of cores for people: "2", "1.5" (two decimals at most, never an exponent)."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _x(value: float) -> str:
    return f"{value:.2f}×"


def study_verdict(summary: TuningSummary | Mapping[str, Any]) -> StudyVerdict:
    """The verdict of a tuning summary (summary.json of ``autotune tune``, as it stands)."""
    summary = TuningSummary.of(summary)
    best, base = summary.best, summary.baseline
    firmer = FIRMER.format(run_dir=summary.run_dir or "DIR")
    blank = StudyVerdict(_V.NO_RESULT, None, None, None, 0, None, None, None, None, None, False,
                         "no trial finished ok against a baseline", "")  # fmt: skip
    if summary.no_effect:
        return replace(blank, status=_V.NO_EFFECT, headline=(
            "no best: what the study tunes changed nothing (see why it stopped), so every trial measured "
            "the same configuration; keep the current settings"
        ))  # fmt: skip
    if best is None or base is None or not base.ok:
        return blank
    if best.id == base.id:
        searched = [t for t in summary.trials if not t.baseline and t.status != TrialStatus.SKIPPED]
        busy = sum(t.status == TrialStatus.BUSY for t in searched)
        if busy and busy == len(searched):
            again = (
                "measure again with a new study (another --run-dir) when the machine is calmer, or with a "
                "longer --calm-wait; a resumed study does not run its busy trials again"
            )
            return replace(blank, status=_V.TOO_BUSY, firmer=again, headline=(
                "no configuration measured: the machine was too busy to measure "
                f"{f'any of the {busy} trials' if busy != 1 else 'the one trial'} of the search (left out, "
                "never compared); keep the current settings until measured with the machine calmer"
            ))  # fmt: skip
        left = f"; {busy} more left out, the machine too busy to measure {'them' if busy != 1 else 'it'}"
        headline = "no configuration beat the baseline (the script's own settings were the best measured)"
        return replace(blank, status=_V.BASELINE_BEST, headline=headline + (left if busy else ""))
    search, search_ci = _finite(best.speedup_vs_baseline), best.speedup_vs_baseline_ci95
    rounds, geomean, ci = best.speedup_confirmation_rounds, _finite(best.speedup_geomean), best.speedup_ci95
    machine = summary.machine_cores
    confirmed = [c for c in summary.confirmations if c.status == TrialStatus.OK]
    confirm_load = _mean([_scaled(c.other_load_cores, c.load_cores, machine) for c in confirmed])
    search_load = _mean([_scaled(t.other_load_cores, t.load_cores, machine) for t in (best, base)])
    band = load_band_cores(summary.machine_cores)
    base_cores, best_cores = _cores(base, summary), _cores(best, summary)
    cores_ratio = best_cores / base_cores if base_cores and best_cores else None
    speedup = geomean if rounds and geomean is not None else search
    per_core = speedup / cores_ratio if speedup is not None and cores_ratio and cores_ratio != 1 else None
    figures = replace(
        blank, speedup=speedup, speedup_ci95=ci, search_speedup=search, rounds=rounds,
        search_load_cores=search_load, confirm_load_cores=confirm_load, load_band_cores=band,
        cores_ratio=cores_ratio, per_core_speedup=per_core, firmer=firmer, search_ci95=search_ci,
    )  # fmt: skip
    cores_note = ""
    if per_core is not None and cores_ratio is not None:
        cores_note = (
            f"; it uses {_plain(cores_ratio)}× the baseline's CPU cores, "
            f"so per core it is {_x(per_core)} the baseline"
        )
    in_search = _in_search(search, search_ci, summary)
    if rounds == 0 or geomean is None:
        headline = f"{in_search}, not measured again (a search's best is biased upward)"
        return replace(figures, status=_V.NOT_MEASURED_AGAIN, headline=headline + cores_note)
    if ci is None:
        headline = f"{_x(geomean)} when measured again once ({in_search}): no interval from one round"
        return replace(figures, status=_V.MEASURED_ONCE, headline=headline + cores_note)
    span = f"{_x(geomean)} (95% interval {ci[0]:.2f}–{ci[1]:.2f}×, {rounds} interleaved rounds)"
    if ci[1] < 1:
        status, headline = _V.SLOWER, f"slower when measured again: {span}; {in_search}"
    elif ci[0] <= 1:
        status, headline = _V.WITHIN_NOISE, f"within the noise: {span}; {in_search}"
    elif (
        band is not None
        and search_load is not None
        and confirm_load is not None
        and (abs(confirm_load - search_load) > band)
    ):
        status = _V.DIFFERENT_LOAD
        headline = (
            f"measured under different load: {span}, with other processes busy on {confirm_load:.1f} cores "
            f"against {search_load:.1f} during the search (band ±{band:.1f})"
        )
    elif per_core is not None and cores_ratio is not None and cores_ratio > 1 and per_core <= 1:
        # the baseline's processes had fewer cores (threads per process are the same in every
        # trial): the gain is the cores, which the script given all of them may take anyway
        return replace(figures, status=_V.MORE_CORES, headline=(
            f"faster only with more cores: {span}, with {_plain(cores_ratio)}× the baseline's CPU cores, "
            f"so per core {_x(per_core)} the baseline; the gain is the cores, not the configuration"
        ), firmer=(
            "compare with the baseline given every core (its own threads): autotune profile the script "
            "with OMP_NUM_THREADS set to the cores, then autotune compare it with the best trial"
        ))  # fmt: skip
    elif _gain(geomean, per_core, cores_ratio) <= APPLY_MIN_SPEEDUP:
        status = _V.SMALL_GAIN
        headline = (
            f"a gain too small to act on: {span}, at most {_x(APPLY_MIN_SPEEDUP)} "
            f"(what a change must gain); {in_search}"
        )
        return replace(figures, status=status, headline=headline + cores_note, firmer="")
    else:
        return replace(figures, status=_V.CONFIRMED, recommend=True,
                       headline=f"confirmed: {span}{cores_note}", firmer="")  # fmt: skip
    return replace(figures, status=status, headline=headline + cores_note)


def _gain(speedup: float, per_core: float | None, cores_ratio: float | None) -> float:
    """The gain a change must clear: per core when the best uses more cores than the baseline."""
    return per_core if per_core is not None and cores_ratio is not None and cores_ratio > 1 else speedup


def _in_search(search: float | None, ci: tuple[float, float] | None, summary: TuningSummary) -> str:
    """The search's ratio with its interval across processes: "2.12× in the search (95% ...)"."""
    if search is None:
        return "no speedup measured in the search"
    spread = summary.process_spread
    if ci is None or spread is None:
        return f"{_x(search)} in the search"
    return (
        f"{_x(search)} in the search (95% interval {ratio_span(ci)} with the spread between "
        f"{spread.processes} processes of the baseline)"
    )


def verdict_of(summary: TuningSummary | Mapping[str, Any]) -> StudyVerdict:
    """The verdict a summary.json stores (``verdict``), else computed from its figures (older studies)."""
    summary = TuningSummary.of(summary)
    # a figure stored as null stays None; one missing or of another type makes the record incomplete
    nulls = {key: None for key, value in summary.verdict.items() if value is None}
    stored = nulls | read_fields(StudyVerdict, summary.verdict)
    # one stored before the verdict had an action was decided by older rules (no threshold on the
    # re-measured gain, no between-process spread): derived again from its figures
    if stored.get("status") in VERDICTS and "action" in summary.verdict:
        try:
            return StudyVerdict(**stored)
        except TypeError:
            pass  # written by another version (a figure missing or of another type): derive it again
    return study_verdict(summary)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
