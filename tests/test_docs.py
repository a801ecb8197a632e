"""The documentation site builds strictly, and its reference tables match what the code writes."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import autotune
from profilers.contract.fields import documented_keys, markdown_table, reference_rows
from profilers.contract.profile_summary import ProfileSummary

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The documentation site, built strictly once for the module."""
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
    site = tmp_path_factory.mktemp("docs") / "site"
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return site


def test_the_site_builds_strictly_with_its_generated_tables(site):
    rules = (site / "reference" / "rules" / "index.html").read_text()
    assert "autotune:rules" not in rules  # the marker was replaced
    from autotune.advice.thresholds import THRESHOLDS

    assert all(f"<code>{t.rule}</code>" in rules for t in THRESHOLDS)
    summary = (site / "reference" / "summary-json" / "index.html").read_text()
    assert "<code>peak_memory_bytes</code>" in summary and "autotune:profile-summary" not in summary
    api = (site / "reference" / "api" / "index.html").read_text()
    assert "batch_plan" in api and "Study" in api


def test_the_site_shows_docstrings_and_tables_as_markdown_not_as_restructuredtext(site):
    """Doctest examples are code blocks (not ``>>>`` read as three nested quotes), a Sphinx role is
    inline code (not ``:class:`` in the text), and a table's code keeps its pipe without the
    backslash GitHub's tables need (``--format html|md``)."""
    pages = {p.relative_to(site): p.read_text() for p in site.rglob("*.html")}
    for name, html in pages.items():
        for role in (":class:", ":func:", ":meth:", ":mod:", ":attr:"):
            assert role not in html, f"{name}: {role}"
        assert "\\|" not in html, name
    api = pages[Path("reference/api/index.html")]
    assert api.count('<span class="gp">&gt;&gt;&gt; </span>') >= 10  # prompts in highlighted code
    assert "<blockquote>" not in api
    assert "of <code>profilers.runtime.session.ProfileOptions</code>" in api
    tune = pages[Path("guide/tune/index.html")]
    assert "<code>--searcher structured|bayes|random|grid</code>" in tune


def test_every_profile_summary_key_is_documented_and_every_documented_key_written(tmp_path):
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with autotune.profile(run_dir=tmp_path / "run", quiet=True, deep_profile=False) as prof:
        for _ in range(6):
            loss = model(torch.randn(4, 8)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert sorted(set(prof.summary) - documented_keys(ProfileSummary)) == []
    assert sorted(documented_keys(ProfileSummary, always_only=True) - set(prof.summary)) == []


def test_a_table_cell_never_breaks_its_row():
    table = markdown_table(ProfileSummary).splitlines()
    assert len(table) == len(reference_rows(ProfileSummary)) + 2
    assert all(row.startswith("| `") and row.endswith(" |") for row in table[2:])


def test_the_readme_is_short_and_installs_the_cpu_build_on_an_ordinary_machine():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    assert "--index-url https://download.pytorch.org/whl/cpu" in text
