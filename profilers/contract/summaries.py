"""summary.json, parsed once: typed profile summaries and trial entries, every figure checked.

A summary that is not what this version writes (a figure of the wrong type, a trial entry without
its id, an unknown status) is refused where it is read, with one line naming the file, the entry and
the field, instead of a traceback deep in a report or the dashboard.

:class:`TrialEntry` is one trial of a tuning summary's ``trials`` (and its ``best``/``baseline``):
typed attributes for what the layers decide on, and read-only mapping access to the whole entry
(every key the tuner wrote, ``entry["speedup_vs_baseline"]``, ``entry.get(...)``), so it goes where
summary.json's dict went.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from profilers.contract.bill import StudyBill
from profilers.contract.figures import (
    DeviceEntry,
    Envelope,
    LossFigures,
    MemoryFigures,
    ModelFacts,
    ProfileWindow,
    RankEntry,
    RunError,
    SeenFacts,
    StepTimes,
    Throughput,
    TopOp,
)
from profilers.contract.json_checks import (
    DEFAULT_AS_NULL,
    NOT_WRITTEN,
    WHEN_SET,
    SummaryError,
    checked_fields,
    checked_object,
    document,
    is_number,
    nested,
    nested_records,
    optional_int,
    record_json,
    stored_as,
)
from profilers.contract.lenient import READERS, member_of
from profilers.contract.load import LoadFigures, RunLoad
from profilers.contract.schema import PHASES, SCHEMA_VERSION, STATUSES, TrialStatus
from profilers.contract.spread import ProcessSpread


class _ReadsAsItsDict(Mapping[str, Any]):
    """Read-only mapping access to a record's JSON object.

    The object it was parsed from (its ``raw``, a newer writer's keys kept), or for a record built
    in code, the one it writes.
    """

    raw: dict[str, Any]

    @functools.cached_property
    def _json(self) -> dict[str, Any]:
        return document(self)

    def __getitem__(self, key: str) -> Any:
        return self._json[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._json)

    def __len__(self) -> int:
        return len(self._json)

    def to_json(self) -> dict[str, Any]:
        """The record's JSON object (see the class)."""
        return dict(self._json)


def _stored(part: str, name: str, **more: Any) -> dict[str, Any]:
    """A trial entry field's metadata: where a study store's trial record holds it.

    ``part``: the record itself, its ``metrics`` or its ``attrs``; ``name``: its key there.
    """
    return {"stored": (part, name), **more}


@dataclass(frozen=True)
class TrialEntry(_ReadsAsItsDict):
    """One trial of a tuning summary, checked (see the module's doc).

    Written by the tuner as this record (:meth:`to_json`) and read back by :meth:`parse`; a field's
    metadata says where a study store's trial record holds it (:meth:`from_stored`, the one mapping
    of a stored trial to its entry). The fields without are worked out when the summary is written.
    """

    id: int = field(metadata=_stored("record", "id"))
    status: TrialStatus = field(metadata=_stored("record", "status", **member_of(TrialStatus)))
    raw: dict[str, Any] = field(repr=False, compare=False, metadata=NOT_WRITTEN)
    baseline: bool = False  # the run of the script's own defaults (no params)
    #: what the study set (empty for the baseline)
    params: dict[str, Any] = field(default_factory=dict, metadata=_stored("record", "params"))
    objective: float | None = field(default=None, metadata=_stored("record", "value"))
    #: samples/s, job-wide (summary.json's key: ``throughput``)
    samples_per_s: float | None = field(
        default=None, metadata=_stored("metrics", "samples_per_s", **stored_as("throughput"))
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
    params_used: dict[str, Any] = field(default_factory=dict, metadata=_stored("attrs", "params_used"))
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
    #: search, and that ratio's 95% interval with the spread between processes (contract.spread).
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
        entry["baseline"] = not entry["params"]
        return cls.parse(entry, where)

    def to_json(self) -> dict[str, Any]:
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

    def to_json(self) -> dict[str, Any]:
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
class SearchPrior:
    """How the plan ordered the search (summary.json's ``search_prior``, absent without a plan prior)."""

    note: str = ""  # which costs were used, or why there is no prior
    used: bool = False  # whether the search started from the prior
    #: Each ok trial's prediction beside its measurement.
    checks: tuple[PriorCheck, ...] = field(
        default=(), metadata=nested_records(PriorCheck, "predicted_vs_measured")
    )
    #: The configurations the search scored, best predicted first (the first 100), as written.
    predicted: list[Any] = field(default_factory=list)

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
    fields are summary.json's keys in the order written (``profilers.contract.fields`` says what each
    means).
    """

    #: The JSON object it was parsed from (empty for one built in code).
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=NOT_WRITTEN)
    schema: int | None = None  # the layout's version (schema.TUNE_SUMMARY_SCHEMA)
    kind: str = "tune"
    run_dir: str | None = None
    command: tuple[str, ...] = ()  # the script and its arguments
    objective: str | None = None  # "throughput", "cost", "energy"…
    metric: str = "samples_per_s"  # the trial figure the objective reads
    direction: str = "maximize"
    price_per_gpu_hour: float | None = None  # USD
    memory_budget_bytes: int | None = None
    loss_tolerance: float | None = None  # --loss-tolerance, a fraction of the baseline's loss
    searcher: str | None = None
    seed: int | None = None
    space: dict[str, Any] = field(default_factory=dict)  # parameter name -> its definition
    n_trials: int | None = None  # asked for
    trials_run: int | None = None
    status_counts: dict[str, int] = field(default_factory=dict)  # trial status -> how many
    baseline: TrialEntry | None = field(default=None, metadata=nested(TrialEntry.parse_optional))
    best: BestEntry | None = field(default=None, metadata=nested(BestEntry.parse_optional))
    confirm_rounds: int | None = None  # rounds of re-measurement asked for (--confirm-rounds)
    preset: str | None = None  # the framework preset whose flags the trials got
    preset_per_rank: int | None = None  # ranks a preset's trial runs per node
    #: The best trial's re-measurements.
    confirmations: tuple[Confirmation, ...] = field(default=(), metadata=nested_records(Confirmation))
    pareto: tuple[int, ...] | None = None  # trial ids (with --multi-objective)
    stopped: str | None = None  # why the study stopped before its trials ran (None: it did not)
    verdict: dict[str, Any] = field(default_factory=dict)  # as stored (verdict.verdict_of reads it)
    machine_cores: float | None = None  # this machine's cores, for the load band
    #: What the trials trained on, and the threads each trial's processes were given (on a CPU).
    threads: StudyThreads = field(default_factory=StudyThreads, metadata=nested(StudyThreads.parse))
    #: The plan prior's note and its checks.
    search_prior: SearchPrior | None = field(default=None, metadata=nested(SearchPrior.parse))
    trials: tuple[TrialEntry, ...] = field(default=(), metadata=nested(TrialEntry.parse_list))
    #: The study stopped because what it tunes changes nothing (a knob never read): no best is named.
    no_effect: bool = False
    anchor_every: int | None = None  # the baseline runs again before every this many search trials
    #: The baseline's configuration run again during the search (``round``: the anchor's index).
    anchors: tuple[Confirmation, ...] = field(default=(), metadata=nested_records(Confirmation))
    #: The baseline's throughput over its separate processes (None in studies from before anchors).
    process_spread: ProcessSpread | None = field(default=None, metadata=nested(_spread))
    #: Hours a day the team trains, as said to the study (--usage-hours-per-day; None: not said).
    usage_hours_per_day: float | None = None
    #: What the study cost and when it pays back, as written (contract.study_cost.study_bill).
    bill: StudyBill | None = field(default=None, metadata=nested(_bill))
    parallel: int | None = None  # trials of the search at once (None in studies from before it was kept)
    executor: str | None = None  # "local" or "ray"

    @classmethod
    def of(cls, summary: TuningSummary | Mapping[str, Any], where: str = "summary.json") -> TuningSummary:
        """``summary`` as the record: itself, or summary.json's dict parsed (SummaryError, one line)."""
        return summary if isinstance(summary, TuningSummary) else cls.parse(dict(summary), where)

    @property
    def device_kind(self) -> str | None:
        """"cuda" or "cpu": what the trials trained on (None when not known)."""
        return self.threads.device_kind

    @property
    def threads_per_rank(self) -> int | None:
        """Threads each trial's processes were given (on a CPU; None: not set)."""
        return self.threads.threads_per_rank

    def to_json(self) -> dict[str, Any]:
        """The summary as summary.json holds it (:func:`json_checks.document`)."""
        return document(self)

    def anchor_rate(self, entry: TrialEntry) -> float | None:
        """The samples/s of the anchor ``entry``'s search ratio was taken against (0: the baseline)."""
        if not entry.anchor:
            return self.baseline.samples_per_s if self.baseline is not None else None
        return next((a.samples_per_s for a in self.anchors if a.round == entry.anchor), None)

    @classmethod
    def parse(cls, data: dict[str, Any], where: str) -> TuningSummary:
        """The summary ``data`` of a study, or SummaryError (one line naming ``where``)."""
        return cls(raw=data, **checked_fields(cls, data, where, skip=("raw",)))


@dataclass(frozen=True)
class UtilFigures:
    """NVML utilisation of one GPU over the summary's span (``util_pct``), in percent."""

    mean: float | None = None
    readings: int | None = None  # None in summaries from before it was recorded
    p5: float | None = None
    p50: float | None = None
    p95: float | None = None
    min: float | None = None
    max: float | None = None

    @classmethod
    def parse(cls, data: Any, where: str) -> UtilFigures | None:
        """``util_pct`` (named by ``where``), checked; None when missing or empty."""
        return cls(**checked_fields(cls, data, where)) if data else None


@dataclass(frozen=True)
class ThrottleFigures:
    """How often each clocks-event reason was set (``throttle``; summarize.throttle_shares)."""

    readings: int = 0
    power_thermal_share: float = 0.0  # 0-1
    reason_shares: dict[str, float] = field(default_factory=dict)  # reason name -> 0-1

    @classmethod
    def parse(cls, data: Any, where: str) -> ThrottleFigures | None:
        """``throttle`` (named by ``where``), checked; None when missing or empty."""
        return cls(**checked_fields(cls, data, where)) if data else None


def _reason_names(value: Any, where: str) -> tuple[str, ...]:
    """``throttle_reasons``: a list of names (older summaries: one name, or NVML's bitmask)."""
    if not value:
        return ()
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    return (str(value),)


@dataclass(frozen=True)
class GpuFigures:
    """One GPU's entry of a profile summary's ``gpu`` list (summarize.gpu_aggregates)."""

    index: int
    name: str | None = None
    samples: int = 0
    #: The readings the rates cover: "measured_steps", or "session" when fewer than 2 fell inside.
    span: str | None = None
    duration_s: float | None = None  # the span its readings cover (energy_j is over it)
    util: UtilFigures | None = field(default=None, metadata=nested(UtilFigures.parse, "util_pct"))
    mem_used_bytes_max: int | None = None
    mem_total_bytes: int | None = None
    process_mem_bytes_max: int | None = None
    mem_busy_pct_mean: float | None = None
    power_w_mean: float | None = None
    power_w_max: float | None = None
    energy_j: float | None = None
    run_energy_j: float | None = None  # over the whole session
    sm_clock_mhz_mean: float | None = None
    mem_clock_mhz_mean: float | None = None
    temperature_c_max: float | None = None
    #: The reasons seen set (names), over the whole session.
    throttle_reasons: tuple[str, ...] = field(default=(), metadata=nested(_reason_names))
    throttle: ThrottleFigures | None = field(default=None, metadata=nested(ThrottleFigures.parse))
    mem_used_envelope: Envelope | None = field(default=None, metadata=nested(Envelope.parse))
    pcie_rx_kbps_mean: float | None = None
    pcie_tx_kbps_mean: float | None = None

    @classmethod
    def parse(cls, data: Any, where: str) -> GpuFigures:
        """The entry ``data``, or SummaryError naming ``where`` and the field."""
        if not isinstance(data, dict) or not isinstance(data.get("index"), int):
            raise SummaryError(f"{where}: a GPU entry must be an object with its index, not {data!r}"[:300])
        return cls(**checked_fields(cls, data, f"{where}[{data['index']}]"))

    @classmethod
    def parse_list(cls, data: Any, where: str) -> tuple[GpuFigures, ...]:
        """A profile summary's ``gpu`` list (named by ``where``), each entry checked."""
        if data is not None and not isinstance(data, list):
            raise SummaryError(f"{where} must be a list or null, not {type(data).__name__}")
        return tuple(cls.parse(g, where) for g in data or ())


@dataclass(frozen=True)
class HostFigures:
    """A profile summary's ``host`` entry (summarize.host_aggregates): this rank's process and host."""

    samples: int = 0
    cpu_util_pct_mean: float | None = None
    process_cpu_pct_mean: float | None = None  # this process and its children, % of one core
    rss_peak_bytes: int | None = None
    host_mem_total_bytes: int | None = None
    rss_envelope: Envelope | None = field(default=None, metadata=nested(Envelope.parse))

    @classmethod
    def parse(cls, data: Any, where: str) -> HostFigures | None:
        """The entry ``data`` (None stays None), or SummaryError naming ``where`` and the field."""
        return None if data is None else cls(**checked_fields(cls, data, where))


def _phases(data: Any, where: str) -> dict[str, float]:
    """``phases``: each phase's share of the step (other keys, such as ``bins``, left out)."""
    shares = {}
    for name, value in checked_object(data, where).items():
        if is_number(value):
            shares[name] = float(value)
        elif name in PHASES and value is not None:
            raise SummaryError(f"{where}.{name} must be a number or null, not {value!r}"[:300])
    return shares


def _load_ranks(data: Any, where: str) -> int | None:
    return optional_int(checked_object(data, where), "ranks", where)


_NULL = DEFAULT_AS_NULL


def _or_null(parse: Callable[[Any, str], Any], key: str | None = None) -> dict[str, Any]:
    """A part read by ``parse`` and written as null when it holds its default (not measured)."""
    return {**nested(parse, key), **_NULL}


@dataclass(frozen=True)
class SamplesSource:
    """``samples_from``: how a step's samples were counted: the override given, or the model input."""

    override: int | None = field(default=None, metadata=WHEN_SET)  # --samples-per-step
    module: str | None = field(default=None, metadata=WHEN_SET)  # the class whose input counted them
    input: str | None = field(default=None, metadata=WHEN_SET)  # which input ("args[0]", "input_ids")
    batch_dim: int | None = field(default=None, metadata=WHEN_SET)
    shape: tuple[int, ...] | None = field(default=None, metadata=WHEN_SET)  # its shape when first seen
    tokens: bool | None = field(default=None, metadata=WHEN_SET)  # it held token ids

    @classmethod
    def parse(cls, data: Any, where: str) -> SamplesSource | None:
        """``samples_from`` (named by ``where``), checked; None when not known."""
        return None if data is None else cls(**checked_fields(cls, data, where))


@dataclass(frozen=True)
class SamplingFacts:
    """``sampling``: where each sampling backend ran at the end, and why not in the sampler process."""

    where: dict[str, str] = field(default_factory=dict)  # backend -> "sampler process" / "training process"
    notes: tuple[str, ...] = ()

    @classmethod
    def parse(cls, data: Any, where: str) -> SamplingFacts | None:
        """``sampling`` (named by ``where``), checked; None when nothing was sampled."""
        return None if data is None else cls(**checked_fields(cls, data, where))


@dataclass(frozen=True)
class ProfileSummary(_ReadsAsItsDict):
    """A profile run's summary.json: built by the profiler, written and read back as this record.

    Its fields are summary.json's keys in the order written (``profilers.contract.fields`` says what
    each means). It also reads as the JSON object (``summary["samples_from"]``): the one it was
    parsed from (a newer writer's keys kept), or the one it writes. Missing parts are None or empty
    (an older, partial or crashed run's summary).
    """

    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata=NOT_WRITTEN)
    schema: int | None = SCHEMA_VERSION
    name: str | None = None
    run_dir: str | None = None
    steps: int | None = None
    measured_steps: int | None = None
    step_time: StepTimes = field(default=StepTimes(), metadata=_or_null(StepTimes.parse, "step_time_s"))
    throughput: Throughput = field(default=Throughput(), metadata=nested(Throughput.parse))
    phases: dict[str, float] = field(default_factory=dict, metadata=_or_null(_phases))  # phase -> share
    peak_memory_bytes: int | None = None
    memory: MemoryFigures = field(default=MemoryFigures(), metadata=_or_null(MemoryFigures.parse))
    flops_per_step: int | None = None
    mfu: float | None = None  # 0-1
    peak_flops_per_s: float | None = None  # the peak mfu is taken against
    precision: str | None = None
    device: DeviceEntry = field(default=DeviceEntry(), metadata=_or_null(DeviceEntry.parse))
    gpus: tuple[GpuFigures, ...] = field(default=(), metadata=_or_null(GpuFigures.parse_list, "gpu"))
    host: HostFigures | None = field(default=None, metadata=nested(HostFigures.parse))
    #: Other processes' CPU while it ran (None: not recorded).
    load_figures: LoadFigures | None = field(default=None, metadata=nested(LoadFigures.parse, "load"))
    rank: int | None = None  # the rank that wrote it
    #: Each rank's figures, on the summary of a job of several ranks.
    ranks: tuple[RankEntry, ...] = field(default=(), metadata={**nested_records(RankEntry), **_NULL})
    top_ops: tuple[TopOp, ...] = field(default=(), metadata=nested_records(TopOp))
    #: The torch.profiler window's totals (None when none ran).
    window: ProfileWindow | None = field(default=None, metadata=nested(ProfileWindow.parse, "profile_window"))
    trace_files: tuple[str, ...] = ()  # relative to the run directory
    memory_snapshot_files: tuple[str, ...] = ()  # relative to the run directory
    step_mode: str | None = None
    wall_time_s: float | None = None
    stopped_by_budget: bool | None = None  # None: not known (a run rebuilt from its store)
    stop_reason: str | None = None
    outcome: str | None = None
    error: RunError | None = field(default=None, metadata=nested(RunError.parse))
    seen: SeenFacts = field(default=SeenFacts(), metadata={**nested(SeenFacts.parse), **WHEN_SET})
    loss: LossFigures = field(default=LossFigures(), metadata=_or_null(LossFigures.parse))
    warnings: tuple[str, ...] = ()
    model: ModelFacts = field(default=ModelFacts(), metadata=_or_null(ModelFacts.parse))
    samples_from: SamplesSource | None = field(default=None, metadata=nested(SamplesSource.parse))
    params_used: dict[str, Any] = field(default_factory=dict)  # the tuning parameters its code read
    sampling: SamplingFacts | None = field(default=None, metadata=nested(SamplingFacts.parse))

    @classmethod
    def parse(cls, data: dict[str, Any], where: str) -> ProfileSummary:
        """The summary ``data`` of a profile run, or SummaryError (one line naming ``where``)."""
        return cls(raw=data, **checked_fields(cls, data, where, skip=("raw",)))

    @property
    def rank_count(self) -> int:
        """Ranks of a multi-rank job (0 for one process)."""
        return len(self.ranks)

    @property
    def load(self) -> RunLoad | None:
        """Other processes' CPU while it ran; None when not recorded or unknown."""
        return None if self.load_figures is None else self.load_figures.known

    @property
    def host_ranks(self) -> int | None:
        """Ranks on rank 0's host (the job's first ranks); None for one process or unknown."""
        return None if self.load_figures is None else self.load_figures.ranks

    @classmethod
    def of(cls, summary: ProfileSummary | Mapping[str, Any], where: str = "summary.json") -> ProfileSummary:
        """``summary`` as the record: itself, or summary.json's dict parsed (SummaryError, one line)."""
        return summary if isinstance(summary, ProfileSummary) else cls.parse(dict(summary), where)

    @classmethod
    def empty(cls) -> ProfileSummary:
        """The summary of a run that wrote none: every figure missing."""
        return _EMPTY_PROFILE

    @property
    def step_median_s(self) -> float | None:
        """The median measured step time in seconds."""
        return self.step_time.median_s

    @property
    def samples_per_s(self) -> float | None:
        """Samples per second over the measured steps."""
        return self.throughput.samples_per_s

    def gpu(self, index: int) -> GpuFigures | None:
        """The entry of NVML index ``index``, or None."""
        return next((g for g in self.gpus if g.index == index), None)


_EMPTY_PROFILE = ProfileSummary.parse({}, "no summary")


__all__ = [
    "Confirmation",
    "GpuFigures",
    "HostFigures",
    "ProfileSummary",
    "SummaryError",
    "ThrottleFigures",
    "TrialEntry",
    "TuningSummary",
    "UtilFigures",
]
