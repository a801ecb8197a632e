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

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from profilers.contract.figures import (
    DeviceEntry,
    LossFigures,
    MemoryFigures,
    ProfileWindow,
    RunError,
    StepTimes,
    Throughput,
    TopOp,
)
from profilers.contract.json_checks import (
    SummaryError,
    is_number,
    optional_dict,
    optional_int,
    optional_list,
    optional_number,
    optional_str,
    str_list,
)
from profilers.contract.load import RunLoad, load_of
from profilers.contract.schema import PHASES, STATUSES


class _ReadsAsItsDict(Mapping[str, Any]):
    """Read-only mapping access to the summary dict a record was parsed from (its ``raw``)."""

    raw: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def to_json(self) -> dict[str, Any]:
        """The JSON object the record was parsed from, every key kept (a newer writer's too)."""
        return dict(self.raw)


@dataclass(frozen=True)
class TrialEntry(_ReadsAsItsDict):
    """One trial of a tuning summary, checked (see the module's doc)."""

    id: int
    status: str  # one of schema.STATUSES
    params: dict[str, Any]  # what the study set (empty for the baseline)
    objective: float | None
    throughput: float | None  # samples/s, job-wide
    peak_memory_bytes: int | None
    step_time_s: float | None
    run_dir: str | None  # relative to the study (schema.resolve_trial_dir)
    error: str | None
    params_used: dict[str, Any]  # what its code read, with the values it used
    raw: dict[str, Any] = field(repr=False, compare=False)
    tokens_per_s: float | None = None
    world_size: int = 1  # ranks the trial ran on
    speedup_vs_baseline: float | None = None  # its objective over the baseline's, in the search
    baseline: bool = False  # the run of the script's own defaults
    cost_saving_vs_baseline: float | None = None  # 0-1, per sample at the study's price, in the search
    precision: str | None = None  # what its model ran in, as the profiler saw it
    duration_s: float | None = None  # the trial's wall time
    usd_per_million_samples: float | None = None  # at the study's price, when it had one
    joules_per_sample: float | None = None  # the GPUs' energy over its samples (NVML)
    stop_reason: str | None = None  # why its step budget ended it (stopping.STOP_REASONS)
    throughput_ci95: tuple[float | None, float | None] | None = None  # samples/s; an open end is None
    stable: bool | None = None  # its steps' spread within the study's bound
    other_load_cores: float | None = None  # other processes' CPU while it ran
    #: The best trial's re-measurement against the baseline (autotune.tuner.confirm.Verdict.entry).
    speedup_confirmation_rounds: int = 0
    speedup_geomean: float | None = None
    speedup_ci95: tuple[float, float] | None = None

    @classmethod
    def parse(cls, data: Any, where: str) -> TrialEntry:
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
        objective = optional_number(data, "objective", where)
        return cls(
            id=trial_id,
            status=str(status),
            params=optional_dict(data, "params", where),
            objective=objective if objective is None or math.isfinite(objective) else None,
            throughput=optional_number(data, "throughput", where),
            peak_memory_bytes=optional_int(data, "peak_memory_bytes", where),
            step_time_s=optional_number(data, "step_time_s", where),
            run_dir=optional_str(data, "run_dir", where),
            error=optional_str(data, "error", where),
            params_used=optional_dict(data, "params_used", where),
            raw=data,
            tokens_per_s=optional_number(data, "tokens_per_s", where),
            world_size=optional_int(data, "world_size", where) or 1,
            speedup_vs_baseline=optional_number(data, "speedup_vs_baseline", where),
            baseline=data.get("baseline") is True,
            cost_saving_vs_baseline=optional_number(data, "cost_saving_vs_baseline", where),
            precision=optional_str(data, "precision", where),
            duration_s=optional_number(data, "duration_s", where),
            usd_per_million_samples=optional_number(data, "usd_per_million_samples", where),
            joules_per_sample=optional_number(data, "joules_per_sample", where),
            stop_reason=optional_str(data, "stop_reason", where),
            throughput_ci95=_interval(data, "throughput_ci95", where, open_ended=True),
            stable=data["stable"] if isinstance(data.get("stable"), bool) else None,
            other_load_cores=optional_number(data, "other_load_cores", where),
            speedup_confirmation_rounds=optional_int(data, "speedup_confirmation_rounds", where) or 0,
            speedup_geomean=optional_number(data, "speedup_geomean", where),
            speedup_ci95=_closed(_interval(data, "speedup_ci95", where, open_ended=False)),
        )

    @classmethod
    def from_stored(cls, record: Any, where: str) -> TrialEntry:
        """A study store's trial record (the search library's ``Trial.to_dict``) as a summary's entry.

        What a study's run.db holds before its summary.json lists the trial (the dashboard follows a
        study from its first trial); SummaryError naming ``where`` for a record it cannot read.
        """
        if not isinstance(record, dict):
            raise SummaryError(f"{where}: a trial record must be an object, not {type(record).__name__}")
        params = optional_dict(record, "params", where)
        metrics = optional_dict(record, "metrics", where)
        attrs = optional_dict(record, "attrs", where)
        entry = {"baseline": not params, "params": params}
        for key, source, name in _STORED_TRIAL_FIELDS:
            entry[key] = {"record": record, "metrics": metrics, "attrs": attrs}[source].get(name)
        return cls.parse(entry, where)

    @property
    def ok(self) -> bool:
        """The trial ran and measured its objective."""
        return self.status == "ok"


