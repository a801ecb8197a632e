"""A profile run's summary.json, as the profiler builds and writes it and every reader reads it.

:class:`ProfileSummary` and its parts (the GPUs', the host's, how samples were counted and where
they were sampled; the rest in :mod:`profilers.contract.figures`): built by the summarizer
(:mod:`profilers.contract.summarize`), written by :func:`~profilers.contract.json_checks.record_json`,
parsed back with every figure checked. A summary this version cannot read (a figure of the wrong
type) is refused where it is read, with one line naming the file, the entry and the field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from profilers.contract.fields import WITH_ABOVE, means
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
    JsonObject,
    ReadsAsItsJson,
    SummaryError,
    checked_fields,
    checked_object,
    is_number,
    nested,
    nested_records,
)
from profilers.contract.lenient import FieldMeta
from profilers.contract.load import LoadFigures, RunLoad
from profilers.contract.schema import PHASES, SCHEMA_VERSION, Params


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


_NULL = DEFAULT_AS_NULL


def _or_null(parse: Callable[[Any, str], Any], key: str | None = None) -> FieldMeta:
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
class ProfileSummary(ReadsAsItsJson):
    """A profile run's summary.json: built by the profiler, written and read back as this record.

    Its fields are summary.json's keys in the order written, each saying what it means (its
    metadata's :func:`~profilers.contract.fields.means`: the reference page is made from it). It
    also reads as the JSON object (``summary["samples_from"]``): the one it was parsed from (a newer
    writer's keys kept), or the one it writes. Missing parts are None or empty (an older, partial or
    crashed run's summary).
    """

    raw: JsonObject = field(default_factory=dict, repr=False, compare=False, metadata=NOT_WRITTEN)
    schema: int | None = field(default=SCHEMA_VERSION, metadata=means("layout version (1)"))
    name: str | None = field(default=None, metadata=means("run name and directory"))
    run_dir: str | None = field(default=None, metadata=WITH_ABOVE)
    steps: int | None = field(default=None, metadata=means("every step observed (on this rank)"))
    measured_steps: int | None = field(
        default=None, metadata=means("steps in the statistics (after warm-up, FLOP and trace steps)")
    )
    step_time: StepTimes = field(
        default=StepTimes(),
        metadata={
            **_or_null(StepTimes.parse, "step_time_s"),
            **means("`median`, `p10`, `p90`, `mean` of measured steps (on CUDA, on the GPU's timeline)"),
        },
    )
    throughput: Throughput = field(
        default=Throughput(),
        metadata={
            **nested(Throughput.parse),
            **means(
                "`samples_per_s`, `tokens_per_s` (null without token ids), `samples_per_s_ci95` "
                "([low, high], the 95% interval from the measured steps' times: Student's t on "
                "the mean step time; null below 2 steps); job-wide under torchrun (the ranks' sum"
                " over `ranks_per_replica`, the tensor × pipeline degree of a model-parallel job,"
                " else 1), plus `per_rank_samples_per_s` (every rank's, in rank order)"
            ),
        },
    )
    # phase -> share
    phases: dict[str, float] = field(
        default_factory=dict,
        metadata={
            **_or_null(_phases),
            **means(
                "`data`, `forward`, `backward`, `optimizer`, `eval`, `other`: fractions of "
                "measured step time, summing to 1 (`eval`: forwards under "
                "`no_grad`/`inference_mode` or of a model in eval mode, inside training)"
            ),
        },
    )
    peak_memory_bytes: int | None = field(
        default=None,
        metadata=means(
            "CUDA: peak allocated (`torch.cuda.max_memory_allocated`, peak stats reset at the"
            " start); CPU: peak RSS growth over the session's start, from the host samples of"
            " the training's own steps (outside the FLOP-counting step and the torch.profiler"
            " window, whose buffers are the profiler's and are given back to the OS after "
            "it), less the profiler's own imports (`memory.profiler_rss_bytes`)"
        ),
    )
    memory: MemoryFigures = field(
        default=MemoryFigures(),
        metadata={
            **_or_null(MemoryFigures.parse),
            **means(
                "details: `rss_start_bytes`, `rss_peak_bytes` (over the training's own steps: the"
                " FLOP-counting step and the torch.profiler window left out, and less "
                "`profiler_rss_bytes`), `rss_peak_growth_bytes`, `profiler_rss_bytes` (resident "
                "memory the profiler's own first use of FlopCounterMode and torch.profiler keeps:"
                " the modules they import, measured on a helper thread at that first use), "
                "`ru_maxrss_bytes` (the process's lifetime peak, everything included), and on "
                "CUDA `cuda_peak_allocated_bytes`, `cuda_peak_reserved_bytes`; with glibc, "
                "`heap_live_bytes_max` and `heap_live_envelope` (as `rss_envelope`): the bytes in"
                " live C allocations (`mallinfo2`: `uordblks + hblkhd`), read at step ends at "
                "most 10 times a second, which on a CPU is the memory the training holds across "
                "steps whatever the allocator keeps"
            ),
        },
    )
    flops_per_step: int | None = field(
        default=None,
        metadata=means("FLOPs of one step on one rank (`torch.utils.flop_counter.FlopCounterMode`), or null"),
    )
    # 0-1
    mfu: float | None = field(
        default=None,
        metadata=means(
            "achieved FLOP/s over the device peak for the precision in use, or null when the "
            "peak is unknown (CPUs, unlisted GPUs)"
        ),
    )
    peak_flops_per_s: float | None = field(default=None, metadata=means("the peak used for `mfu`"))
    precision: str | None = field(
        default=None, metadata=means("`fp32`, `tf32`, `bf16` or `fp16`, as seen at the step's first forward")
    )
    device: DeviceEntry = field(
        default=DeviceEntry(),
        metadata={
            **_or_null(DeviceEntry.parse),
            **means(
                "`kind` (`cpu` or `cuda`), `name`, `count`, `index` (the CUDA device of the "
                "model's input), `nvml_indexes` (the job's GPUs in NVML's numbering, matched by "
                "UUID; null when every GPU was sampled)"
            ),
        },
    )
    gpus: tuple[GpuFigures, ...] = field(
        default=(),
        metadata={
            **_or_null(GpuFigures.parse_list, "gpu"),
            **means(
                "per job GPU from NVML (rates over the measured steps, `span` says "
                "`measured_steps`, or `session` when too few readings fell inside; peaks over the"
                " whole run): `util_pct` {mean, readings, p5, p50, p95, min, max}, `throttle` "
                "{readings, `power_thermal_share`, `reason_shares` by NVML reason name} (over the"
                " same readings as the rates), `mem_used_envelope` (the memory line's input: "
                "{readings, `span_ns`, `peaks` [[s, bytes]…]}, the peaks of 8 equal slices of the"
                " measured steps after the profiler's instruments finished), "
                "`mem_used_bytes_max`, `mem_total_bytes`, `process_mem_bytes_max`, "
                "`mem_busy_pct_mean`, `power_w_mean`, `power_w_max`, `energy_j` (over the "
                "measured steps, `duration_s` long), `run_energy_j` (the whole run), "
                "`sm_clock_mhz_mean`, `mem_clock_mhz_mean`, `temperature_c_max`, "
                "`throttle_reasons`, `pcie_rx_kbps_mean`, `pcie_tx_kbps_mean`; null without NVML"
            ),
        },
    )
    host: HostFigures | None = field(
        default=None,
        metadata={
            **nested(HostFigures.parse),
            **means(
                "`cpu_util_pct_mean`, `process_cpu_pct_mean` (this process and its child "
                "processes, such as DataLoader workers), `rss_peak_bytes`, "
                "`host_mem_total_bytes`, `rss_envelope` (as `mem_used_envelope`, of this "
                "process's RSS)"
            ),
        },
    )
    #: Other processes' CPU while it ran (None: not recorded).
    load_figures: LoadFigures | None = field(
        default=None,
        metadata={
            **nested(LoadFigures.parse, "load"),
            **means(
                "how busy the machine was during the measured steps, in cores: `machine_cores`, "
                "`busy_cores` (every process), `own_cores` (the run's processes: under torchrun "
                "every rank on rank 0's host, `ranks` of them, with their DataLoader workers), "
                "`other_cores` (the rest: other processes' CPU; null when a rank's CPU is "
                'unknown), `samples`; null without host readings. The terminal\'s "Machine load" '
                "row, the report's overview and the dashboard say it in one line, and add that "
                "the figures are slower than the quiet machine gives when `other_cores` is above "
                "the load band (a quarter of the cores, at least half a core)"
            ),
        },
    )
    rank: int | None = field(
        default=None,
        metadata=means(
            "the rank that wrote this summary (0; every rank keeps its own in the run store's `ranks` table)"
        ),
    )
    #: Each rank's figures, on the summary of a job of several ranks.
    ranks: tuple[RankEntry, ...] = field(
        default=(),
        metadata={
            **nested_records(RankEntry),
            **_NULL,
            **means(
                "under torchrun: per rank `rank`, `steps`, `measured_steps`, `step_time_s`, "
                "`samples_per_s`, `tokens_per_s`, `peak_memory_bytes`; else null"
            ),
        },
    )
    top_ops: tuple[TopOp, ...] = field(
        default=(),
        metadata={
            **nested_records(TopOp),
            **means(
                "operators with the most self time in the deep-profile window: `name`, `device`, "
                "`calls`, `self_time_us`, `total_time_us`, `flops`"
            ),
        },
    )
    #: The torch.profiler window's totals (None when none ran).
    window: ProfileWindow | None = field(
        default=None,
        metadata={
            **nested(ProfileWindow.parse, "profile_window"),
            **means(
                "the whole deep-profile window summed up (every op and kernel, not only "
                "`top_ops`), or null when no window ran: `steps` profiled, `wall_us`, "
                "`cpu_op_self_us` (self CPU time of synchronous ops, all threads), on CUDA "
                "`kernels`, `kernel_time_us`, `kernel_mean_us`, `kernel_median_us`, "
                "`kernel_busy_us` (union of kernel intervals), `tensor_core_fraction` (0-1 of "
                "kernel time, by kernel name), then `collective_calls`, `collective_time_us` "
                "(union of collective intervals), `collective_exposed_us` (CUDA: not overlapped "
                "by a compute kernel; else null), `collective_source` (`device_kernels` NCCL "
                "kernels, `backend_ranges` `gloo:`/`nccl:` ranges, `frontend_ops` `c10d::` ops, "
                "or null), `dataloader_us`, `dataloader_iter` (`_SingleProcessDataLoaderIter`, "
                "`_MultiProcessingDataLoaderIter` or null); times in µs"
            ),
        },
    )
    # relative to the run directory
    trace_files: tuple[str, ...] = field(
        default=(), metadata=means("trace paths relative to the run directory")
    )
    # relative to the run directory
    memory_snapshot_files: tuple[str, ...] = field(
        default=(),
        metadata=means(
            "CUDA memory snapshots (`--memory-snapshot`) relative to the run directory: "
            "`memory/rank<R>.pickle` when the profiler window closed, "
            "`memory/rank<R>-oom.pickle` at an out-of-memory error; pytorch.org/memory_viz "
            "draws them, `autotune report FILE` explains them"
        ),
    )
    step_mode: str | None = field(
        default=None, metadata=means("how steps were found: `optimizer`, `backward` or `explicit`")
    )
    wall_time_s: float | None = field(default=None, metadata=means("length of the profiled region"))
    # None: not known (a run rebuilt from its store)
    stopped_by_budget: bool | None = field(
        default=None,
        metadata=means("true when a step budget (`--max-steps` or an early stop) ended the script"),
    )
    stop_reason: str | None = field(
        default=None,
        metadata=means(
            "why a step budget ended the script: `max_steps`, `stable`, `below_threshold` or "
            "`non_finite_loss` (see step budgets above), `interrupted` for Ctrl-C, null when "
            "the script ended on its own"
        ),
    )
    outcome: str | None = field(
        default=None,
        metadata=means(
            "how the run ended: `finished` (the code returned), `stopped` (a step budget, a "
            "stop rule or Ctrl-C), `crashed` (it raised, or exited with a nonzero status) or "
            "`no_steps` (no training step was seen, whatever the ending); the terminal, the "
            "report and the dashboard say it first"
        ),
    )
    error: RunError | None = field(
        default=None,
        metadata={
            **nested(RunError.parse),
            **means(
                "with `crashed` (and `no_steps` when the script raised): `type`, `message` (first"
                " 500 characters), `step` (the step in progress, 1-based) and `exit_code` for "
                "`SystemExit`; else null"
            ),
        },
    )
    seen: SeenFacts = field(
        default=SeenFacts(),
        metadata={
            **nested(SeenFacts.parse),
            **WHEN_SET,
            **means(
                "with `no_steps`: `optimizer_steps` and `model_forward` (whether a model's "
                "forward ran), what was seen instead of a step",
                always=False,
            ),
        },
    )
    loss: LossFigures = field(
        default=LossFigures(),
        metadata={
            **_or_null(LossFigures.parse),
            **means(
                "per-step training loss (rank 0's under torchrun): `first`, `last`, `min`, "
                "`last_mean` (mean of the last up to 5 measured steps with a loss), "
                "`non_finite_steps` (steps whose loss is NaN or infinite), "
                "`first_non_finite_step`, `per_step` (every step's loss in order, null where none"
                " was seen or it was not finite); null when no scalar loss was backpropagated. "
                "JSON has no NaN: a non-finite `first`, `last` or `last_mean` is null, and "
                "`non_finite_steps` tells"
            ),
        },
    )
    warnings: tuple[str, ...] = field(
        default=(),
        metadata=means("profiler faults reported during the run (training went on without that part)"),
    )
    model: ModelFacts = field(
        default=ModelFacts(),
        metadata={
            **_or_null(ModelFacts.parse),
            **means(
                "the step's model (the first module called for training): `class`, `parameters`, "
                "`trainable_parameters`, `parameter_bytes`, `gradient_bytes` (what data "
                "parallelism all-reduces each step), `ddp_bucket_cap_bytes` (a "
                "DistributedDataParallel model's bucket size, else null); null when no training "
                "forward was seen"
            ),
        },
    )
    samples_from: SamplesSource | None = field(
        default=None,
        metadata={
            **nested(SamplesSource.parse),
            **means(
                'how samples per step were found: `{"override": N}` with `--samples-per-step`, '
                "else the model input that gave them: `module` (its class), `input` (`args[0]`, "
                "`input_ids`…), `batch_dim` (1 for time-major `[seq, batch]` inputs), `shape` (at"
                " the first step), `tokens` (whether it holds token ids); null when no input was "
                "seen"
            ),
        },
    )
    # the tuning parameters its code read
    params_used: Params = field(
        default_factory=dict,
        metadata=means(
            "the tuning parameters and built-in knobs the code read (`autotune.param`, "
            "`autotune.prepare`, `autotune.batch_plan`) with the values it used: a trial's, "
            "else the code's own defaults; `{}` when it read none"
        ),
    )
    sampling: SamplingFacts | None = field(
        default=None,
        metadata={
            **nested(SamplingFacts.parse),
            **means(
                "where the devices were sampled: `where` maps each backend (`host`, `nvml`, "
                "`replay`) to `sampler process` (a process of its own, off the training's "
                "interpreter) or `training process` (the recorder thread: "
                "`AUTOTUNE_SAMPLER=thread`, a backend the sampler process could not build with "
                "the same devices, or one it handed back when it died); `notes` says why, and "
                "what was lost; null without sampling"
            ),
        },
    )

    @classmethod
    def parse(cls, data: JsonObject, where: str) -> ProfileSummary:
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
    "GpuFigures",
    "HostFigures",
    "ProfileSummary",
    "SamplesSource",
    "SamplingFacts",
    "ThrottleFigures",
    "UtilFigures",
]
