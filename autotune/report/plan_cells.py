"""The plan's JSON (``autotune plan --format json``) as table cells and chart points, torch-free.

Shared by the plan's own Markdown and HTML documents (:mod:`autotune.report.plan_report`) and by the
``plan`` section of a run's report (a ``plan.json`` in the run directory).
"""

from __future__ import annotations

from autotune.fmt import NA, format_bytes, format_rate, format_seconds, format_usd
from profilers.contract.plan_doc import CpuCheck, PlanConfig, PlanDocument

#: Rows of the table in a report (the JSON keeps every configuration).
REPORT_ROWS = 40


def config_cells(c: PlanConfig) -> list[str]:
    """One configuration as the cells of a row under :data:`HEADERS`."""
    p, interval = c.params, c.step_time_s_interval
    return [
        c.gpu_label,
        f"{p.micro_batch} × {p.grad_accum}",
        p.precision,
        "yes" if p.activation_checkpointing else "no",
        p.layout_label,
        format_bytes(c.peak_memory_bytes),
        "yes" if c.fits else f"no: {c.why_not}",
        format_seconds(c.step_time_s) + (" (host)" if c.step_bound == "host" else ""),
        f"{format_seconds(interval[0])}–{format_seconds(interval[1])}" if interval else NA,
        format_rate(c.samples_per_s, "").strip(),
        format_rate(c.tokens_per_s, "").strip(),
        usd_cell(c.usd_per_million_samples),
        usd_cell(c.usd_per_million_tokens),
        usd_cell(c.usd_total),
    ]


HEADERS = ["GPU", "micro-batch × accum", "precision", "ckpt", "layout", "peak memory", "fits", "step",
           "interval", "samples/s", "tokens/s", "$/M samples", "$/M tokens", "$ for the run"]  # fmt: skip


def usd_cell(value: float | None) -> str:
    """Dollars, or n/a."""
    return NA if value is None else format_usd(value)


def summary_lines(plan: PlanDocument) -> list[str]:
    """The model's size, its own batch, how many configurations fit, and the plan's suggestion."""
    model = plan.model
    lines = []
    if model.parameters is not None:
        lines.append(f"{model.parameters:,} parameters ({format_bytes(model.parameter_bytes)})")
    if model.micro_batch is not None:
        own = f"{model.micro_batch} × {model.accumulation or 1}"
        lines.append(f"the script's own micro-batch × accumulation: {own}")
    if model.tokens_per_sample:
        lines.append(f"{model.tokens_per_sample} tokens per sample")
    fit = sum(1 for c in plan.configs if c.fits)
    lines.append(f"{len(plan.configs)} configurations, {fit} fit; traced in {plan.trace_s:.1f} s")
    if plan.suggestion_text:
        lines.append(f"Suggestion: {plan.suggestion_text}")
    return lines


def cost_time_points(plan: PlanDocument) -> dict[str, list[tuple[float, float, str]]]:
    """Per GPU: (hours to train, $, configuration) of each fitting configuration.

    With a run (``usd_total``) the hours and $ are the whole run's; without, per million samples.
    """
    series: dict[str, list[tuple[float, float, str]]] = {}
    for c in plan.configs:
        rate, total, per_m = c.samples_per_s, c.usd_total, c.usd_per_million_samples
        if not c.fits or not rate or per_m is None:
            continue
        usd = total if total is not None else per_m
        samples = 1e6 * usd / per_m  # the run's samples (a million without a run)
        series.setdefault(c.gpu_label, []).append((samples / rate / 3600, usd, c.params.label))
    return series


def trust_notes(plan: PlanDocument) -> list[str]:
    """What the figures rest on: the plan's notes, this machine's rows', and its calibration's."""
    cpu = cpu_notes(plan.cpu, plan.cpu_memory) if plan.cpu is not None else []
    return [n for n in (*plan.notes, *cpu, plan.calibration_note) if n]


def cpu_notes(cpu: CpuCheck, memory: CpuCheck | None) -> list[str]:
    """What the ``this-cpu`` rows rest on: the timed (or probed) costs, and the measured workspace.

    Sentences without their final stop, as the plan's other notes.
    """
    if cpu.held_out:
        errors = ", ".join(
            f"{row.config} {100 * (row.predicted / row.measured - 1):+.0f}%" for row in cpu.held_out
        )
        lines = [
            f"This CPU, calibrated on {len(cpu.fitted_on)} timed configurations; on "
            f"{len(cpu.held_out)} others: median error "
            f"{100 * (cpu.held_out_median_error or 0):.1f}% ({errors})"
        ]
    else:
        lines = ["This CPU: step times at the costs a short probe measured here (not timed on this model)"]
    if cpu.spread is not None and cpu.spread > 1:
        lines[0] += (
            f"; the machine was busy during its probe (its rounds' costs ranged over {1 + cpu.spread:.0f}×): "
            "the fastest sample of each kernel is used"
        )
    elif cpu.spread is not None:
        lines[0] += f"; its probe's rounds ranged up to {100 * cpu.spread:.0f}% (the fastest of each is used)"
    if memory is not None:
        checked = (
            f"on {len(memory.held_out)} others: median error {100 * (memory.held_out_median_error or 0):.1f}%"
            if memory.held_out
            else "taken in proportion to the micro-batch, not checked on others"
        )
        fitted = memory.fitted_on
        where = ", ".join(fitted) if len(fitted) <= 2 else f"{len(fitted)} configurations"
        lines.append(
            f"Its memory: the trace plus the kernel workspace real steps took beyond it, measured at "
            f"{where}; {checked} (this CPU's rows only: a GPU's kernels keep workspaces of their own)"
        )
    return lines


#: Numeric columns of :data:`HEADERS` (right-aligned in HTML).
NUMERIC_COLUMNS = frozenset({5, 7, 8, 9, 10, 11, 12, 13})

__all__ = [
    "HEADERS",
    "NUMERIC_COLUMNS",
    "REPORT_ROWS",
    "config_cells",
    "cost_time_points",
    "cpu_notes",
    "summary_lines",
    "trust_notes",
    "usd_cell",
]  # fmt: skip