#: A summary trial entry's keys from a stored trial record: (entry key, part of the record, its key).
_STORED_TRIAL_FIELDS = (
    ("id", "record", "id"),
    ("status", "record", "status"),
    ("objective", "record", "value"),
    ("duration_s", "record", "duration_s"),
    ("error", "record", "error"),
    ("throughput", "metrics", "samples_per_s"),
    ("peak_memory_bytes", "metrics", "peak_memory_bytes"),
    ("step_time_s", "metrics", "step_time_s"),
    ("world_size", "attrs", "world_size"),
    ("stop_reason", "attrs", "stop_reason"),
    ("run_dir", "attrs", "run_dir"),
)


@dataclass(frozen=True)
class TuningSummary:
    """A tuning study's summary.json: its trials, best and baseline checked (``raw``: the whole)."""

    trials: tuple[TrialEntry, ...]
    best: TrialEntry | None
    baseline: TrialEntry | None
    stopped: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)
    command: tuple[str, ...] = ()  # the script and its arguments
    objective: str | None = None  # "throughput", "cost", "energy"…
    metric: str = "samples_per_s"  # the trial figure the objective reads
    direction: str = "maximize"
    searcher: str | None = None
    seed: int | None = None
    n_trials: int | None = None  # asked for
    trials_run: int | None = None
    space: dict[str, Any] = field(default_factory=dict)  # parameter name -> its definition
    memory_budget_bytes: int | None = None
    price_per_gpu_hour: float | None = None  # USD
    status_counts: dict[str, int] = field(default_factory=dict)  # trial status -> how many
    loss_tolerance: float | None = None  # --loss-tolerance, a fraction of the baseline's loss
    preset: str | None = None  # the framework preset whose flags the trials got
    preset_per_rank: int | None = None  # ranks a preset's trial runs per node
    device_kind: str | None = None  # "cuda" or "cpu": what the trials trained on
    run_dir: str | None = None
    threads_per_rank: int | None = None  # threads each trial's processes were given (on a CPU)
    machine_cores: float | None = None  # this machine's cores, for the load band
    confirmations: tuple[Confirmation, ...] = ()  # the best trial's re-measurements
    pareto: tuple[int, ...] | None = None  # trial ids (with --multi-objective)
    search_prior: SearchPrior | None = None  # the plan prior's note and its checks
    verdict: dict[str, Any] = field(default_factory=dict)  # as stored (verdict.verdict_of reads it)

    @classmethod
    def of(cls, summary: TuningSummary | Mapping[str, Any], where: str = "summary.json") -> TuningSummary:
        """``summary`` as the record: itself, or summary.json's dict parsed (SummaryError, one line)."""
        return summary if isinstance(summary, TuningSummary) else cls.parse(dict(summary), where)

    def to_json(self) -> dict[str, Any]:
        """The JSON object the record was parsed from, every key kept."""
        return dict(self.raw)

    @classmethod
    def parse(cls, data: dict[str, Any], where: str) -> TuningSummary:
        """The summary ``data`` of a study, or SummaryError (one line naming ``where``)."""
        trials = data.get("trials")
        if not isinstance(trials, list):
            raise SummaryError(f"{where}: a tuning summary without its list of trials")
        entries = tuple(TrialEntry.parse(t, where) for t in trials)
        chosen = {k: TrialEntry.parse(data[k], f"{where}, {k}") if data.get(k) is not None else None
                  for k in ("best", "baseline")}  # fmt: skip
        stopped = optional_str(data, "stopped", where)
        threads = optional_dict(data, "threads", where)
        pareto = optional_list(data, "pareto", where)
        return cls(
            entries,
            chosen["best"],
            chosen["baseline"],
            stopped,
            data,
            command=str_list(data, "command", where),
            objective=optional_str(data, "objective", where),
            metric=optional_str(data, "metric", where) or "samples_per_s",
            direction=optional_str(data, "direction", where) or "maximize",
            searcher=optional_str(data, "searcher", where),
            seed=optional_int(data, "seed", where),
            n_trials=optional_int(data, "n_trials", where),
            trials_run=optional_int(data, "trials_run", where),
            space=optional_dict(data, "space", where),
            memory_budget_bytes=optional_int(data, "memory_budget_bytes", where),
            price_per_gpu_hour=optional_number(data, "price_per_gpu_hour", where),
            status_counts=_counts(optional_dict(data, "status_counts", where)),
            loss_tolerance=optional_number(data, "loss_tolerance", where),
            preset=optional_str(data, "preset", where),
            preset_per_rank=optional_int(data, "preset_per_rank", where),
            device_kind=optional_str(threads, "device_kind", where),
            run_dir=optional_str(data, "run_dir", where),
            threads_per_rank=optional_int(threads, "threads_per_rank", where),
            machine_cores=optional_number(data, "machine_cores", where),
            confirmations=tuple(
                Confirmation.parse(c, f"{where}, confirmations")
                for c in optional_list(data, "confirmations", where)
            ),
            pareto=tuple(int(i) for i in pareto if is_number(i)) if data.get("pareto") is not None else None,
            search_prior=SearchPrior.parse(data.get("search_prior"), f"{where}: search_prior"),
            verdict=optional_dict(data, "verdict", where),
        )


