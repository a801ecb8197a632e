"""The self-contained HTML report: one file, plotly.js embedded once, nothing loaded from the network.

:func:`render_html` draws a :class:`~autotune.report.sections.Report` and nothing else. Sections
come in :data:`~autotune.report.sections.SECTION_TITLES` order (with the rules that were checked
before the environment); a section that is None shows its heading and the sentence of
``Report.missing`` instead of an empty chart. The charts are built by
:mod:`autotune.report.html_charts` (which imports plotly; this module does not until it renders).

Every user-supplied string is escaped: :func:`esc` for the HTML, and the chart data is placed in a
``<script type="application/json">`` block whose ``<``, ``>`` and ``&`` are written as JSON
unicode escapes, so no string can close the script element.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from html import escape
from typing import TYPE_CHECKING, Any

from autotune.fmt import NA, format_bytes, format_number, format_pct, format_rate, format_seconds, format_usd
from autotune.report.gpu_time_tables import tables
from autotune.report.plan_cells import (
    HEADERS,
    NUMERIC_COLUMNS,
    REPORT_ROWS,
    config_cells,
    summary_lines,
    trust_notes,
)
from autotune.report.sections import SECTION_TITLES
from autotune.report.style import OTHER_STATUS_COLOUR, STATUS_COLOURS, metric_label
from profilers.contract.outcome import stop_reason_words
from profilers.contract.plan_doc import PlanDocument
from profilers.contract.schema import Params
from profilers.contract.study.bill import device_time, payback_time
from profilers.contract.study.verdict import VERDICT_LABELS, VerdictStatus

if TYPE_CHECKING:
    from autotune.advice.records import Recommendation
    from autotune.report.html_charts import Chart
    from autotune.report.sections import (
        AdviceSection,
        CostSection,
        EnvironmentSection,
        GpuTimeSection,
        Overview,
        Report,
        StepSection,
        TrialSection,
    )

#: Where the rules table goes: a section of its own, after the trials, before the environment.
RULES_KEY, RULES_TITLE = "rules", "Rules checked"
_TRIAL_FIGURES = ("Samples/s", "Peak memory", "Step time", "Ranks", "Duration", "Stopped by / error")
_SEVERITY_COLOURS = {"high": "#cf222e", "medium": "#d97706", "low": "#0969da"}
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}

_CSS = """
*{box-sizing:border-box}body{margin:0;background:#f6f8fa;color:#1f2328;
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
header.top{background:#24292f;color:#fff;padding:18px 28px 12px}
header.top h1{margin:0 0 4px;font-size:22px;font-weight:600;overflow-wrap:anywhere}
header.top .meta{color:#c9d1d9;font-size:13px;overflow-wrap:anywhere}
nav{margin-top:10px;display:flex;flex-wrap:wrap;gap:4px 14px;font-size:13px}
nav a{color:#9ecbff;text-decoration:none}nav a:hover{text-decoration:underline}
main{max-width:1240px;margin:0 auto;padding:8px 20px 40px}
section{background:#fff;border:1px solid #d0d7de;border-radius:8px;margin:16px 0;padding:14px 18px}
h2{font-size:17px;margin:0 0 10px;padding-bottom:6px;border-bottom:1px solid #eaeef2}
h3{font-size:15px;margin:0}
h4{font-size:12px;margin:8px 0 2px;text-transform:uppercase;color:#57606a;letter-spacing:.04em}
p{margin:6px 0}ul,ol{margin:2px 0 4px;padding-left:22px}.missing{color:#57606a;font-style:italic}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(175px,1fr));gap:10px}
.card{border:1px solid #d0d7de;border-radius:6px;padding:8px 12px;background:#f6f8fa}
.card .label{font-size:12px;color:#57606a}
.card .value{font-size:19px;font-weight:600;overflow-wrap:anywhere}
.card .sub{font-size:12px;color:#57606a}.best{margin-top:10px}
code,.mono{font:12.5px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eff1f3;
border-radius:4px;padding:1px 5px;overflow-wrap:anywhere}
.notes{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;padding:6px 10px;margin-top:10px}
.rec{border:1px solid #d0d7de;border-left:5px solid var(--sev);border-radius:6px;padding:10px 14px;
margin:10px 0}.rec header{display:flex;align-items:center;gap:8px;flex-wrap:wrap}
.badge,.tag,.pill{display:inline-block;border-radius:10px;padding:1px 8px;font-size:11.5px;
font-weight:600;color:#fff;white-space:nowrap}.badge{background:var(--sev);text-transform:uppercase}
.tag{background:#eaeef2;color:#1f2328;font-weight:500}.tag.measured{background:#dafbe1;color:#1a7f37}
.gain{color:#1f2328}.gain b{color:#1a7f37}.cols{display:grid;grid-template-columns:1fr 1fr;gap:0 24px}
@media (max-width:800px){.cols{grid-template-columns:1fr}}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{padding:4px 8px;border-bottom:1px solid #eaeef2;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600;color:#424a53;white-space:nowrap}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.best-row td{background:#dafbe1}tr.baseline-row td{background:#ddf4ff}.table-wrap{overflow-x:auto}
.err{color:#cf222e;font-size:12px;max-width:360px;overflow-wrap:anywhere;white-space:pre-wrap}
.chart{width:100%;margin:6px 0}.caption{color:#57606a;font-size:12px;margin:0 0 8px}
.nowrap{white-space:nowrap}.stats{color:#424a53}.kv th{width:220px}
footer{color:#57606a;font-size:12px;text-align:center;padding:12px}
"""

_JS = """
(function () {
  var payload = JSON.parse(document.getElementById('autotune-charts').textContent);
  var config = {displaylogo: false, responsive: true, modeBarButtonsToRemove: ['select2d', 'lasso2d']};
  payload.charts.forEach(function (c) {
    c.layout.template = payload.template;
    Plotly.newPlot(c.id, c.data, c.layout, config);
  });
})();
"""


# ------------------------------------------------------------------------------------- formatting


def esc(value: object) -> str:
    """``value`` as HTML text: ``<``, ``>``, ``&`` and both quotes escaped."""
    return escape(str(value), quote=True)


def format_params(params: Params) -> str:
    """A configuration as escaped ``<code>key=value</code>`` chips."""
    return " ".join(f"<code>{esc(k)}={esc(v)}</code>" for k, v in params.items())


def script_json(data: Any) -> str:
    """JSON that is safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` left raw.

    Written by plotly's encoder, which also writes NaN and infinities as ``null`` and reads numpy.
    """
    from plotly.utils import PlotlyJSONEncoder  # type: ignore[import-untyped]

    text = json.dumps(data, cls=PlotlyJSONEncoder, separators=(",", ":"))
    for raw, escaped in _JSON_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


def _table(
    headers: list[str],
    rows: list[list[str]],
    num_cols: frozenset[int] = frozenset(),
    row_classes: list[str] | None = None,
    cls: str = "",
) -> str:
    """An HTML table; ``headers`` are plain text, ``rows`` already-escaped HTML cells."""
    head = "".join(f"<th{' class=num' if i in num_cols else ''}>{esc(h)}</th>" for i, h in enumerate(headers))
    body = []
    for r, row in enumerate(rows):
        rc = f' class="{row_classes[r]}"' if row_classes and row_classes[r] else ""
        cells = "".join(f"<td{' class=num' if i in num_cols else ''}>{c}</td>" for i, c in enumerate(row))
        body.append(f"<tr{rc}>{cells}</tr>")
    return (
        f'<div class="table-wrap"><table class="{cls}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _kv_table(items: list[tuple[str, str]]) -> str:
    """A two-column label/value table; labels are plain text, values already-escaped HTML."""
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in items)
    return f'<div class="table-wrap"><table class="kv"><tbody>{rows}</tbody></table></div>'


def _status_pill(status: str) -> str:
    colour = STATUS_COLOURS.get(status, OTHER_STATUS_COLOUR)
    return f'<span class="pill" style="background:{colour}">{esc(status)}</span>'


def _chart_div(chart: Chart) -> str:
    caption = f'<p class="caption">{esc(chart.caption)}</p>' if chart.caption else ""
    return (
        f'<div class="chart" id="{esc(chart.div_id)}" role="img" aria-label="{esc(chart.label)}" '
        f'style="height:{chart.height_px}px"></div>{caption}'
    )


# --------------------------------------------------------------------------------------- sections


def _overview(o: Overview) -> str:
    cards = [
        ("Step time (median)", format_seconds(o.step_time_median_s), ""),
        (
            "Throughput",
            format_rate(o.samples_per_s, "samples/s"),
            format_rate(o.tokens_per_s, "tokens/s") if o.tokens_per_s is not None else "",
        ),
        ("Peak memory", format_bytes(o.peak_memory_bytes), "per device"),
        ("Precision", o.precision or NA, ""),
        ("Device", o.device or NA, f"{o.world_size} rank{'s' if o.world_size != 1 else ''}"),
        ("MFU", format_pct(o.mfu), "model FLOP utilisation"),
    ]
    if o.speedup is not None:
        sub = VERDICT_LABELS.get(o.verdict or "", "see the verdict")
        cards.append(("Speed-up vs baseline", f"{o.speedup:.2f}×", sub))
    if o.bill is not None:
        spent = format_usd(o.bill.usd) if o.bill.usd is not None else device_time(o.bill.device_hours)
        back = o.bill.payback_training_hours
        sub = f"pays back after {payback_time(back)} of training" if back is not None else "claims no saving"
        cards.append(("Study cost", spent, sub))
    html = "".join(
        f'<div class="card"><div class="label">{esc(label)}</div><div class="value">{esc(value)}</div>'
        f'<div class="sub">{esc(sub)}</div></div>'
        for label, value, sub in cards
    )
    kind = o.kind_label
    state = "finished" if o.finished else "did not finish (the summary was rebuilt from what was written)"
    if o.outcome is not None and (o.outcome != "finished" or o.finished):
        state = o.outcome  # how the run itself ended: crashed, stopped, no training step
    out = [
        f'<p class="stats">{esc(kind)} <b>{esc(o.name)}</b>, {esc(state)}.</p>',
        f'<div class="cards">{html}</div>',
    ]
    if o.load:
        out.append(f'<p class="load">Machine load: {esc(o.load)}</p>')
    if o.best_params is None and o.verdict == VerdictStatus.NO_EFFECT:
        out.append('<p class="best">Best configuration: none: nothing the study tuned had an effect</p>')
    elif o.best_params:
        out.append(f'<p class="best">{esc(o.best_label)} configuration: {format_params(o.best_params)}</p>')
    if o.verdict_headline:
        out.append(f'<p class="verdict"><b>Verdict</b>: {esc(o.verdict_headline)}</p>')
    if o.placement:
        out.append(f'<p class="placement">How the trials ran: {esc(o.placement)}</p>')
    if o.bill is not None:
        words = f"{o.bill.cost_words()}; {o.bill.payback_words()}"
        out.append(f'<p class="bill">Cost of the study: {esc(words)}</p>')
    if o.starved:
        out.append(f'<p class="load">Busy machine: {esc(o.starved)}</p>')
    if o.notes:
        notes = "".join(f"<li>{esc(n)}</li>" for n in o.notes)
        out.append(f'<div class="notes"><b>Notes</b><ul>{notes}</ul></div>')
    return "".join(out)


def _gain(r: Recommendation) -> str:
    parts = r.gain_parts()
    if not parts:
        return ""
    bound = ""
    if r.speedup_estimate is not None:
        bound = " (measured in a tuning trial)" if r.measured else " (an upper bound)"
    return f'<p class="gain">Expected: <b>{esc(" · ".join(parts))}</b>{esc(bound)}</p>'


def _recommendation(r: Recommendation) -> str:
    sev = _SEVERITY_COLOURS.get(r.severity, OTHER_STATUS_COLOUR)
    tag = ""
    if r.speedup_estimate is not None:  # a gain to qualify: measured by a trial, or an upper bound
        kind = "measured" if r.measured else "estimated"
        tag = f'<span class="tag {kind}">{kind}</span>'
    evidence = "".join(f"<li>{esc(e)}</li>" for e in r.evidence) or "<li>none recorded</li>"
    actions = "".join(f"<li>{esc(a)}</li>" for a in r.actions) or "<li>none</li>"
    params = f"<p>Apply: {format_params(r.params)}</p>" if r.params else ""
    return (
        f'<article class="rec" style="--sev:{sev}"><header><span class="badge">{esc(r.severity)}</span>'
        f"<h3>{esc(r.title)}</h3>{tag}</header>{_gain(r)}"
        f'<div class="cols"><div><h4>Evidence</h4><ul>{evidence}</ul></div>'
        f"<div><h4>Actions</h4><ol>{actions}</ol></div></div>{params}</article>"
    )


def _advice(a: AdviceSection) -> str:
    if not a.recommendations:
        return "<p>No rule fired: nothing in this run calls for a change.</p>"
    return "".join(_recommendation(r) for r in a.recommendations)


def _rules(a: AdviceSection) -> str:
    rows = [[esc(t.title), esc(t.metric), esc(t.limit_text()), esc(t.source)] for t in a.rules_checked]
    out = (
        _table(["Rule", "Measured quantity", "Fires when", "Source"], rows)
        if rows
        else '<p class="missing">No rule had the data it needs.</p>'
    )
    if a.not_checked:
        out += "<h4>Not checked</h4><ul>" + "".join(f"<li>{esc(n)}</li>" for n in a.not_checked) + "</ul>"
    return out


def _cost(c: CostSection) -> str:
    items = [
        ("Price", f"{esc(format_usd(c.price_per_gpu_hour))} per device-hour ({esc(c.price_source)})"),
        ("Devices billed", esc(c.devices)),
        ("Per million samples", esc(format_usd(c.usd_per_million_samples))),
    ]
    if c.usd_per_million_tokens is not None:
        items.append(("Per million tokens", esc(format_usd(c.usd_per_million_tokens))))
    if c.usd_per_epoch is not None:
        size = f" ({c.dataset_samples:,} samples)" if c.dataset_samples else ""
        items.append(("Per epoch", esc(format_usd(c.usd_per_epoch) + size)))
    items.append(
        ("Per month", esc(f"{format_usd(c.usd_per_month)} at a {format_pct(c.duty_cycle, 0)} duty cycle"))
    )
    if c.joules_per_sample is not None:
        items.append(("Energy", esc(f"{format_number(c.joules_per_sample)} J per sample")))
    if c.baseline_usd_per_million_samples is not None:
        items.append(("Baseline per million samples", esc(format_usd(c.baseline_usd_per_million_samples))))
    if c.saving_usd_per_million_samples is not None:
        pct = f" ({c.saving_pct:.1f}%)" if c.saving_pct is not None else ""
        items.append(("Saving per million samples", esc(format_usd(c.saving_usd_per_million_samples) + pct)))
    if c.saving_usd_per_month is not None:
        items.append(("Saving per month", esc(format_usd(c.saving_usd_per_month))))
    return _kv_table(items)


def _steps_stats(s: StepSection) -> str:
    outliers = f", {len(s.outlier_steps)} outlier steps" if s.outlier_steps else ""
    return (
        f'<p class="stats">Median <b>{esc(format_seconds(s.median_s))}</b> per step '
        f"(p10 {esc(format_seconds(s.p10_s))}, p90 {esc(format_seconds(s.p90_s))}){outliers}.</p>"
    )


def _steps(s: StepSection) -> str:
    rows = [[esc(r.phase), esc(format_pct(r.share)), esc(format_seconds(r.median_s))] for r in s.phase_rows()]
    out = _table(["Phase", "Share of step", "Median per step"], rows, frozenset({1, 2}))
    if len(s.per_rank_median_s) > 1:
        ranks = [[esc(r), esc(format_seconds(v))] for r, v in sorted(s.per_rank_median_s.items())]
        out += "<h4>Median per rank</h4>" + _table(["Rank", "Median step time"], ranks, frozenset({1}))
    return out


def _gpu_time(g: GpuTimeSection) -> str:
    parts = [f"<p>From <code>{esc(g.source)}</code> (definitions of Holistic Trace Analysis).</p>"]
    for t in tables(g):
        parts.append(f"<h3>{esc(t.title)}</h3>")
        parts.append(_table(list(t.header), [[esc(c) for c in row] for row in t.rows], t.numeric))
    if g.problems:
        parts.append("<p>Not read:</p><ul>" + "".join(f"<li>{esc(p)}</li>" for p in g.problems) + "</ul>")
    return "".join(parts)


def _trials(t: TrialSection) -> str:
    keys: list[str] = []
    for row in t.rows:
        keys.extend(k for k in row.params if k not in keys)
    show_objective = t.metric != "samples_per_s"
    objective = [metric_label(t.metric)] if show_objective else []
    headers = ["Trial", *keys, "Status", *objective, *_TRIAL_FIGURES]
    first_num = len(keys) + 2
    rows, classes = [], []
    for row in t.rows:
        marks = "".join(
            f' <span class="tag">{m}</span>'
            for m, on in ((esc(t.best_label), row.best), ("baseline", row.baseline))
            if on
        )
        stop = esc(stop_reason_words(row.stop_reason))
        if row.error:
            stop += f'<div class="err">{esc(row.error)}</div>'
        cells = [
            f'<span class="nowrap">#{row.id}{marks}</span>',
            *(esc(row.params.get(k, "")) for k in keys),
            _status_pill(row.status),
        ]
        if show_objective:
            cells.append(esc(format_number(row.objective, 4)))
        cells += [
            esc(format_rate(row.samples_per_s, "")).strip(),
            esc(format_bytes(row.peak_memory_bytes)),
            esc(format_seconds(row.step_time_s)),
            esc(row.world_size if row.world_size else NA),
            esc(format_seconds(row.duration_s)),
            stop,
        ]
        rows.append(cells)
        classes.append("best-row" if row.best else "baseline-row" if row.baseline else "")
    nums = frozenset(range(first_num, len(headers) - 1))
    return _table(headers, rows, nums, classes)


def plan_body(data: PlanDocument, draw: Callable[[list[Chart]], str]) -> str:
    """The plan in HTML: the model, the $-against-time chart, the table, what it rests on."""
    from autotune.report import html_charts as hc  # plotly: only when rendering

    summary = "".join(f"<li>{esc(line)}</li>" for line in summary_lines(data))
    cells = [[esc(cell) for cell in config_cells(c)] for c in data.configs[:REPORT_ROWS]]
    trust = "".join(f"<li>{esc(n)}</li>" for n in trust_notes(data))
    return (
        f"<h3>The model</h3><ul>{summary}</ul>{draw(hc.plan_charts(data))}"
        f"<h3>Configurations, cheapest first</h3>{_table(HEADERS, cells, num_cols=NUMERIC_COLUMNS)}"
        + (f"<h3>How far to trust it</h3><ul>{trust}</ul>" if trust else "")
    )


def _environment(e: EnvironmentSection) -> str:
    return _kv_table([(k, f'<span class="mono">{esc(v)}</span>') for k, v in e.items])


# ------------------------------------------------------------------------------------------- page


def _section(key: str, title: str, body: str) -> str:
    return f'<section id="{key}"><h2>{esc(title)}</h2>{body}</section>'


def _missing(report: Report, key: str) -> str:
    sentence = report.missing.get(key) or "Not available for this run."
    return f'<p class="missing">{esc(sentence)}</p>'


def _body(report: Report, key: str, charts: list[Chart]) -> str | None:
    """The HTML of one section (its charts appended to ``charts``), or None when it is missing."""
    from autotune.report import html_charts as hc

    def draw(drawn: list[Chart]) -> str:
        charts.extend(drawn)
        return "".join(_chart_div(c) for c in drawn)

    r = report
    match key:
        case "overview":
            return _overview(r.overview)
        case "advice":
            return _advice(r.advice)
        case "cost":
            return None if r.cost is None else _cost(r.cost)
        case "steps":
            s = r.steps
            return None if s is None else _steps_stats(s) + draw(hc.step_charts(s)) + _steps(s)
        case "gpu_time":
            g = r.gpu_time
            return None if g is None else draw(hc.gpu_time_charts(g)) + _gpu_time(g)
        case "timelines":
            return None if r.timelines is None else draw(hc.gpu_charts(r.timelines))
        case "host":
            return None if r.host is None else draw(hc.host_charts(r.host))
        case "sweep":
            return None if r.sweep is None else draw(hc.sweep_charts(r.sweep))
        case "convergence":
            return None if r.convergence is None else draw(hc.convergence_charts(r.convergence))
        case "pareto":
            return None if r.pareto is None else draw(hc.pareto_charts(r.pareto))
        case "trials":
            return None if r.trials is None else _trials(r.trials)
        case "plan":
            return None if r.plan is None else plan_body(r.plan, draw)
        case "rules":
            return _rules(r.advice)
        case "environment":
            return _environment(r.environment)
    raise ValueError(f"unknown report section {key!r}")


def section_order() -> list[tuple[str, str]]:
    """(key, heading) of every HTML section in page order; the rules table comes before the environment."""
    order = [(k, t) for k, t in SECTION_TITLES.items() if k != "environment"]
    return [*order, (RULES_KEY, RULES_TITLE), ("environment", SECTION_TITLES["environment"])]


def render_html(report: Report) -> str:
    """The report as one self-contained HTML page (plotly.js inside; nothing loaded from the network)."""
    import plotly.offline  # type: ignore[import-untyped]

    from autotune.report.html_charts import template_json

    charts: list[Chart] = []
    sections, nav = [], []
    for key, title in section_order():
        body = _body(report, key, charts)
        sections.append(_section(key, title, _missing(report, key) if body is None else body))
        nav.append(f'<a href="#{key}">{esc(title)}</a>')
    payload = {
        "template": template_json() if charts else {},
        "charts": [{"id": c.div_id, **c.figure} for c in charts],
    }
    o = report.overview
    kind = o.kind_label
    meta = " · ".join(esc(m) for m in (kind, f"generated {report.generated_at}", o.run_dir))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="gpu-autotune"><title>{esc(report.title)}</title>'
        f"<style>{_CSS}</style>\n<script>{plotly.offline.get_plotlyjs()}</script>\n</head><body>"
        f'<header class="top"><h1>{esc(report.title)}</h1><div class="meta">{meta}</div>'
        f"<nav>{''.join(nav)}</nav></header><main>{''.join(sections)}</main>"
        "<footer>gpu-autotune report · self-contained: works offline</footer>\n"
        f'<script type="application/json" id="autotune-charts">{script_json(payload)}</script>\n'
        f"<script>{_JS}</script>\n</body></html>\n"
    )
