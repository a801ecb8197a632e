"""The report of a CUDA memory snapshot (``autotune report SNAPSHOT.pickle``): Markdown, HTML, JSON.

The figures are :func:`profilers.traces.snapshot.analyse_snapshot`'s; the three formats draw the
same tables (:func:`tables`), so they cannot disagree.
"""

from __future__ import annotations

import dataclasses
import json

from autotune.fmt import format_bytes
from autotune.report import html, markdown
from autotune.report.gpu_time_tables import TextTable
from profilers.traces.snapshot import SnapshotAnalysis


def headline(a: SnapshotAnalysis) -> str:
    """One sentence: the peak, or the OOM and what it lacked."""
    if a.oom is not None:
        o = a.oom
        return (
            f"Out of memory on device {a.device}: {format_bytes(o.requested_bytes)} requested with "
            f"{format_bytes(o.allocated_bytes)} allocated, {format_bytes(o.reserved_bytes)} reserved and "
            f"{format_bytes(o.device_free_bytes)} free in CUDA: {format_bytes(o.shortfall_bytes)} short of "
            f"the {format_bytes(o.capacity_bytes)} this process could use"
        )
    return (
        f"Peak on device {a.device}: {format_bytes(a.peak_allocated_bytes)} allocated, "
        f"{format_bytes(a.reserved_at_peak_bytes)} reserved ({format_bytes(a.fragmentation_bytes)} cached "
        "and not in use)"
    )


def tables(a: SnapshotAnalysis) -> list[TextTable]:
    """Every table of the report, in order."""
    peak = a.peak_allocated_bytes or 1
    overview = TextTable(
        "At the peak",
        ("", "value"),
        (
            ("allocated", format_bytes(a.peak_allocated_bytes)),
            ("reserved by the allocator", format_bytes(a.reserved_at_peak_bytes)),
            ("reserved, not allocated (fragmentation and cache)", format_bytes(a.fragmentation_bytes)),
            ("largest free block (at the snapshot)", format_bytes(a.largest_free_block_bytes)),
            ("allocations live", f"{a.live_at_peak:,}"),
            ("allocator actions recorded", f"{a.trace_entries:,}"),
        ),
    )
    categories = TextTable(
        "By category (read from each allocation's stack)",
        ("category", "bytes", "share"),
        tuple((c, format_bytes(n), f"{100 * n / peak:.1f}%") for c, n in a.by_category.items()),
        frozenset((1, 2)),
    )
    sites = TextTable(
        "Where it was allocated (the first frame of your code)",
        ("where", "category", "bytes", "allocations"),
        tuple((s.where, s.category, format_bytes(s.bytes), f"{s.allocations:,}") for s in a.sites),
        frozenset((2, 3)),
    )
    out = [overview, categories, sites]
    if a.oom is not None:
        o = a.oom
        out.append(
            TextTable(
                "The out-of-memory error",
                ("", "value"),
                (
                    ("requested", format_bytes(o.requested_bytes)),
                    ("allocated when it failed", format_bytes(o.allocated_bytes)),
                    ("reserved when it failed", format_bytes(o.reserved_bytes)),
                    ("free in CUDA", format_bytes(o.device_free_bytes)),
                    ("short by", format_bytes(o.shortfall_bytes)),
                    *((f"would fit: option {i}", fix) for i, fix in enumerate(o.fixes, 1)),
                ),
            )
        )
    return out


def snapshot_markdown(a: SnapshotAnalysis, source: str) -> str:
    """The report as Markdown."""
    md_text = markdown.md_text
    out = [f"# Memory snapshot: {md_text(source)}", "", md_text(headline(a)) + ".", ""]
    for t in tables(a):
        out += [f"## {md_text(t.title)}", ""]
        out += markdown._table(t.header, (tuple(md_text(c) for c in row) for row in t.rows))
    out += [f"- {md_text(n)}" for n in a.notes]
    return "\n".join(out).rstrip() + "\n"


def snapshot_html(a: SnapshotAnalysis, source: str) -> str:
    """The report as one self-contained HTML page (tables only: no script)."""
    esc = html.esc
    parts = [f"<p>{esc(headline(a))}.</p>"]
    for t in tables(a):
        parts.append(f"<h2>{esc(t.title)}</h2>")
        parts.append(html._table(list(t.header), [[esc(c) for c in row] for row in t.rows], t.numeric))
    parts += [f"<p class='note'>{esc(n)}</p>" for n in a.notes]
    title = f"Memory snapshot: {source}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="generator" content="gpu-autotune"><title>{esc(title)}</title><style>{html._CSS}</style>'
        f'</head><body><header class="top"><h1>{esc(title)}</h1></header><main>{"".join(parts)}</main>'
        "</body></html>\n"
    )


def snapshot_json(a: SnapshotAnalysis, source: str) -> str:
    """The figures as JSON, for CI."""
    doc = {"schema": 1, "kind": "memory_snapshot", "source": source, "headline": headline(a),
           **dataclasses.asdict(a)}  # fmt: skip
    return json.dumps(doc, indent=2) + "\n"


RENDERERS = {"md": snapshot_markdown, "html": snapshot_html, "json": snapshot_json}

__all__ = ["RENDERERS", "headline", "snapshot_html", "snapshot_json", "snapshot_markdown", "tables"]