@dataclass(frozen=True)
class Confirmation:
    """One re-measurement of the best trial or the baseline (summary.json's ``confirmations``)."""

    round: int
    role: str  # "baseline" or "best"
    status: str
    samples_per_s: float | None
    other_load_cores: float | None

    @classmethod
    def parse(cls, data: Any, where: str) -> Confirmation:
        """The entry ``data``, or SummaryError naming ``where`` and the field."""
        if not isinstance(data, dict):
            raise SummaryError(f"{where}: an entry must be an object, not {type(data).__name__}")
        return cls(
            round=optional_int(data, "round", where) or 0,
            role=optional_str(data, "role", where) or "",
            status=optional_str(data, "status", where) or "",
            samples_per_s=optional_number(data, "samples_per_s", where),
            other_load_cores=optional_number(data, "other_load_cores", where),
        )


@dataclass(frozen=True)
class PriorCheck:
    """One trial's predicted objective beside its measurement (``search_prior.predicted_vs_measured``)."""

    trial: int
    predicted: float | None
    measured: float | None

    @property
    def error(self) -> float | None:
        """``|predicted / measured - 1|``: how far off the prediction was; None when either is missing."""
        if self.predicted is None or not self.measured:
            return None
        return abs(self.predicted / self.measured - 1)


@dataclass(frozen=True)
class SearchPrior:
    """How the plan ordered the search (summary.json's ``search_prior``, absent without a plan prior)."""

    note: str  # which costs were used, or why there is no prior
    used: bool  # whether the search started from the prior
    checks: tuple[PriorCheck, ...]  # each ok trial's prediction beside its measurement

    @classmethod
    def parse(cls, data: Any, where: str) -> SearchPrior | None:
        """The block ``data`` (None when absent), or SummaryError naming ``where`` and the field."""
        if data is None:
            return None
        if not isinstance(data, dict):
            raise SummaryError(f"{where}: must be an object, not {type(data).__name__}")
        checks = []
        for row in optional_list(data, "predicted_vs_measured", where):
            if not isinstance(row, dict):
                raise SummaryError(f"{where}: a row must be an object, not {row!r}"[:300])
            checks.append(PriorCheck(
                trial=optional_int(row, "trial", where) or 0,
                predicted=optional_number(row, "predicted", where),
                measured=optional_number(row, "measured", where),
            ))  # fmt: skip
        return cls(optional_str(data, "note", where) or "", data.get("used") is True, tuple(checks))

    def median_error(self) -> tuple[float, int] | None:
        """The median of the checks' errors (:attr:`PriorCheck.error`) and how many had one."""
        errors = sorted(e for c in self.checks if (e := c.error) is not None)
        return (errors[len(errors) // 2], len(errors)) if errors else None


def _interval(
    data: Mapping[str, Any], key: str, where: str, open_ended: bool
) -> tuple[float | None, float | None] | None:
    """``[low, high]`` (either end may be null when ``open_ended``), or None when missing."""
    value = data.get(key)
    if value is None:
        return None
    ok = isinstance(value, list | tuple) and len(value) == 2
    if not ok or not all(is_number(v) or (open_ended and v is None) for v in value):
        raise SummaryError(f"{where}: {key!r} must be [low, high], not {value!r}"[:300])
    return (None if value[0] is None else float(value[0]), None if value[1] is None else float(value[1]))


def _closed(interval: tuple[float | None, float | None] | None) -> tuple[float, float] | None:
    if interval is None or interval[0] is None or interval[1] is None:
        return None
    return (interval[0], interval[1])


def _counts(data: dict[str, Any]) -> dict[str, int]:
    return {str(k): int(v) for k, v in data.items() if is_number(v)}


#: A profile summary's figures the layers read, and the types they must have (None is always allowed).
_PROFILE_FIELDS: dict[str, tuple[type, ...]] = {
    "steps": (int,),
    "measured_steps": (int,),
    "step_time_s": (dict,),
    "throughput": (dict,),
    "phases": (dict,),
    "peak_memory_bytes": (int, float),
    "memory": (dict,),
    "gpu": (list,),  # one aggregate per GPU
    "host": (dict,),
    "device": (dict,),
    "loss": (dict,),
    "precision": (str,),
    "warnings": (list,),
    "params_used": (dict,),
    "top_ops": (list,),
    "trace_files": (list,),
    "memory_snapshot_files": (list,),
    "name": (str,),
}


def _check_top_level(data: dict[str, Any], where: str) -> None:
    for key, types in _PROFILE_FIELDS.items():
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, types):
            kind = " or ".join(t.__name__ for t in types)
            raise SummaryError(f"{where}: {key!r} must be {kind} or null, not {value!r}"[:300])
    for group in ("step_time_s", "throughput"):
        for name, value in (data.get(group) or {}).items():
            if value is not None and not is_number(value) and not isinstance(value, list | dict | str):
                raise SummaryError(f"{where}: {group}.{name} must be a number or null, not {value!r}"[:300])
    for name, value in (data.get("phases") or {}).items():
        if name in PHASES and value is not None and not is_number(value):
            raise SummaryError(f"{where}: phases.{name} must be a number or null, not {value!r}"[:300])


@dataclass(frozen=True)
class Envelope:
    """A memory line's input: the peak of each equal slice of the steady span.

    See :func:`profilers.contract.summarize.memory_envelope`.
    """

    readings: int
    span_ns: tuple[int, int]
    peaks: tuple[tuple[float, float], ...]  # (seconds from the span's start, bytes)

    @classmethod
    def parse(cls, data: Any, where: str) -> Envelope | None:
        """The envelope ``data`` (None stays None), or SummaryError naming ``where``."""
        if data is None:
            return None
        try:
            readings = data["readings"]
            start, end = data["span_ns"]
            peaks = tuple((float(x), float(v)) for x, v in data["peaks"])
            if not all(is_number(v) for v in (readings, start, end)):
                raise TypeError
        except (TypeError, KeyError, ValueError):
            shape = "{readings, span_ns: [start, end], peaks: [[s, bytes]...]}"
            raise SummaryError(f"{where}: must be {shape}, not {data!r}"[:300]) from None
        return cls(int(readings), (int(start), int(end)), peaks)


@dataclass(frozen=True)
class UtilFigures:
    """NVML utilisation of one GPU over the summary's span (``util_pct``), in percent."""

    readings: int | None  # None in summaries from before it was recorded
    mean: float | None
    p5: float | None
    p50: float | None
    p95: float | None


@dataclass(frozen=True)
class ThrottleFigures:
    """How often each clocks-event reason was set (``throttle``; summarize.throttle_shares)."""

    readings: int
    power_thermal_share: float  # 0-1
    reason_shares: dict[str, float]  # reason name -> 0-1


@dataclass(frozen=True)
class GpuFigures:
    """One GPU's entry of a profile summary's ``gpu`` list (summarize.gpu_aggregates)."""

    index: int
    name: str | None
    samples: int
    util: UtilFigures | None
    mem_total_bytes: int | None
    mem_used_bytes_max: int | None
    sm_clock_mhz_mean: float | None
    throttle: ThrottleFigures | None
    mem_used_envelope: Envelope | None
    power_w_mean: float | None = None
    energy_j: float | None = None
    temperature_c_max: float | None = None
    throttle_reasons: tuple[str, ...] = ()  # the reasons seen set (names), over the whole session
    duration_s: float | None = None  # the span its readings cover (energy_j is over it)

    @classmethod
    def parse(cls, data: Any, where: str) -> GpuFigures:
        """The entry ``data``, or SummaryError naming ``where`` and the field."""
        if not isinstance(data, dict) or not isinstance(data.get("index"), int):
            raise SummaryError(f"{where}: a GPU entry must be an object with its index, not {data!r}"[:300])
        where = f"{where}[{data['index']}]"
        util = optional_dict(data, "util_pct", where)
        held = optional_dict(data, "throttle", where)
        shares = optional_dict(held, "reason_shares", f"{where}.throttle")
        return cls(
            index=data["index"],
            name=optional_str(data, "name", where),
            samples=optional_int(data, "samples", where) or 0,
            util=UtilFigures(
                optional_int(util, "readings", f"{where}.util_pct"),
                *(optional_number(util, k, f"{where}.util_pct") for k in ("mean", "p5", "p50", "p95")),
            )
            if util
            else None,
            mem_total_bytes=optional_int(data, "mem_total_bytes", where),
            mem_used_bytes_max=optional_int(data, "mem_used_bytes_max", where),
            sm_clock_mhz_mean=optional_number(data, "sm_clock_mhz_mean", where),
            throttle=ThrottleFigures(
                optional_int(held, "readings", f"{where}.throttle") or 0,
                optional_number(held, "power_thermal_share", f"{where}.throttle") or 0.0,
                {str(k): optional_number(shares, k, f"{where}.throttle") or 0.0 for k in shares},
            )
            if held
            else None,
            mem_used_envelope=Envelope.parse(data.get("mem_used_envelope"), f"{where}.mem_used_envelope"),
            power_w_mean=optional_number(data, "power_w_mean", where),
            energy_j=optional_number(data, "energy_j", where),
            temperature_c_max=optional_number(data, "temperature_c_max", where),
            throttle_reasons=_reason_names(data.get("throttle_reasons")),
            duration_s=optional_number(data, "duration_s", where),
        )


def _reason_names(value: Any) -> tuple[str, ...]:
    """``throttle_reasons``: a list of names (older summaries: one name, or NVML's bitmask)."""
    if not value:
        return ()
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    return (str(value),)


@dataclass(frozen=True)
class HostFigures:
    """A profile summary's ``host`` entry (summarize.host_aggregates): this rank's process and host."""

    samples: int
    cpu_util_pct_mean: float | None
    rss_peak_bytes: int | None
    host_mem_total_bytes: int | None
    rss_envelope: Envelope | None

    @classmethod
    def parse(cls, data: dict[str, Any], where: str) -> HostFigures:
        """The entry ``data``, or SummaryError naming ``where`` and the field."""
        return cls(
            samples=optional_int(data, "samples", where) or 0,
            cpu_util_pct_mean=optional_number(data, "cpu_util_pct_mean", where),
            rss_peak_bytes=optional_int(data, "rss_peak_bytes", where),
            host_mem_total_bytes=optional_int(data, "host_mem_total_bytes", where),
            rss_envelope=Envelope.parse(data.get("rss_envelope"), f"{where}.rss_envelope"),
        )


@dataclass(frozen=True)
class ProfileSummary(_ReadsAsItsDict):
    """A profile run's summary.json, parsed once and checked: every figure a layer shows or decides on.

    It also reads as the whole dict (``summary["samples_from"]``), for the few keys shown as they were
    written. Missing parts are None or empty (an older, partial or crashed run's summary).
    """

    name: str | None
    run_dir: str | None
    steps: int | None
    measured_steps: int | None
    step_time: StepTimes
    throughput: Throughput
    phases: dict[str, float]
    peak_memory_bytes: int | None
    memory: MemoryFigures
    flops_per_step: int | None
    mfu: float | None  # 0-1
    precision: str | None
    device: DeviceEntry
    gpus: tuple[GpuFigures, ...]
    host: HostFigures | None
    rank_count: int  # ranks of a multi-rank job (0 for one process)
    top_ops: tuple[TopOp, ...]
    trace_files: tuple[str, ...]  # relative to the run directory
    memory_snapshot_files: tuple[str, ...]  # relative to the run directory
    step_mode: str | None
    wall_time_s: float | None
    loss: LossFigures
    stop_reason: str | None
    warnings: tuple[str, ...]
    outcome: str | None
    error: RunError | None
    window: ProfileWindow | None  # the torch.profiler window's totals (None when none ran)
    params_used: dict[str, Any]  # the tuning parameters its code read, with their values
    raw: dict[str, Any] = field(repr=False, compare=False)
    model_forward_seen: bool = False  # for ``no_steps``: a model's forward ran, yet no step closed
    rank_peak_memory_bytes: tuple[int | None, ...] = ()  # each rank's peak allocated (``ranks``)
    host_ranks: int | None = None  # ranks on rank 0's host (``load.ranks``: the job's first ranks)
    heap_live_envelope: Envelope | None = None  # the C heap's live bytes over the steady span
    gradient_bytes: int | None = None  # the model's trainable parameters' gradients (``model``)
    ddp_bucket_cap_bytes: int | None = None  # a DistributedDataParallel model's bucket size
    load: RunLoad | None = None  # other processes' CPU while it ran (None: not recorded)

    @classmethod
    def parse(cls, data: dict[str, Any], where: str) -> ProfileSummary:
        """The summary ``data`` of a profile run, or SummaryError (one line naming ``where``)."""
        _check_top_level(data, where)
        host = data.get("host")
        ranks = data.get("ranks")
        memory, model = optional_dict(data, "memory", where), optional_dict(data, "model", where)
        rank_entries = [r for r in ranks if isinstance(r, dict)] if isinstance(ranks, list) else []
        return cls(
            name=optional_str(data, "name", where),
            run_dir=optional_str(data, "run_dir", where),
            steps=optional_int(data, "steps", where),
            measured_steps=optional_int(data, "measured_steps", where),
            step_time=StepTimes.parse(data.get("step_time_s"), where),
            throughput=Throughput.parse(data.get("throughput"), where),
            phases={k: float(v) for k, v in (data.get("phases") or {}).items() if is_number(v)},
            peak_memory_bytes=optional_int(data, "peak_memory_bytes", where),
            memory=MemoryFigures.parse(data.get("memory"), where),
            flops_per_step=optional_int(data, "flops_per_step", where),
            mfu=optional_number(data, "mfu", where),
            precision=optional_str(data, "precision", where),
            device=DeviceEntry.parse(data.get("device"), where),
            gpus=tuple(GpuFigures.parse(g, f"{where}: gpu") for g in data.get("gpu") or ()),
            host=None if host is None else HostFigures.parse(host, f"{where}: host"),
            rank_count=len(ranks) if isinstance(ranks, list) else 0,
            top_ops=TopOp.parse_all(data.get("top_ops"), where),
            trace_files=str_list(data, "trace_files", where),
            memory_snapshot_files=str_list(data, "memory_snapshot_files", where),
            step_mode=optional_str(data, "step_mode", where),
            wall_time_s=optional_number(data, "wall_time_s", where),
            loss=LossFigures.parse(data.get("loss"), where),
            stop_reason=optional_str(data, "stop_reason", where),
            warnings=str_list(data, "warnings", where),
            outcome=optional_str(data, "outcome", where),
            error=RunError.parse(data.get("error"), where),
            window=ProfileWindow.parse(data.get("profile_window"), where),
            params_used=optional_dict(data, "params_used", where),
            raw=data,
            model_forward_seen=optional_dict(data, "seen", where).get("model_forward") is True,
            rank_peak_memory_bytes=tuple(
                optional_int(r, "peak_memory_bytes", f"{where}: ranks") for r in rank_entries
            ),
            host_ranks=optional_int(optional_dict(data, "load", where), "ranks", f"{where}: load"),
            heap_live_envelope=Envelope.parse(
                memory.get("heap_live_envelope"), f"{where}: memory.heap_live_envelope"
            ),
            gradient_bytes=optional_int(model, "gradient_bytes", f"{where}: model"),
            ddp_bucket_cap_bytes=optional_int(model, "ddp_bucket_cap_bytes", f"{where}: model"),
            load=load_of(data),
        )

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
    "Envelope",
    "GpuFigures",
    "HostFigures",
    "ProfileSummary",
    "SummaryError",
    "ThrottleFigures",
    "TrialEntry",
    "TuningSummary",
    "UtilFigures",
]
