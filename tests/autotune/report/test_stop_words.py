"""Why a run or a trial stopped, in words in every renderer: never its code (``max_steps``)."""

from __future__ import annotations

import re
from dataclasses import replace

from autotune.report.html import render_html
from autotune.report.markdown import render_markdown
from profilers.contract.outcome import STOPPED_BY, stop_reason_words
from profilers.runtime.stopping import STOP_REASONS
from tests.autotune.report.conftest import UNMODIFIED, autotune
from tests.autotune.report.report_fixtures import full_report

#: Every code a run's summary can give as its ``stop_reason``.
CODES = (*STOP_REASONS, "killed")


def _visible(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", re.sub(r"<script.*?</script>|<style.*?</style>", "", html, flags=re.S))


def test_every_stop_reason_has_its_words():
    assert set(CODES) <= set(STOPPED_BY)
    assert stop_reason_words("a_code_of_a_newer_version") == "a code of a newer version"
    assert stop_reason_words(None) == ""


def test_the_trial_tables_say_why_each_trial_stopped_in_words():
    base = full_report()
    rows = tuple(
        replace(r, stop_reason=CODES[i % len(CODES)], error=None) for i, r in enumerate(base.trials.rows)
    )
    report = replace(base, trials=replace(base.trials, rows=rows))
    markdown, html = render_markdown(report), _visible(render_html(report))
    for code in CODES:
        assert STOPPED_BY[code] in markdown and STOPPED_BY[code] in html, code
        if "_" in code:  # the others ("stable", "killed") are words their words hold
            assert code not in markdown and code not in html, code


def test_a_profile_stopped_by_its_budget_says_so_in_its_report(tmp_path):
    run = tmp_path / "run"
    out = autotune("profile", "--quiet", "--no-deep-profile", "--max-steps", "12", "--run-dir", str(run),
                   UNMODIFIED)  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = autotune("report", str(run), "--format", "md", "-o", "-")
    assert report.returncode == 0, report.stderr
    assert "| stop reason | stopped at --max-steps |" in report.stdout
    assert "max_steps" not in report.stdout
