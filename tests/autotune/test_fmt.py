"""Numbers for people: never in scientific notation, in any renderer (issue 39)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from autotune.advice.records import Threshold
from autotune.fmt import format_number, format_usd
from autotune.report.html import render_html
from autotune.report.markdown import render_markdown
from tests.autotune.report.report_fixtures import full_report

#: A number as ``format(x, "g")`` writes it when it is large or small: 1.664e+04, 1.2e-05.
SCIENTIFIC = re.compile(r"\d(\.\d+)?e[+-]\d\d")


@pytest.mark.parametrize(
    ("value", "digits", "text"),
    [
        (16640.2, 4, "16,640"),  # format(x, ".4g"): 1.664e+04
        (1_000_000.0, 6, "1,000,000"),  # format(x, "g"): 1e+06
        (0.0000123, 3, "0.0000123"),  # format(x, ".3g"): 1.23e-05
        (2.5, 3, "2.5"),
        (0.69574, 4, "0.6957"),
        (3.0, 6, "3"),
        (-0.00042, 3, "-0.00042"),
        (0.0, 3, "0"),
        (None, 3, "n/a"),
    ],
)
def test_a_number_is_written_out_in_its_digits(value, digits, text):
    assert format_number(value, digits) == text
    assert not SCIENTIFIC.search(format_number(value, digits))


def test_dollars_and_thresholds_are_never_scientific():
    assert format_usd(0.0000123) == "$0.0000123"  # was $1.23e-05
    assert Threshold("r", "R", "m", ">", 1_000_000.0, "samples", "s").limit_text() == "> 1,000,000 samples"


def test_a_studys_report_writes_a_large_throughput_and_a_tiny_cost_in_digits():
    """A study at 16,640 samples/s (the Markdown said "Best samples_per_s 1.664e+04 (maximize)")
    whose energy per sample is 12 µJ (it said 1.2e-05 J)."""
    base = full_report()
    convergence = replace(
        base.convergence,
        values=tuple(None if v is None else v * 6.4 for v in base.convergence.values),
        best_so_far=tuple(None if v is None else v * 6.4 for v in base.convergence.best_so_far),
    )
    rows = tuple(
        replace(r, objective=None if r.objective is None else r.objective * 6.4) for r in base.trials.rows
    )
    report = replace(
        base,
        convergence=convergence,
        trials=replace(base.trials, rows=rows),
        cost=replace(base.cost, joules_per_sample=0.000012),
    )
    markdown = render_markdown(report)
    assert not SCIENTIFIC.search(markdown), SCIENTIFIC.search(markdown)
    best = max(v for v in convergence.best_so_far if v is not None)
    assert f"Best throughput (samples/s): {format_number(best, 4)} (higher is better)" in markdown
    assert "0.000012 J" in markdown
    text = re.sub(r"<script.*?</script>|<style.*?</style>", "", render_html(report), flags=re.S)
    assert not SCIENTIFIC.search(re.sub(r"<[^>]+>", " ", text))
