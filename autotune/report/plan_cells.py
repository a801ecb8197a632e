"""The plan's JSON (``autotune plan --format json``) as table cells and chart points, torch-free.

Shared by the plan's own Markdown and HTML documents (:mod:`autotune.report.plan_report`) and by the
``plan`` section of a run's report (a ``plan.json`` in the run directory).
"""

from __future__ import annotations

from typing import Any

from autotune.fmt import NA, format_bytes, format_rate, format_seconds, format_usd

#: Rows of the table in a report (the JSON keeps every configuration).
REPORT_ROWS = 40


def gpu_label(c: dict[str, Any]) -> str:
    """``H100-SXM × 8 (2 nodes)``: the GPU, how many, over how many nodes."""
    gpus, nodes = int(c["gpus"]), int(c.get("nodes") or 1)
    if gpus == 1:
        return str(c["gpu"])
    return f"{c['gpu']} × {gpus}" + (f" ({nodes} nodes)" if nodes > 1 else "")


def config_cells(c: dict[str, Any]) -> list[str]:
    """One configuration as the cells of a row under :data:`HEADERS`."""
    p = c["params"]
    interval = c.get("step_time_s_interval")
    rate = c.get("samples_per_s")
    tokens = c.get("tokens_per_s")
    return [
        gpu_label(c),
        f"{p['micro_batch']} × {p['grad_accum']}",
        str(p["precision"]),
        "yes" if p["activation_checkpointing"] else "no",
        str(p["layout"]),
        format_bytes(c.get("peak_memory_bytes")),
        "yes" if c["fits"] else f"no: {c.get('why_not')}",
        format_seconds(c.get("step_time_s")),
        f"{format_seconds(interval[0])}–{format_seconds(interval[1])}" if interval else NA,
        format_rate(rate, "").strip(),
        format_rate(tokens, "").strip(),
        usd_cell(c.get("usd_per_million_samples")),
        usd_cell(c.get("usd_per_million_tokens")),
        usd_cell(c.get("usd_total")),
    ]


HEADERS = ["GPU", "micro-batch × accum", "precision", "ckpt", "layout", "peak memory", "fits", "step",
           "interval", "samples/s", "tokens/s", "$/M samples", "$/M tokens", "$ for the run"]  # fmt: skip


def usd_cell(value: float | None) -> str:
    """Dollars, or n/a."""
    return NA if value is None else format_usd(value)


def plan_title(data: dict[str, Any]) -> str:
    """``Plan: train.py`` (the script, else the demo model)."""
    model = data.get("model") or {}
    name = model.get("script") or model.get("demo") or "the model"
    return f"Plan: {name}"


def summary_lines(data: dict[str, Any]) -> list[str]:
    """The model's size, its own batch, how many configurations fit, and the plan's suggestion."""
    model = data.get("model") or {}
    lines = []
    if model.get("parameters") is not None:
        lines.append(f"{model['parameters']:,} parameters ({format_bytes(model.get('parameter_bytes'))})")
    if model.get("micro_batch") is not None:
        own = f"{model['micro_batch']} × {model.get('accumulation', 1)}"
        lines.append(f"the script's own micro-batch × accumulation: {own}")
    if model.get("tokens_per_sample"):
        lines.append(f"{model['tokens_per_sample']} tokens per sample")
    configs = data.get("configs") or []
    fit = sum(1 for c in configs if c["fits"])
    lines.append(f"{len(configs)} configurations, {fit} fit; traced in {data.get('trace_s', 0):.1f} s")
    suggestion = data.get("suggestion") or {}
    if suggestion.get("text"):
        lines.append(f"Suggestion: {suggestion['text']}")
    return lines


def cost_time_points(data: dict[str, Any]) -> dict[str, list[tuple[float, float, str]]]:
    """Per GPU: (hours to train, $, configuration) of each fitting configuration.

    With a run (``usd_total``) the hours and $ are the whole run's; without, per million samples.
    """
    series: dict[str, list[tuple[float, float, str]]] = {}
    for c in data.get("configs") or []:
        rate, total, per_m = c.get("samples_per_s"), c.get("usd_total"), c.get("usd_per_million_samples")
        if not c["fits"] or not rate or per_m is None:
            continue
        usd = total if total is not None else per_m
        samples = 1e6 * usd / per_m  # the run's samples (a million without a run)
        p = c["params"]
        ckpt = " ckpt" if p["activation_checkpointing"] else ""
        label = f"{p['micro_batch']}×{p['grad_accum']} {p['precision']}{ckpt} {p['layout']}"
        gpu = gpu_label(c)
        series.setdefault(gpu, []).append((samples / rate / 3600, usd, label))
    return series


def trust_notes(data: dict[str, Any]) -> list[str]:
    """What the figures rest on: the plan's notes, this machine's rows', and its calibration's."""
    calibration = data.get("calibration") or {}
    cpu = calibration.get("cpu")
    notes = [
        *(data.get("notes") or []),
        *(cpu_notes(cpu) if isinstance(cpu, dict) else []),
        calibration.get("note"),
    ]
    return [str(n) for n in notes if n]


def cpu_notes(cpu: dict[str, Any]) -> list[str]:
    """What the ``this-cpu`` rows rest on: the timed (or probed) costs, and the measured workspace.

    Sentences without their final stop, as the plan's other notes.
    """
    if cpu["held_out"]:
        errors = ", ".join(
            f"{row['config']} {100 * (row['predicted_s'] / row['measured_s'] - 1):+.0f}%"
            for row in cpu["held_out"]
        )
        lines = [
            f"This CPU, calibrated on {len(cpu['fitted_on'])} timed configurations; on "
            f"{len(cpu['held_out'])} others: median error "
            f"{100 * (cpu['held_out_median_error'] or 0):.1f}% ({errors})"
        ]
    else:
        lines = ["This CPU: step times at the costs a 2 s probe measured here (not timed on this model)"]
    memory = cpu.get("memory")
    if memory:
        checked = (
            f"on {len(memory['held_out'])} others: median error "
            f"{100 * (memory['held_out_median_error'] or 0):.1f}%"
            if memory["held_out"]
            else "taken in proportion to the micro-batch, not checked on others"
        )
        fitted = memory["fitted_on"]
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
    "gpu_label",
    "plan_title",
    "summary_lines",
    "trust_notes",
    "usd_cell",
]  # fmt: skip
