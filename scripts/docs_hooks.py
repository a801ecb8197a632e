"""mkdocs hooks: the reference pages' tables are made from the code's own tables at build time.

A page holds a marker such as ``<!-- autotune:rules -->``; the hook puts the table in its place, so
the site cannot drift from the code: the advice rules from ``autotune.advice.thresholds``, the
summary.json keys from the fields of the records that write them. An unknown marker fails the build.
"""

from __future__ import annotations

import re
from typing import Any

MARKER = re.compile(r"<!-- autotune:([a-z-]+) -->")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def rules_table() -> str:
    """Every threshold of the advice rules, in report order, with where its figure comes from."""
    from autotune.advice.thresholds import BY_KEY, TRACE_ONLY

    lines = ["| rule | fires when | reads | source |", "|---|---|---|---|"]
    for key, t in BY_KEY.items():
        reads = "traces" if key in TRACE_ONLY else "runs and studies"
        when = f"{_cell(t.metric)} {_cell(t.limit_text())}"
        lines.append(f"| `{t.rule}` ({t.title}) | {when} | {reads} | {_cell(t.source)} |")
    return "\n".join(lines)


def severity_table() -> str:
    """The expected speedups from which a recommendation is high or medium."""
    from autotune.advice.thresholds import SEVERITY_SPEEDUP

    lines = ["| severity | expected speedup from |", "|---|---|"]
    lines += [f"| {name} | {value:g}× |" for name, value in SEVERITY_SPEEDUP.items()]
    return "\n".join(lines)


def profile_summary_table() -> str:
    """The keys of a profile run's summary.json, from the fields of the record that writes it."""
    from profilers.contract.fields import markdown_table
    from profilers.contract.profile_summary import ProfileSummary

    return markdown_table(ProfileSummary)


def tune_summary_table() -> str:
    """The keys of a study's summary.json, from the fields of the record that writes it."""
    from profilers.contract.fields import markdown_table
    from profilers.contract.study.summary import TuningSummary

    return markdown_table(TuningSummary)


GENERATED = {
    "rules": rules_table,
    "severity": severity_table,
    "profile-summary": profile_summary_table,
    "tune-summary": tune_summary_table,
}


#: Inline code in a Markdown line.
_CODE_SPAN = re.compile(r"`[^`\n]*`")


def code_pipes(markdown: str) -> str:
    r"""A table row's ``\|`` inside inline code as a plain ``|``.

    GitHub's tables need a pipe escaped even in code (``--format html\|md``) and show it plain;
    Python-Markdown's keep a code span's pipes in the cell but show the backslash, so the site
    gets the pipe alone. Outside code the escape stays (both show it as ``|``).
    """

    def row(line: str) -> str:
        if not line.lstrip().startswith("|"):
            return line
        return _CODE_SPAN.sub(lambda m: m.group(0).replace("\\|", "|"), line)

    return "\n".join(row(line) for line in markdown.split("\n"))


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace every ``<!-- autotune:NAME -->`` marker with its generated table; unescape code's pipes."""

    def table(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATED:
            raise ValueError(f"{page.file.src_path}: unknown generated table {name!r}")
        return GENERATED[name]()

    return code_pipes(MARKER.sub(table, markdown))
