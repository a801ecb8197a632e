"""The report's data: one typed record per section, computed from a run, drawn afterwards.

Every renderer (HTML, Markdown, JSON, the dashboard) draws these records and nothing else. A
section that does not apply to the run (no GPU, no tuning study) is None in :class:`Report`, with
the sentence that says why in ``Report.missing`` under the section's key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from autotune.advice.records import AdviceSection
from autotune.cost.records import CostSection
from profilers.contract.plan_doc import PlanDocument
from profilers.contract.schema import Params, TrialStatus
from profilers.contract.study.bill import StudyBill
from profilers.contract.study.trial_view import TrialView

if TYPE_CHECKING:  # the dashboard reads these records from report.json and loads no profilers module
    from profilers.traces.analysis import RankSpread
    from profilers.traces.gpu_time import RankGpuTime

#: Section keys in report order, with their headings.
SECTION_TITLES: dict[str, str] = {
    "overview": "Overview",
    "advice": "Recommendations",
    "cost": "Cost",
    "steps": "Step time",
    "gpu_time": "GPU time (torch.profiler trace)",
    "timelines": "GPU timelines",
    "host": "Host timeline",
    "sweep": "Throughput and memory against micro-batch",
    "convergence": "Tuning convergence",
    "pareto": "Throughput against cost",
    "trials": "Trials",
    "plan": "Plan: every GPU, before renting",
    "environment": "Environment",
}


#: A report's kind as its headings say it (any other kind is a profile).
_KIND_LABELS = {"tune": "Tuning study", "trace": "torch.profiler trace"}


@dataclass(frozen=True, slots=True)
class Overview:
    """The headline figures of the run (for a study: of its best trial against the baseline)."""

    name: str
    kind: str  # "profile" or "tune"
    run_dir: str
    finished: bool
    step_time_median_s: float | None
    samples_per_s: float | None
    tokens_per_s: float | None
    peak_memory_bytes: int | None
    precision: str | None
    device: str | None  # "NVIDIA H200 × 8", "cpu (AMD EPYC) × 2"
    world_size: int
    mfu: float | None  # 0-1
    best_params: Params | None = None  # study: the best configuration
    #: Study: what the verdict calls that configuration ("Best", or "Highest in the search" when it
    #: is not to be applied: StudyVerdict.best_label).
    best_label: str = "Best"
    #: Study: how its trials ran (profilers.contract.study.trials.placement_line).
    placement: str | None = None
    #: Study: how much of the search ran short of CPU (profilers.contract.study.trials.starved_line).
    starved: str | None = None
    speedup_vs_baseline: float | None = None  # study: best / baseline throughput in the search
    notes: tuple[str, ...] = ()  # what was missing or rebuilt
    #: Study: the verdict (profilers.contract.study.verdict): its status, headline figure and sentence.
    verdict: str | None = None
    speedup: float | None = None
    verdict_headline: str | None = None
    outcome: str | None = None  # profile: how the run ended (profilers.contract.outcome), when known
    load: str | None = None  # profile: other processes' CPU during its measured steps (contract.load)
    #: Study: what it cost and when it pays back, at the report's price (contract.study.bill).
    bill: StudyBill | None = None

    @property
    def kind_label(self) -> str:
        """What the run is, as the report's headings say it ("Tuning study", "Profile"…)."""
        return _KIND_LABELS.get(self.kind, "Profile")


@dataclass(frozen=True, slots=True)
class StepSection:
    """Where a step's time goes, and the step time over the run."""

    phase_fractions: dict[str, float]  # phase -> share of the step time (0-1), PHASES order
    phase_median_s: dict[str, float]  # phase -> median seconds per step
    median_s: float
    p10_s: float
    p90_s: float
    series_step: tuple[int, ...]  # rank 0's steps, downsampled for drawing
    series_duration_s: tuple[float, ...]
    series_kind: tuple[str, ...]  # "warmup", "measured"…
    outlier_steps: tuple[int, ...] = ()  # steps beyond the outlier threshold
    per_rank_median_s: dict[int, float] = field(default_factory=dict)

    def phase_rows(self) -> tuple[PhaseRow, ...]:
        """Each phase in PHASES order with its share of the step and its median (the table, the bar)."""
        return tuple(PhaseRow(p, f, self.phase_median_s.get(p)) for p, f in self.phase_fractions.items())


class PhaseRow(NamedTuple):
    """One phase of a step: its share of the step time (0-1) and its median seconds per step."""

    phase: str
    share: float
    median_s: float | None  # None when the phase was not timed on its own


