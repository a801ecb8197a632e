"""The Advice screen draws the report's own JSON: what it reads back is what the report wrote."""

from __future__ import annotations

import json
from pathlib import Path

from autotune.report.build import build_report
from autotune.report.jsonout import render_json
from tests.autotune.report.test_markdown_json import EVIL, hostile_advice, hostile_study
from tui.report import report_view


def test_the_advice_reads_back_from_report_json_as_it_was(tmp_path: Path) -> None:
    """No pickled report: recommendations, thresholds and reasons come back from report.json equal."""
    advice = hostile_advice()
    data = json.loads(render_json(build_report(hostile_study(tmp_path), advice)))
    view = report_view(data)
    assert view.advice == advice
    assert view.name == "tune " + Path(EVIL).name
    assert view.advice.recommendations[0].gain_parts() == advice.recommendations[0].gain_parts()
