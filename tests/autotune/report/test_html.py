"""The HTML report as a string: self-contained, every section in order, escaped, units on numbers."""

import json
import re
import subprocess
import sys
from html import escape

import plotly.offline
import pytest

from autotune.report.html import render_html, script_json, section_order
from autotune.report.sections import SECTION_TITLES
from tests.autotune.report.report_fixtures import (
    CPU_MISSING,
    XSS_ATTR,
    XSS_PAYLOADS,
    XSS_SCRIPT,
    cpu_report,
    full_report,
    xss_report,
)

PLOTLY_JS = plotly.offline.get_plotlyjs()
FULL_CHARTS = {
    "chart-steps-phases",
    "chart-steps-series",
    "chart-gpu-timelines",
    "chart-host-timeline",
    "chart-sweep",
    "chart-convergence",
    "chart-pareto",
}


@pytest.fixture(scope="module")
def full_html():
    return render_html(full_report())


@pytest.fixture(scope="module")
def cpu_html():
    return render_html(cpu_report())


@pytest.fixture(scope="module")
def xss_html():
    return render_html(xss_report())


def markup(page):
    """The page without the embedded plotly.js (whose source holds URL strings of its own)."""
    assert page.count(PLOTLY_JS) == 1
    return page.replace(PLOTLY_JS, "")


def sections(page):
    return dict(re.findall(r'<section id="(\w+)">(.*?)</section>', page, flags=re.S))


def chart_ids(page):
    return re.findall(r'<div class="chart" id="([^"]+)"', page)


def payload(page):
    block = re.search(r'<script type="application/json" id="autotune-charts">(.*?)</script>', page, re.S)
    assert block is not None
    return json.loads(block.group(1))


def test_importing_the_module_does_not_import_plotly():
    code = "import sys, autotune.report.html; print('plotly' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_plotly_js_is_embedded_exactly_once(full_html, cpu_html):
    for page in (full_html, cpu_html):
        assert page.count(PLOTLY_JS) == 1
        assert page.count("* plotly.js v") == 1
        # plotly.js's own element, the chart data and the drawing code: nothing else runs
        assert len(re.findall(r"<script\b", markup(page))) == 3


def test_nothing_is_loaded_from_the_network(full_html):
    page = markup(full_html)
    assert "<link" not in page
    assert not re.search(r"<script[^>]*\ssrc=", page)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page)
    assert "@import" not in page
    assert "url(" not in page
    assert "http://" not in page and "https://" not in page


def test_every_section_heading_in_order(full_html):
    order = [key for key, _ in section_order()]
    assert order[: len(SECTION_TITLES) - 1] == list(SECTION_TITLES)[:-1]
    assert order[-1] == "environment"
    positions = [
        full_html.index(f'<section id="{key}"><h2>{escape(title)}</h2>') for key, title in section_order()
    ]
    assert positions == sorted(positions)
    assert set(sections(full_html)) == set(order)


def test_full_report_draws_every_chart_and_sends_its_data(full_html):
    ids = chart_ids(full_html)
    assert set(ids) == FULL_CHARTS and len(ids) == len(FULL_CHARTS)
    data = payload(full_html)
    assert [c["id"] for c in data["charts"]] == ids
    assert data["template"]["layout"]["colorway"]
    for chart in data["charts"]:
        assert chart["data"], chart["id"]
        assert "template" not in chart["layout"]  # set once for the page, not once per chart


def test_missing_sections_show_their_sentence_and_no_chart(cpu_html):
    body = sections(cpu_html)
    for key, sentence in CPU_MISSING.items():
        assert f'<p class="missing">{escape(sentence)}</p>' in body[key], key
        assert 'class="chart"' not in body[key], key
    assert set(chart_ids(cpu_html)) == {"chart-steps-phases", "chart-steps-series", "chart-host-timeline"}
    assert "No rule fired" in body["advice"]