@dataclass(frozen=True, slots=True)
class GpuTimeSection:
    """Where each rank's GPU time went, from torch.profiler traces (HTA's definitions).

    ``ranks[i]`` holds ``rank``, ``device_name``, ``idle_pct``, ``compute_pct``,
    ``non_compute_pct``, ``comm_overlap_pct``, ``kernel_time_us``, ``steps``,
    ``step_time_s_median`` and the rest of :class:`profilers.traces.gpu_time.RankGpuTime`.
    """

    source: str  # the trace file or folder
    ranks: tuple[RankGpuTime, ...]
    spread: tuple[RankSpread, ...]  # across ranks (2 or more)
    problems: tuple[str, ...] = ()  # files or parts that could not be read


@dataclass(frozen=True, slots=True)
class GpuTimeline:
    """One GPU's NVML samples over the run (seconds from the run's first sample)."""

    index: int
    name: str | None
    t_s: tuple[float, ...]
    util_pct: tuple[float | None, ...]
    mem_used_bytes: tuple[float | None, ...]
    mem_total_bytes: int | None
    power_w: tuple[float | None, ...]
    sm_clock_mhz: tuple[float | None, ...]


@dataclass(frozen=True, slots=True)
class TimelineSection:
    """Every sampled GPU's timeline."""

    gpus: tuple[GpuTimeline, ...]


@dataclass(frozen=True, slots=True)
class HostTimeline:
    """The host's CPU utilisation and the process's resident memory over the run."""

    t_s: tuple[float, ...]
    cpu_util_pct: tuple[float | None, ...]
    rss_bytes: tuple[float | None, ...]
    mem_total_bytes: int | None


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One finished trial placed on the micro-batch axis."""

    trial_id: int
    batch: float  # the micro-batch (or the first batch-like parameter)
    samples_per_s: float | None
    peak_memory_bytes: int | None
    status: TrialStatus


@dataclass(frozen=True, slots=True)
class SweepSeries:
    """The trials of one precision × layout (or one value of the other parameters)."""

    label: str  # "bf16 · ddp"
    points: tuple[SweepPoint, ...]  # sorted by batch


@dataclass(frozen=True, slots=True)
class SweepSection:
    """Throughput and peak memory against the batch parameter, per series."""

    batch_param: str
    series: tuple[SweepSeries, ...]
    memory_budget_bytes: int | None


@dataclass(frozen=True, slots=True)
class ConvergenceSection:
    """The objective of each trial in order, and the best so far."""

    metric: str  # "samples_per_s", "usd_per_million_samples"…
    direction: str  # "maximize" or "minimize"
    trial_ids: tuple[int, ...]
    values: tuple[float | None, ...]  # None for a trial that did not finish ok
    best_so_far: tuple[float | None, ...]
    statuses: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ParetoPoint:
    """One ok trial on the throughput × cost plane."""

    trial_id: int
    samples_per_s: float
    usd_per_million_samples: float
    on_front: bool
    label: str  # its parameters, "micro_batch=8 precision=bf16"


@dataclass(frozen=True, slots=True)
class ParetoSection:
    """Throughput against cost; the front holds the trials no other beats on both."""

    points: tuple[ParetoPoint, ...]
    price_per_gpu_hour: float


@dataclass(frozen=True, slots=True)
class TrialSection:
    """Every trial of the study."""

    metric: str
    rows: tuple[TrialView, ...]  # profilers.contract.study.trial_view: the dashboard's rows too
    #: What the verdict calls the top trial's row: "best", or "highest in the search" (best_label).
    best_label: str = "best"


@dataclass(frozen=True, slots=True)
class EnvironmentSection:
    """Where and how the run was made: label -> value, in display order."""

    items: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Report:
    """Every section of one run's report; a None section is explained in ``missing``."""

    title: str
    generated_at: str  # ISO 8601, UTC
    overview: Overview
    advice: AdviceSection
    environment: EnvironmentSection
    cost: CostSection | None = None
    steps: StepSection | None = None
    gpu_time: GpuTimeSection | None = None
    timelines: TimelineSection | None = None
    host: HostTimeline | None = None
    sweep: SweepSection | None = None
    convergence: ConvergenceSection | None = None
    pareto: ParetoSection | None = None
    trials: TrialSection | None = None
    plan: PlanDocument | None = None
    missing: dict[str, str] = field(default_factory=dict)  # section key -> why it is left out
