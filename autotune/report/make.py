"""From a run directory to a report: load, advise, price, build, render.

The one place that ties the advice, the cost model and the section builders together; the CLI,
the demo and the dashboard call :func:`make_report`.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from autotune.advice.advise import advise
from autotune.cost.model import cost_section, saving_from_speedup, study_cost_section
from autotune.cost.prices import load_prices, resolve_price, unavailable_reason
from autotune.report.build import build_report
from autotune.report.html import render_html
from autotune.report.jsonout import render_json
from autotune.report.markdown import render_markdown
from autotune.report.sections import AdviceSection, CostSection, Report
from autotune.report.trace_report import run_gpu_time, trace_report
from profilers.contract.profile_summary import ProfileSummary
from profilers.contract.rundir import RunData, load_run
from profilers.contract.study.cost import study_bill
from profilers.contract.traces import is_trace_path

#: Report file names, next to the run's summary.json.
REPORT_FILES: dict[str, str] = {"html": "report.html", "md": "report.md", "json": "report.json"}


@dataclass(frozen=True)
class CostOptions:
    """How to price a run: an explicit price wins over the built-in table (or the user's TOML)."""

    price_per_gpu_hour: float | None = None
    provider: str | None = None
    prices_file: Path | None = None
    duty_cycle: float | None = None  # None: the study's usage (--usage-hours-per-day / 24), else 1
    dataset_samples: int | None = None
    usage_hours_per_day: float | None = None  # a study's bill: None, the study's own


def make_report(run_dir: str | Path, cost: CostOptions | None = None) -> Report:
    """Load ``run_dir`` and build its report (raises RunDirError, PriceTableError on bad input).

    A torch.profiler trace file, or a folder of traces that is no run directory, gets the trace
    report (raises TraceError when no trace in it can be read).
    """
    if is_trace_path(Path(run_dir)):
        return trace_report(Path(run_dir))
    run = load_run(run_dir)
    return report_of(run, cost or CostOptions())


def report_of(run: RunData, options: CostOptions) -> Report:
    """The report of a loaded run."""
    advice = advise(run)
    section, why = price_run(run, options)
    if section is not None:
        advice = with_savings(advice, section)
    report = build_report(run, advice, cost=section, cost_missing=why)
    if run.study is not None:
        price = section.price_per_gpu_hour if section is not None else None
        source = section.price_source if section is not None else None
        bill = study_bill(run.study, price, source, usage_hours_per_day(run, options))
        report = dataclasses.replace(report, overview=dataclasses.replace(report.overview, bill=bill))
    profile = run.profile if run.kind == "tune" else run
    if profile is None:
        return dataclasses.replace(report, missing={**report.missing, "gpu_time": "no run data"})
    gpu_time, no_gpu_time = run_gpu_time(Path(profile.run_dir))
    missing = dict(report.missing)
    if no_gpu_time is not None:
        missing["gpu_time"] = no_gpu_time
    return dataclasses.replace(report, gpu_time=gpu_time, missing=missing)


def _device_name(run: RunData) -> tuple[str | None, str | None]:
    profile = run.profile if run.kind == "tune" else run
    figures = profile.figures if profile is not None else None
    return (figures.device.kind, figures.device.name) if figures is not None else (None, None)


def price_run(run: RunData, options: CostOptions) -> tuple[CostSection | None, str | None]:
    """The cost section, or None with the sentence that says why there is none."""
    kind, name = _device_name(run)
    explicit = options.price_per_gpu_hour
    if explicit is None and run.study is not None:
        explicit = run.study.price_per_gpu_hour
    table = load_prices(options.prices_file)
    gpu_name = name if kind == "cuda" else None
    quote = resolve_price(gpu_name, provider=options.provider, explicit=explicit, table=table)
    if quote is None:
        return None, unavailable_reason(gpu_name, options.provider, table)
    duty = duty_cycle(run, options)
    if run.study is not None:
        section = study_cost_section(run.study, quote, duty, options.dataset_samples)
        if section is None:
            return None, "no trial of the study finished ok, so there is no throughput to price"
    else:
        section = cost_section(run.figures or ProfileSummary.empty(), quote, duty, options.dataset_samples)
    if section.usd_per_million_samples is None and section.usd_per_million_tokens is None:
        return None, "the run has no measured throughput to price"
    return section, None


def usage_hours_per_day(run: RunData, options: CostOptions) -> float | None:
    """Hours a day the job trains: as given, else as its study was told, else None (not said)."""
    return options.usage_hours_per_day or (run.study.usage_hours_per_day if run.study is not None else None)


def duty_cycle(run: RunData, options: CostOptions) -> float:
    """The share of a month the job runs: as given, else the usage in hours a day / 24, else 1."""
    if options.duty_cycle is not None:
        return options.duty_cycle
    usage = usage_hours_per_day(run, options)
    return usage / 24 if usage else 1.0


def with_savings(advice: AdviceSection, cost: CostSection) -> AdviceSection:
    """Each recommendation with an expected speedup gains its saving in % and $ a month.

    Applying a study's best configuration saves what the study measured against its baseline
    (which counts each configuration's devices); any other speedup on the same devices saves
    ``1 - 1/speedup`` of the monthly cost.
    """
    recs = []
    for rec in advice.recommendations:
        if rec.measured and rec.params and cost.saving_pct is not None:
            # The study's own figure: it counts each configuration's devices, a speedup does not.
            rec = dataclasses.replace(
                rec, saving_pct=cost.saving_pct, saving_usd_per_month=cost.saving_usd_per_month
            )
        elif rec.speedup_estimate is not None and rec.speedup_estimate > 1 and rec.saving_pct is None:
            pct, usd = saving_from_speedup(rec.speedup_estimate, cost.usd_per_month)
            rec = dataclasses.replace(rec, saving_pct=pct, saving_usd_per_month=usd)
        recs.append(rec)
    return dataclasses.replace(advice, recommendations=tuple(recs))


def report_path(target: Path, fmt: str) -> Path:
    """Where a report goes by default: in the run (or traces) folder, or next to a trace or snapshot file."""
    if target.is_file():
        stem = target.name.removesuffix(".gz").removesuffix(".json")
        stem = stem.removesuffix(".pickle").removesuffix(".pkl")
        return target.with_name(f"{stem}.{REPORT_FILES[fmt]}")
    return target / REPORT_FILES[fmt]


def render(report: Report, fmt: str) -> str:
    """The report in ``fmt``: ``html``, ``md`` or ``json``."""
    if fmt == "html":
        return render_html(report)
    if fmt == "md":
        return render_markdown(report)
    if fmt == "json":
        return render_json(report)
    raise ValueError(f"unknown report format {fmt!r}")


def write_report(report: Report, fmt: str, path: Path) -> Path:
    """Write the report atomically (a reader never sees half a file); returns the path.

    A path that exists and is no regular file (``/dev/null``, a pipe, a terminal) is written to as
    it is: replacing it would put a file where a device was.
    """
    text = render(report, fmt)
    if path.exists() and not path.is_file():
        with path.open("w", encoding="utf-8") as out:
            out.write(text)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
