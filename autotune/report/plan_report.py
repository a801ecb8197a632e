"""The plan as a report: Markdown for a pull request, one self-contained HTML page with its chart.

Both are drawn from the plan's JSON (``autotune plan --format json``'s object), so this layer needs
no torch: the configurations cheapest first, the ones that do not fit with why, and (HTML) the
chart of $ against time to train, one series per GPU, which shows at a glance which GPU is cheaper
and which is faster for this training.
"""

from __future__ import annotations

from typing import Any

from autotune.fmt import NA, format_bytes, format_seconds, format_usd
from autotune.report.html import _CSS, _JS, _chart_div, _table, esc, script_json
from autotune.report.markdown import md_text

#: Rows of the table in a report (the JSON keeps every configuration).
REPORT_ROWS = 40


def _gpu(c: dict[str, Any]) -> str:
    gpus, nodes = int(c["gpus"]), int(c.get("nodes") or 1)
    if gpus == 1:
        return str(c["gpu"])
    return f"{c['gpu']} × {gpus}" + (f" ({nodes} nodes)" if nodes > 1 else "")


def _config_cells(c: dict[str, Any]) -> list[str]:
    p = c["params"]
    interval = c.get("step_time_s_interval")
    rate = c.get("samples_per_s")
    tokens = c.get("tokens_per_s")
    return [
        _gpu(c),
        f"{p['micro_batch']} × {p['grad_accum']}",
        str(p["precision"]),
        "yes" if p["activation_checkpointing"] else "no",
        str(p["layout"]),
        format_bytes(c.get("peak_memory_bytes")),
        "yes" if c["fits"] else f"no: {c.get('why_not')}",
        format_seconds(c.get("step_time_s")),
        f"{format_seconds(interval[0])}–{format_seconds(interval[1])}" if interval else NA,
        NA if rate is None else f"{rate:,.0f}",
        NA if tokens is None else f"{tokens:,.0f}",
        _usd(c.get("usd_per_million_samples")),
        _usd(c.get("usd_per_million_tokens")),
        _usd(c.get("usd_total")),
    ]


HEADERS = ["GPU", "micro-batch × accum", "precision", "ckpt", "layout", "peak memory", "fits", "step",
           "interval", "samples/s", "tokens/s", "$/M samples", "$/M tokens", "$ for the run"]  # fmt: skip


def _usd(value: float | None) -> str:
    return NA if value is None else format_usd(value)


def _title(data: dict[str, Any]) -> str:
    model = data.get("model") or {}
    name = model.get("script") or model.get("demo") or "the model"
    return f"Plan: {name}"


def _summary_lines(data: dict[str, Any]) -> list[str]:
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
    return lines


def plan_markdown(data: dict[str, Any], rows: int = REPORT_ROWS) -> str:
    """The plan as one Markdown document (GFM tables)."""
    out = [f"# {md_text(_title(data))}", ""]
    out += [f"- {md_text(line)}" for line in _summary_lines(data)]
    out += ["", "## Configurations, cheapest first", ""]
    out.append("| " + " | ".join(HEADERS) + " |")
    out.append("|" + "|".join("---" for _ in HEADERS) + "|")
    for c in (data.get("configs") or [])[:rows]:
        out.append("| " + " | ".join(md_text(cell) for cell in _config_cells(c)) + " |")
    notes = [*(data.get("notes") or []), (data.get("calibration") or {}).get("note")]
    if any(notes):
        out += ["", "## How far to trust it", ""]
        out += [f"- {md_text(n)}" for n in notes if n]
    return "\n".join(out).rstrip() + "\n"


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
        gpu = _gpu(c)
        series.setdefault(gpu, []).append((samples / rate / 3600, usd, label))
    return series


def plan_html(data: dict[str, Any], rows: int = REPORT_ROWS) -> str:
    """The plan as one self-contained HTML page: the table and the $-against-time chart (plotly inside)."""
    import plotly.graph_objects as go  # type: ignore[import-untyped]
    import plotly.offline  # type: ignore[import-untyped]

    from autotune.report.html_charts import _chart, plot_text, template_json

    series = cost_time_points(data)
    with_run = any(c.get("usd_total") is not None for c in data.get("configs") or [])
    fig = go.Figure()
    for gpu, points in series.items():
        fig.add_scatter(
            x=[h for h, _, _ in points], y=[u for _, u, _ in points], mode="markers", name=plot_text(gpu),
            text=[plot_text(label) for _, _, label in points],
            hovertemplate="%{text}<br>%{x:.3g} h · $%{y:.3g}<extra>" + plot_text(gpu) + "</extra>",
        )  # fmt: skip
    what = "the run" if with_run else "a million samples"
    fig.update_xaxes(title_text=f"hours to train {what}", type="log")
    fig.update_yaxes(title_text=f"$ for {what}", type="log")
    caption = "Each point a configuration that fits; lower is cheaper, left is faster."
    chart = _chart("plan-cost-time", f"$ against time to train {what}", fig, 420, caption)
    cells = [[esc(cell) for cell in _config_cells(c)] for c in (data.get("configs") or [])[:rows]]
    table = _table(HEADERS, cells, num_cols=frozenset({5, 7, 8, 9, 10, 11, 12, 13}))
    notes = [*(data.get("notes") or []), (data.get("calibration") or {}).get("note")]
    summary = "".join(f"<li>{esc(line)}</li>" for line in _summary_lines(data))
    trust = "".join(f"<li>{esc(n)}</li>" for n in notes if n)
    payload = {"template": template_json(), "charts": [{"id": chart.div_id, **chart.figure}]}
    title = esc(_title(data))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="gpu-autotune"><title>{title}</title>'
        f"<style>{_CSS}</style>\n<script>{plotly.offline.get_plotlyjs()}</script>\n</head><body>"
        f'<header class="top"><h1>{title}</h1></header><main>'
        f'<section id="plan"><h2>The model</h2><ul>{summary}</ul>'
        f"<h2>$ against time to train</h2>{_chart_div(chart)}"
        f"<h2>Configurations, cheapest first</h2>{table}"
        f"<h2>How far to trust it</h2><ul>{trust}</ul></section></main>"
        "<footer>gpu-autotune plan · self-contained: works offline</footer>\n"
        f'<script type="application/json" id="autotune-charts">{script_json(payload)}</script>\n'
        f"<script>{_JS}</script>\n</body></html>\n"
    )


__all__ = ["cost_time_points", "plan_html", "plan_markdown"]
