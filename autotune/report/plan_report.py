"""The plan as a report: Markdown for a pull request, one self-contained HTML page with its chart.

Both are drawn from the plan's JSON (``autotune plan --format json``'s object), so this layer needs
no torch: the configurations cheapest first, the ones that do not fit with why, and (HTML) the
chart of $ against time to train, one series per GPU, which shows at a glance which GPU is cheaper
and which is faster for this training. The same parts make the ``plan`` section of a run's report
when the plan is saved in its directory (``-o RUN_DIR/plan.json``).
"""

from __future__ import annotations

from autotune.report.html import _CSS, _JS, _chart_div, esc, plan_body, script_json
from autotune.report.markdown import md_text, plan_markdown_lines
from autotune.report.plan_cells import REPORT_ROWS, cost_time_points
from profilers.contract.plan_doc import PlanDocument


def plan_markdown(data: PlanDocument, rows: int = REPORT_ROWS) -> str:
    """The plan as one Markdown document (GFM tables)."""
    out = [f"# {md_text(data.title)}", "", *plan_markdown_lines(data, rows, level=2)]
    return "\n".join(out).rstrip() + "\n"


def plan_html(data: PlanDocument) -> str:
    """The plan as one self-contained HTML page: the table and the $-against-time chart (plotly inside)."""
    import plotly.offline  # type: ignore[import-untyped]

    from autotune.report.html_charts import Chart, template_json

    charts: list[Chart] = []

    def draw(drawn: list[Chart]) -> str:
        charts.extend(drawn)
        return "".join(_chart_div(c) for c in drawn)

    body = plan_body(data, draw)
    payload = {"template": template_json(), "charts": [{"id": c.div_id, **c.figure} for c in charts]}
    title = esc(data.title)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="gpu-autotune"><title>{title}</title>'
        f"<style>{_CSS}</style>\n<script>{plotly.offline.get_plotlyjs()}</script>\n</head><body>"
        f'<header class="top"><h1>{title}</h1></header><main><section id="plan">{body}</section></main>'
        "<footer>gpu-autotune plan · self-contained: works offline</footer>\n"
        f'<script type="application/json" id="autotune-charts">{script_json(payload)}</script>\n'
        f"<script>{_JS}</script>\n</body></html>\n"
    )


__all__ = ["cost_time_points", "plan_html", "plan_markdown"]
