"""The HTML report in a real browser (headless Chromium): it draws, raises nothing, runs no injected code.

Skipped, with the reason, where no Chromium-family browser is on PATH (CI installs Debian's).
Each page is loaded once per module; the whole file takes about 12 s.
"""

import re
from html import escape
from pathlib import Path

import pytest

from autotune.report.html import render_html
from autotune.report.trace_report import trace_report
from tests.autotune.report.report_fixtures import XSS_ATTR, XSS_SCRIPT, cpu_report, full_report, xss_report
from tests.browser import BROWSERS, find_chromium, load_in_browser, non_white_fraction, png_pixels

WINDOW = (1280, 2400)  # CSS pixels; the screenshot is taken at half scale to keep decoding it quick
TRACE = Path(__file__).resolve().parents[2] / "data" / "gpu_traces" / "a100_ddp2" / "rank-0.json.gz"
REPORTS = {"full": full_report, "cpu": cpu_report, "xss": xss_report, "trace": lambda: trace_report(TRACE)}
CONTROL_PAGE = """<!DOCTYPE html><html><head><title>control</title></head><body><p>control</p>
<script>console.log('a log line is not an error'); console.error('recorded console error');</script>
<img src="x" onerror="alert(1)">
<script>throw new Error('recorded uncaught exception');</script></body></html>"""


@pytest.fixture(scope="module")
def chromium():
    path = find_chromium()
    if path is None:
        pytest.skip(
            f"no Chromium-family browser on PATH (looked for {', '.join(BROWSERS)}): not loaded in a browser"
        )
    return path


@pytest.fixture(scope="module")
def loaded(chromium, tmp_path_factory):
    """Each fixture report rendered, written and loaded once: name -> (html, BrowserResult)."""
    out = tmp_path_factory.mktemp("browser")
    results = {}
    for name, make in REPORTS.items():
        page = render_html(make())
        path = out / f"{name}.html"
        path.write_text(page, encoding="utf-8")
        results[name] = (
            page,
            load_in_browser(path, out / "loaded", window=WINDOW, scale=0.5, budget_ms=2000),
        )
    return results


def emitted_charts(page):
    return re.findall(r'<div class="chart" id="([^"]+)"', page)


def test_the_error_recorder_catches_errors_and_dialogs(chromium, tmp_path):
    """Proof that a clean load below means something: errors and dialogs on a bad page are caught."""
    page = tmp_path / "control.html"
    page.write_text(CONTROL_PAGE)
    result = load_in_browser(page, tmp_path / "out", window=(400, 300), budget_ms=1000)
    assert any("recorded console error" in e for e in result.console_errors)
    assert any("recorded uncaught exception" in e for e in result.console_errors)
    assert not any("a log line" in e for e in result.console_errors)
    assert result.dialogs == ["alert: 1"]
    assert "control" in result.dom and "__browser_test_log__" not in result.dom


@pytest.mark.slow
@pytest.mark.parametrize("name", ["full", "cpu", "trace"])
def test_report_loads_without_javascript_errors(loaded, name):
    _page, result = loaded[name]
    assert result.console_errors == []
    assert result.dialogs == []


@pytest.mark.slow
@pytest.mark.parametrize("name", ["full", "cpu", "trace"])
def test_every_chart_is_drawn_by_plotly(loaded, name):
    page, result = loaded[name]
    ids = emitted_charts(page)
    assert len(ids) == {"full": 7, "cpu": 3, "trace": 1}[name]
    dom = result.dom
    starts = [dom.index(f'id="{chart_id}"') for chart_id in ids]
    for n, (chart_id, start) in enumerate(zip(ids, starts, strict=True)):
        end = min(dom.index("</section>", start), starts[n + 1] if n + 1 < len(ids) else len(dom))
        drawn = dom[start:end]
        assert re.search(r'class="[^"]*\bplot-container\b', drawn), chart_id
        assert re.search(r'<svg class="main-svg"', drawn), chart_id
        assert re.search(r'class="trace (scatter|bars)', drawn), chart_id  # data drawn, not just axes
    assert len(re.findall(r'<div class="chart js-plotly-plot"', dom)) == len(ids)


@pytest.mark.parametrize("name", ["full", "cpu", "trace"])
def test_screenshot_is_not_blank(loaded, name):
    _page, result = loaded[name]
    width, height, channels, pixels = png_pixels(result.screenshot)
    assert (width, height) == (WINDOW[0] // 2, WINDOW[1] // 2)
    assert non_white_fraction(result.screenshot) > 0.05
    # Saturated pixels come from chart traces and badges, not from the grey page and its text.
    step = channels * 7  # every 7th pixel is plenty
    coloured = sum(
        1
        for i in range(0, len(pixels) - channels, step)
        if max(pixels[i : i + 3]) - min(pixels[i : i + 3]) > 80
    )
    assert coloured / (len(pixels) // step) > 0.002


def test_injected_strings_stay_text(loaded):
    page, result = loaded["xss"]
    assert result.dialogs == []
    assert result.console_errors == []
    dom = result.dom
    assert escape(XSS_SCRIPT, quote=False) in dom  # visible in the document as text
    assert escape(XSS_ATTR, quote=False) in dom
    assert "<img" not in dom
    assert len(re.findall(r"<script\b", dom)) == 3  # no script element came from the data
    # Plotly wrote them into its SVG text literally, neither parsing them nor showing "&lt;".
    svg_texts = re.findall(r"<text[^>]*>([^<]*)</text>", dom)
    assert any(escape(XSS_SCRIPT, quote=False) in t for t in svg_texts)
    assert not any("&amp;lt;" in t for t in svg_texts)
    assert len(emitted_charts(page)) == len(re.findall(r'<div class="chart js-plotly-plot"', dom))