def test_a_missing_section_without_a_reason_still_says_so():
    from dataclasses import replace

    page = render_html(replace(cpu_report(), missing={}))
    assert "Not available for this run." in sections(page)["cost"]


def test_numbers_are_formatted_with_units(full_html):
    body = sections(full_html)
    assert "12.3 ms" in body["overview"]  # 0.0123 s
    assert "2,602 samples/s" in body["overview"]
    assert "42.0 GiB" in body["overview"]
    assert "41.2%" in body["overview"]  # MFU 0.412
    assert "4.27×" in body["overview"]
    assert "980 µs" in body["steps"]  # a 0.00098 s phase
    assert "measured 4.27× throughput" in body["advice"]
    assert "$1,860 a month" in body["advice"] and "53% cheaper" in body["advice"]
    assert "$3.50 per device-hour" in body["cost"]
    assert "$0.747" in body["cost"]
    assert "$2,555 at a 50% duty cycle" in body["cost"]
    assert "26.2 ms" in body["trials"]  # trial 0: 16 samples / 610 samples/s


def test_axis_titles_carry_units(full_html):
    titles = []
    for chart in payload(full_html)["charts"]:
        for key, axis in chart["layout"].items():
            if key.startswith(("xaxis", "yaxis")) and "title" in axis:
                titles.append(axis["title"]["text"])
    for expected in (
        "Step time (ms)",
        "Share of step time (%)",
        "Utilisation (%)",
        "Memory used (GiB)",
        "Power (W)",
        "SM clock (MHz)",
        "Time since the first sample (s)",
        "CPU (%)",
        "Throughput (samples/s)",
        "Peak memory (GiB)",
        "Throughput (samples/s), higher is better",
    ):
        assert expected in titles
    assert any(t.startswith("Cost (USD per million samples") for t in titles)


def test_recommendations_show_severity_evidence_actions_and_kind(full_html):
    advice = sections(full_html)["advice"]
    assert advice.count('<article class="rec"') == 3
    assert [s.lower() for s in re.findall(r'<span class="badge">(\w+)</span>', advice)] == [
        "high",
        "medium",
        "low",
    ]
    # a badge qualifies a gain: the one without a speedup estimate has none
    assert advice.count(">measured</span>") == 1 and advice.count(">estimated</span>") == 1
    assert "<li>raise DataLoader num_workers to 8</li>" in advice
    assert "<code>micro_batch=32</code>" in advice


def test_trial_table_marks_best_baseline_and_status(full_html):
    trials = sections(full_html)["trials"]
    assert trials.count("<tr") == 13  # header + 12 trials
    assert trials.count('class="best-row"') == 1 and trials.count('class="baseline-row"') == 1
    assert ">oom</span>" in trials and ">diverged</span>" in trials and ">skipped</span>" in trials
    assert "CUDA out of memory" in trials


def test_rules_table_lists_thresholds_with_sources(full_html):
    rules = sections(full_html)["rules"]
    assert "&gt; 10%" in rules and "PyTorch performance tuning guide" in rules
    assert "Communication-bound" in rules


def test_script_json_cannot_close_the_script_element():
    text = script_json({"a": "</script><!-- & \u2028", "n": [float("nan"), 1.0]})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"a": "</script><!-- & \u2028", "n": [None, 1.0]}


def test_user_strings_are_escaped_everywhere(xss_html):
    page = markup(xss_html)
    for raw in XSS_PAYLOADS:
        assert raw not in page
    assert "<img" not in page
    assert "onerror=alert(1)>" not in page
    assert len(re.findall(r"<script\b", page)) == 3
    assert escape(XSS_SCRIPT) in page  # shown as text in the HTML
    assert escape(XSS_ATTR) in page
    # In the chart data they reach plotly HTML-escaped, so plotly shows them and does not parse them.
    names = [trace.get("name", "") for chart in payload(xss_html)["charts"] for trace in chart["data"]]
    assert any(escape(XSS_SCRIPT, quote=False) in name for name in names)
