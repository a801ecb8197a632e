"""A tuning study's summary.json and its trial records, as the tuner writes them and every reader reads them.

:class:`TrialEntry` is one trial of a study (its ``trials``, ``best`` and ``baseline``), the one
record of a trial from the study's store to the dashboard (:meth:`TrialEntry.from_stored`); a
re-measurement or an anchor is a :class:`Confirmation`; the whole study a :class:`TuningSummary`.
Each is written by :func:`~profilers.contract.json_checks.record_json` and parsed back checked: an
entry without its id, an unknown status or a figure of the wrong type is one line naming the file,
the entry and the field. Entries also read as the JSON object they were parsed from
(``entry["speedup_vs_baseline"]``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from profilers.contract.fields import WITH_ABOVE, means
from profilers.contract.json_checks import (
    NOT_WRITTEN,
    JsonObject,
    ReadsAsItsJson,
    SummaryError,
    checked_fields,
    document,
    nested,
    nested_records,
    record_json,
    stored_as,
)
from profilers.contract.lenient import READERS, FieldMeta, member_of
from profilers.contract.schema import STATUSES, Params, TrialStatus
from profilers.contract.study.bill import StudyBill
from profilers.contract.study.spread import ProcessSpread


def _stored(part: str, name: str, more: FieldMeta | None = None) -> FieldMeta:
    """A trial entry field's metadata: where a study store's trial record holds it.

    ``part``: the record itself, its ``metrics`` or its ``attrs``; ``name``: its key there; ``more``:
    what else the field's metadata says.
    """
    return {"stored": (part, name), **(more or {})}


@dataclass(frozen=True)
class TrialEntry(ReadsAsItsJson):
    """One trial of a tuning summary, checked (see the module's doc).

    Written by the tuner as this record (:meth:`to_json`) and read back by :meth:`parse`; a field's
    metadata says where a study store's trial record holds it (:meth:`from_stored`, the one mapping
    of a stored trial to its entry). The fields without are worked out when the summary is written.
    """

    id: int = field(metadata=_stored("record", "id"))
    status: TrialStatus = field(metadata=_stored("record", "status", member_of(TrialStatus)))
    raw: JsonObject = field(repr=False, compare=False, metadata=NOT_WRITTEN)
    baseline: bool = False  # the run of the script's own defaults (no params)
    #: what the study set (empty for the baseline)
    params: Params = field(default_factory=dict, metadata=_stored("record", "params"))
    objective: float | None = field(default=None, metadata=_stored("record", "value"))
    #: samples/s, job-wide (summary.json's key: ``throughput``)
    samples_per_s: float | None = field(
        default=None, metadata=_stored("metrics", "samples_per_s", stored_as("throughput"))
    )
    tokens_per_s: float | None = field(default=None, metadata=_stored("metrics", "tokens_per_s"))
    peak_memory_bytes: int | None = field(default=None, metadata=_stored("metrics", "peak_memory_bytes"))
    step_time_s: float | None = field(default=None, metadata=_stored("metrics", "step_time_s"))
    #: at the study's price, when it had one
    usd_per_million_samples: float | None = field(
        default=None, metadata=_stored("metrics", "usd_per_million_samples")
    )
    #: the GPUs' energy over its samples (NVML)
    joules_per_sample: float | None = field(default=None, metadata=_stored("metrics", "joules_per_sample"))
    world_size: int = field(default=1, metadata=_stored("attrs", "world_size"))  # ranks it ran on
    duration_s: float | None = field(default=None, metadata=_stored("record", "duration_s"))  # wall time
    #: What running it cost the study: its wall time on its devices, and that at the study's price.
    device_hours: float | None = None
    cost_usd: float | None = None
    #: why its step budget ended it (stopping.STOP_REASONS)
    stop_reason: str | None = field(default=None, metadata=_stored("attrs", "stop_reason"))
    #: Stopped early as losing: the floor it fell below, "spread" or "share", and the trial it was
    #: measured against (autotune.tuner.early_stop).
    stop_floor_samples_per_s: float | None = field(default=None, metadata=_stored("attrs", "stop_floor"))
    stop_rule: str | None = field(default=None, metadata=_stored("attrs", "stop_rule"))
    stop_best_id: int | None = field(default=None, metadata=_stored("attrs", "stop_best_id"))
    #: samples/s; an open end is None
    throughput_ci95: tuple[float | None, float | None] | None = field(
        default=None, metadata=_stored("attrs", "throughput_ci95")
    )
    #: its steps' spread within the study's bound
    stable: bool | None = field(default=None, metadata=_stored("attrs", "stable"))
    #: other processes' CPU while it ran
    other_load_cores: float | None = field(default=None, metadata=_stored("attrs", "other_load_cores"))
    #: the cores other_load_cores is over (its slot's when pinned)
    load_cores: int | None = field(default=None, metadata=_stored("attrs", "load_cores"))
    #: share of its measured steps it ran short of CPU (contract.load)
    starved_share: float | None = field(default=None, metadata=_stored("attrs", "starved_share"))
    #: its first run's starved share, when that run was too busy to measure and it ran again once calmer
    busy_before: float | None = field(default=None, metadata=_stored("attrs", "busy_before"))
    threads_per_rank: int | None = field(default=None, metadata=_stored("attrs", "threads_per_rank"))
    #: what its model ran in, as the profiler saw it
    precision: str | None = field(default=None, metadata=_stored("attrs", "precision"))
    #: what its code read, with the values it used
    params_used: Params = field(default_factory=dict, metadata=_stored("attrs", "params_used"))
    #: relative to the study (schema.resolve_trial_dir)
    run_dir: str | None = field(default=None, metadata=_stored("attrs", "run_dir"))
    #: Where and when it ran: "local" or "ray", the host, its devices ("cuda:0", "cpu:1"), unix seconds.
    executor: str | None = field(default=None, metadata=_stored("attrs", "executor"))
    node: str | None = field(default=None, metadata=_stored("attrs", "node"))
    devices: str | None = field(default=None, metadata=_stored("attrs", "devices"))
    started_at: float | None = field(default=None, metadata=_stored("attrs", "started_at"))
    ended_at: float | None = field(default=None, metadata=_stored("attrs", "ended_at"))
    error: str | None = field(default=None, metadata=_stored("record", "error"))
    #: Its throughput over the nearest anchor's (a process of the baseline's configuration), in the
    #: search, and that ratio's 95% interval with the spread between processes (contract.study.spread).
    speedup_vs_baseline: float | None = None
    speedup_vs_baseline_ci95: tuple[float, float] | None = None
    anchor: int | None = None  # the anchor it was taken against (0: the baseline trial)

    @classmethod
    def parse(cls, data: Any, where: str) -> Self:
        """The entry ``data`` (a summary's dict), or SummaryError naming ``where`` and the field."""
        if not isinstance(data, dict):
            raise SummaryError(f"{where}: a trial entry must be an object, not {type(data).__name__}")
        trial_id = data.get("id")
        if not isinstance(trial_id, int) or isinstance(trial_id, bool) or trial_id < 0:
            raise SummaryError(f"{where}: a trial entry has no id (a whole number), found {trial_id!r}"[:300])
        where = f"{where}, trial {trial_id}"
        status = data.get("status")
        if status not in STATUSES:
            raise SummaryError(f"{where}: unknown status {status!r} (known: {', '.join(STATUSES)})"[:300])
        fields = checked_fields(cls, data, where, skip=("id", "status", "raw"))
        if not math.isfinite(fields.get("objective", 0.0)):
            del fields["objective"]
        return cls(id=trial_id, status=TrialStatus(status), raw=data, **fields)

    @classmethod
    def parse_optional(cls, data: Any, where: str) -> Self | None:
        """The entry ``data``, checked; None for null (a study with no best trial yet)."""
        return None if data is None else cls.parse(data, where)

    @classmethod
    def parse_list(cls, data: Any, where: str) -> tuple[TrialEntry, ...]:
        """A summary's ``trials``, each entry checked; SummaryError when it is not a list."""
        if not isinstance(data, list):
            raise SummaryError(f"{where}: a tuning summary without its list of trials")
        return tuple(cls.parse(t, where) for t in data)

    @classmethod
    def from_stored(cls, record: Any, where: str) -> TrialEntry:
        """A study store's trial record (the search library's ``Trial.to_dict``) as a summary's entry.

        Each field from where its metadata says the record holds it; the figures worked out when a
        summary is written (speedups, the bill) are not in a record and stay unset. What a study's
        run.db holds before its summary.json lists the trial (the dashboard follows a study from its
        first trial), and what the tuner's summary starts each entry from. The store is the
        project's own, read leniently as the tuner reads it (``TrialFacts``): a figure of another
        type (an older version's) reads as missing, so one odd value never stops a study or hides
        its trials; SummaryError naming ``where`` only for a record without its id or status.
        """
        if not isinstance(record, dict):
            raise SummaryError(f"{where}: a trial record must be an object, not {type(record).__name__}")
        parts: dict[str, dict[str, Any]] = {"record": record}
        for part in ("metrics", "attrs"):
            parts[part] = record[part] if isinstance(record.get(part), dict) else {}
        entry: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if "stored" not in f.metadata:
                continue
            part, key = f.metadata["stored"]
            value = parts[part].get(key)
            if f.name not in ("id", "status") and value is not None:
                value = READERS[str(f.type)](value)  # None when of another type
            entry[f.metadata.get("key") or f.name] = value
        entry["baseline"] = not record.get("params")  # as stored: an odd value left out is still a setting
        return cls.parse(entry, where)

    def to_json(self) -> JsonObject:
        """The entry as summary.json holds it (:func:`json_checks.document`)."""
        return document(self)

    @property
    def ok(self) -> bool:
        """The trial ran and measured its objective."""
        return self.status == TrialStatus.OK


@dataclass(frozen=True)
class BestEntry(TrialEntry):
    """A tuning summary's ``best``: its trial entry with what comparing it to the baseline found."""

    cost_saving_vs_baseline: float | None = None  # 0-1, per sample at the study's price, in the search
    #: The best trial's re-measurement against the baseline (autotune.tuner.confirm.Verdict).
    speedup_confirmation_rounds: int = 0
    speedup_ratios: tuple[float | None, ...] | None = None  # best over baseline, per round
    speedup_geomean: float | None = None
    speedup_ci95: tuple[float, float] | None = None
    confirmed: bool | None = None  # the interval's low end is above 1


@dataclass(frozen=True)
class Confirmation:
    """One run of the baseline's or the best's configuration outside the search's trials.

    A re-measurement of the baseline or of the best trial ``best_id``, in round ``round`` (summary.json's
    ``confirmations``); or an anchor (``role`` "anchor", summary.json's ``anchors``): the baseline's
    configuration run during the search, ``round`` its index (1, 2...; the baseline trial is anchor
    0) and ``best_id`` the trial whose slot it ran in. The study store keeps the same record.
    """

    best_id: int = 0  # the best trial this round re-measures against the baseline
    round: int = 0  # 0-based
    role: str = ""  # "baseline", "best" or "anchor"
    #: how the run ended (one written without its status reads as crashed: never compared)
    status: TrialStatus = field(default=TrialStatus.CRASHED, metadata=member_of(TrialStatus))
    samples_per_s: float | None = None
    samples_per_s_ci95: tuple[float | None, float | None] | None = None
    other_load_cores: float | None = None
    duration_s: float | None = None  # its wall time (the study's bill counts it)
    run_dir: str | None = None  # relative to the study
    error: str | None = None
    started_at: float | None = None  # unix seconds (None in studies from before it was kept)
    ended_at: float | None = None
    executor: str | None = None  # where it ran: "local" or "ray", the host, its devices
    node: str | None = None
    devices: str | None = None
    load_cores: int | None = None  # the cores other_load_cores is over (its own when pinned)
    starved_share: float | None = None  # share of its measured steps it ran short of CPU
    busy_before: float | None = None  # its first run's starved share, when it ran again once calmer

    @classmethod
    def parse(cls, data: Any, where: str) -> Confirmation:
        """The record ``data`` (a JSON object), or SummaryError naming ``where`` and the field."""
        return cls(**checked_fields(cls, data, where))

    def to_json(self) -> JsonObject:
        """The JSON object :meth:`parse` reads (summary.json and the study store)."""
        return record_json(self)


@dataclass(frozen=True)
class PriorCheck:
    """One trial's predicted objective beside its measurement (``search_prior.predicted_vs_measured``)."""

    trial: int = 0
    predicted: float | None = None
    measured: float | None = None

    @property
    def error(self) -> float | None:
        """``|predicted / measured - 1|``: how far off the prediction was; None when either is missing."""
        if self.predicted is None or not self.measured:
            return None
        return abs(self.predicted / self.measured - 1)


@dataclass(frozen=True)
class PriorPrediction:
    """One configuration the plan scored for the search (``search_prior.predicted``)."""

    params: Params = field(default_factory=dict)
    predicted: float | None = None  # the objective predicted for it


@dataclass(frozen=True)
class SearchPrior:
    """How the plan ordered the search (summary.json's ``search_prior``, absent without a plan prior)."""

    note: str = ""  # which costs were used, or why there is no prior
    used: bool = False  # whether the search started from the prior
    #: Each ok trial's prediction beside its measurement.
    checks: tuple[PriorCheck, ...] = field(
        default=(), metadata=nested_records(PriorCheck, "predicted_vs_measured")
    )
    #: The configurations the search scored, best predicted first (the first 100).
    predicted: tuple[PriorPrediction, ...] = field(default=(), metadata=nested_records(PriorPrediction))

    @classmethod
    def parse(cls, data: Any, where: str) -> SearchPrior | None:
        """The block ``data`` (None when absent), or SummaryError naming ``where`` and the field."""
        return None if data is None else cls(**checked_fields(cls, data, where))

    def median_error(self) -> tuple[float, int] | None:
        """The median of the checks' errors (:attr:`PriorCheck.error`) and how many had one."""
        errors = sorted(e for c in self.checks if (e := c.error) is not None)
        return (errors[len(errors) // 2], len(errors)) if errors else None


def _spread(data: Any, where: str) -> ProcessSpread | None:
    """``process_spread``, checked; None when missing."""
    return ProcessSpread(**checked_fields(ProcessSpread, data, where)) if data else None


def _bill(data: Any, where: str) -> StudyBill | None:
    """``bill``, checked; None when missing (a study from before it was kept)."""
    return StudyBill.parse(data, where)


@dataclass(frozen=True)
class StudyThreads:
    """A tuning summary's ``threads``: what the trials trained on, and each rank's threads on a CPU."""

    threads_per_rank: int | None = None
    device_kind: str | None = None  # "cuda" or "cpu"

    @classmethod
    def parse(cls, data: Any, where: str) -> StudyThreads:
        """The block ``data`` (a missing one reads as unknown), or SummaryError naming ``where``."""
        return cls(**checked_fields(cls, data, where)) if data is not None else cls()


@dataclass(frozen=True)
class TuningSummary:
    """A tuning study's summary.json: its trials, best and baseline checked (``raw``: the whole).

    The tuner writes the summary as this record (:meth:`to_json`), as every reader reads it; its
    fields are summary.json's keys in the order written, each saying what it means (its metadata's
    :func:`~profilers.contract.fields.means`: the reference page is made from it).
    """

    #: The JSON object it was parsed from (empty for one built in code).
    raw: JsonObject = field(default_factory=dict, repr=False, compare=False, metadata=NOT_WRITTEN)
    # the layout's version (schema.TUNE_SUMMARY_SCHEMA)
    schema: int | None = field(default=None, metadata=means("layout version of the tuning summary (1)"))
    kind: str = field(default="tune", metadata=means("`tune`"))
    run_dir: str | None = field(default=None, metadata=means("the study's directory, as given to the tuner"))
    command: tuple[str, ...] = field(default=(), metadata=means("the script and its arguments"))
    objective: str | None = field(
        default=None,
        metadata=means(
            "`throughput`/`cost`/`energy` and its metric: `samples_per_s`, "
            "`usd_per_million_samples`, `joules_per_sample`"
        ),
    )
    # the trial figure the objective reads
    metric: str = field(default="samples_per_s", metadata=WITH_ABOVE)
    direction: str = field(default="maximize", metadata=means("`maximize` or `minimize`"))
    # USD
    price_per_gpu_hour: float | None = field(default=None, metadata=means("the price given, or null"))
    memory_budget_bytes: int | None = field(
        default=None, metadata=means("`--memory-budget` in bytes, or null")
    )
    loss_tolerance: float | None = field(
        default=None,
        metadata=means(
            "`--loss-tolerance`: how far (a fraction) a reduced-precision trial's loss may "
            "drift from the fp32 baseline's"
        ),
    )
    searcher: str | None = field(default=None, metadata=means("the search"))
    seed: int | None = field(default=None, metadata=WITH_ABOVE)
    # parameter name -> its definition
    space: JsonObject = field(default_factory=dict, metadata=means("the search space as its TOML tables"))
    n_trials: int | None = field(
        default=None, metadata=means("the trials asked for, and those that ran (skipped ones are not)")
    )
    trials_run: int | None = field(default=None, metadata=WITH_ABOVE)
    # trial status -> how many
    status_counts: dict[str, int] = field(default_factory=dict, metadata=means("trials per status"))
    baseline: TrialEntry | None = field(
        default=None,
        metadata={
            **nested(TrialEntry.parse_optional),
            **means("trial 0, the script's own defaults (a trial entry)"),
        },
    )
    best: BestEntry | None = field(
        default=None,
        metadata={
            **nested(BestEntry.parse_optional),
            **means(
                "the best trial (a trial entry; null when none can be named, as with `no_effect`)"
                " with `cost_saving_vs_baseline` (1 − its cost over the baseline's, with a "
                "price), then from the re-measurements: `speedup_confirmation_rounds` (rounds "
                "with both runs ok), `speedup_ratios` (best over baseline, per round), "
                "`speedup_geomean`, `speedup_ci95` ([low, high], 2 rounds or more, else null) and"
                " `confirmed` (true when the low end is above 1)"
            ),
        },
    )
    confirm_rounds: int | None = field(default=None, metadata=means("`--confirm-rounds`"))
    preset: str | None = field(
        default=None,
        metadata=means(
            "`--preset` (`hf`, `lightning`, `torchtitan`) or null, and the samples per rank "
            "per optimizer step its baseline measured, which every trial keeps (null without "
            "a preset)"
        ),
    )
    # ranks a preset's trial runs per node
    preset_per_rank: int | None = field(default=None, metadata=WITH_ABOVE)
    #: The best trial's re-measurements.
    confirmations: tuple[Confirmation, ...] = field(
        default=(),
        metadata={
            **nested_records(Confirmation),
            **means(
                "the re-measurements of the best trial: `best_id`, `round`, `role` (`baseline` or"
                " `best`), `status`, `samples_per_s`, `samples_per_s_ci95`, `other_load_cores`, "
                "`duration_s`, `run_dir`, `error`, `started_at`, `ended_at`, `load_cores` and "
                "where it ran (`executor`, `node`, `devices`)"
            ),
        },
    )
    # trial ids (with --multi-objective)
    pareto: tuple[int, ...] | None = field(
        default=None,
        metadata=means(
            "with `--multi-objective`: ids of the trials no other beats on throughput, peak "
            "memory and cost at once; else null"
        ),
    )
    # why the study stopped before its trials ran (None: it did not)
    stopped: str | None = field(
        default=None, metadata=means("why the study stopped before its trials ran, or null")
    )
    # as stored (verdict.verdict_of reads it)
    verdict: JsonObject = field(
        default_factory=dict,
        metadata=means(
            "the study's one verdict (above): `status`, `speedup` (the headline figure), "
            "`speedup_ci95`, `search_speedup`, `rounds`, `search_load_cores`, "
            "`confirm_load_cores`, `load_band_cores`, `cores_ratio`, `per_core_speedup`, "
            "`recommend`, `headline` (the sentence every output prints), `firmer` (what to "
            "run for a firmer answer), `search_ci95` (the search's ratio's interval across "
            "processes) and `action` (`apply`, `keep` or `measure again`)"
        ),
    )
    # this machine's cores, for the load band
    machine_cores: float | None = field(
        default=None,
        metadata=means(
            "the machine's cores, and `threads_per_rank` (every trial's) with the "
            "`device_kind` the baseline ran on"
        ),
    )
    #: What the trials trained on, and the threads each trial's processes were given (on a CPU).
    threads: StudyThreads = field(
        default_factory=StudyThreads, metadata={**nested(StudyThreads.parse), **WITH_ABOVE}
    )
    #: The plan prior's note and its checks.
    search_prior: SearchPrior | None = field(
        default=None,
        metadata={
            **nested(SearchPrior.parse),
            **means(
                "null with `--no-plan-prior`; else `note` (`plan prior: this CPU's probed costs`,"
                " `plan prior: H100-SXM`, or why there is none, also printed once), `used` (false"
                " when no prior could be made, e.g. none of the configurations could be traced), "
                "`predicted` (the configurations the search scored, best predicted first, at most"
                " 100: `params`, `predicted` in the objective's unit, scaled to the baseline's "
                "measurement) and `predicted_vs_measured` (`trial`, `predicted`, `measured` of "
                "each trial that finished ok)",
                always=False,
            ),
        },
    )
    trials: tuple[TrialEntry, ...] = field(
        default=(),
        metadata={
            **nested(TrialEntry.parse_list),
            **means(
                "every trial: `id`, `baseline`, `params`, `status`, `objective`, `throughput` "
                "(samples/s), `tokens_per_s`, `peak_memory_bytes`, `step_time_s`, "
                "`usd_per_million_samples`, `joules_per_sample`, `world_size`, `duration_s`, "
                "`device_hours` and `cost_usd` (what running it cost the study: its wall time on "
                "its devices, at the bill's price; 0 for a skipped trial), `stop_reason`, "
                "`stop_floor_samples_per_s`, `stop_rule` and `stop_best_id` (a trial stopped "
                "early as losing: the floor its throughput's upper bound fell below, `spread` "
                "when set from trial `stop_best_id`'s lower bound less the spread between "
                "processes, `share` when set as `--early-stop` × its value before that spread was"
                " measured), `throughput_ci95` (its 95% interval), `stable`, `other_load_cores` "
                "(other processes' CPU while it measured, in cores), `load_cores` (the cores that"
                " figure is over: the trial's slot when `--parallel` pinned it, else the "
                "machine's), `starved_share` (the share of its measured steps it ran short of "
                "CPU: no idle core, its own CPU below 3/4 of what its threads could use; over "
                "half of them makes the trial `busy`: measured again once the machine is calmer, "
                "else left out), `busy_before` (the first run's starved share when it ran again),"
                " `threads_per_rank`, `precision` (what the profiler saw the model run in), "
                "`params_used`, `run_dir` (the trial's profile run, relative to the study's "
                "directory: `trials/trial-0005`; studies written before stored the path as given "
                "to the tuner, and are still read), `error`; and where it ran: `executor` "
                "(`local` or `ray`), `node`, `devices` (`cuda:N` or `cpu:N` slots), `started_at`,"
                " `ended_at` (Unix seconds); and `speedup_vs_baseline` (its throughput over the "
                "nearest anchor's, as the search measured it), `speedup_vs_baseline_ci95` (its "
                "95% interval with the spread between the baseline's processes; null with one) "
                "and `anchor` (that anchor's index, 0 for the baseline trial)"
            ),
        },
    )
    #: The study stopped because what it tunes changes nothing (a knob never read): no best is named.
    no_effect: bool = field(
        default=False,
        metadata=means(
            "true when the study stopped because what it tunes changed nothing (a parameter "
            "the script never reads): `best` is then null and the verdict is `no_effect`"
        ),
    )
    # the baseline runs again before every this many search trials
    anchor_every: int | None = field(
        default=None,
        metadata=means(
            "`--anchor-every`, and the baseline's configuration run again during the search, "
            "each in the slot of the trial it preceded: `best_id` (that trial), `round` (the "
            "anchor's index from 1), `role` (`anchor`), `status`, `samples_per_s`, "
            "`samples_per_s_ci95`, `other_load_cores`, `duration_s`, `run_dir`, `error`, "
            "`started_at`, `ended_at`, `executor`, `node`, `devices`, `load_cores`"
        ),
    )
    #: The baseline's configuration run again during the search (``round``: the anchor's index).
    anchors: tuple[Confirmation, ...] = field(
        default=(), metadata={**nested_records(Confirmation), **WITH_ABOVE}
    )
    #: The baseline's throughput over its separate processes (None in studies from before anchors).
    process_spread: ProcessSpread | None = field(
        default=None,
        metadata={
            **nested(_spread),
            **means(
                "the baseline's throughput over its separate processes (the baseline trial and "
                "the anchors that finished ok): `processes`, `low_samples_per_s`, "
                "`high_samples_per_s`, `log_sd` (sd of their log throughputs; null with one) and "
                "`beyond_own_intervals` (two of them disagree beyond their own 95% intervals: the"
                " machine's speed moved)"
            ),
        },
    )
    #: Hours a day the team trains, as said to the study (--usage-hours-per-day; None: not said).
    usage_hours_per_day: float | None = field(
        default=None,
        metadata=means(
            "`--usage-hours-per-day` (null: not said), and what the study cost and when it "
            "pays back: `device_hours` (every trial, anchor and re-measurement, each its wall"
            " time on its devices), `trials_device_hours`, `remeasure_device_hours`, "
            "`processes`, `processes_without_time`, `price_per_gpu_hour` and `price_source` "
            "(`--price-per-gpu-hour`, else the built-in table's price of the baseline's GPU; "
            "null on a CPU), `usd`, `saving_share` (the share of the baseline's device-time "
            "per sample the best saves: 1 − devices ratio / the verdict's speedup; below 0 "
            "when it costs more, faster only on more devices; null unless the verdict applies"
            " it), `saving_device_hours_per_hour` (per hour of training), "
            "`saving_usd_per_day` (at the usage, 24 h when not said), "
            "`payback_training_hours`, `payback_days` (at the usage said) and "
            "`pays_back_in_month`"
        ),
    )
    #: What the study cost and when it pays back, as written (contract.study.cost.study_bill).
    bill: StudyBill | None = field(default=None, metadata={**nested(_bill), **WITH_ABOVE})
    # trials of the search at once (None in studies from before it was kept)
    parallel: int | None = field(
        default=None,
        metadata=means(
            "trials of the search that could run at once (as the study settled it: never more"
            " than the CPU's cores), and `local` or `ray`"
        ),
    )
    # "local" or "ray"
    executor: str | None = field(default=None, metadata=WITH_ABOVE)

    @classmethod
    def of(cls, summary: TuningSummary | Mapping[str, Any], where: str = "summary.json") -> TuningSummary:
        """``summary`` as the record: itself, or summary.json's dict parsed (SummaryError, one line)."""
        return summary if isinstance(summary, TuningSummary) else cls.parse(dict(summary), where)

    @property
    def device_kind(self) -> str | None:
        """What the trials trained on, "cuda" or "cpu" (None when not known)."""
        return self.threads.device_kind

    @property
    def threads_per_rank(self) -> int | None:
        """Threads each trial's processes were given (on a CPU; None: not set)."""
        return self.threads.threads_per_rank

    def to_json(self) -> JsonObject:
        """The summary as summary.json holds it (:func:`json_checks.document`)."""
        return document(self)

    def anchor_rate(self, entry: TrialEntry) -> float | None:
        """The samples/s of the anchor ``entry``'s search ratio was taken against (0: the baseline)."""
        if not entry.anchor:
            return self.baseline.samples_per_s if self.baseline is not None else None
        return next((a.samples_per_s for a in self.anchors if a.round == entry.anchor), None)

    @classmethod
    def parse(cls, data: JsonObject, where: str) -> TuningSummary:
        """The summary ``data`` of a study, or SummaryError (one line naming ``where``)."""
        return cls(raw=data, **checked_fields(cls, data, where, skip=("raw",)))


__all__ = [
    "BestEntry",
    "Confirmation",
    "PriorCheck",
    "PriorPrediction",
    "SearchPrior",
    "StudyThreads",
    "TrialEntry",
    "TuningSummary",
]
