"""``autotune compare``: the command line and the text, Markdown and JSON renderings of a comparison."""

from __future__ import annotations

import argparse
import json
import sys
from io import StringIO
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from autotune.cli.support import UsageError
from autotune.compare import CompareError, compare, comparison_dict, side_of, study_sides
from autotune.fmt import NA, format_bytes, format_number, format_seconds
from autotune.report.gpu_time_tables import short
from autotune.report.markdown import md_text
from profilers.traces.kineto import TraceError

if TYPE_CHECKING:  # the parser is built for every command; the comparison loads only for `compare`
    from autotune.compare import Comparison, Delta, NameDelta, Side


def run(args: argparse.Namespace) -> int:
    """Compare and print; bad input raises UsageError (one line, exit 2).

    The exit status is the gate's (0 pass, 1 fail, 3 undecided) under ``--fail-if-slower``, else 0.
    """
    try:
        a, b = study_sides(args.a) if args.b is None else (side_of(args.a), side_of(args.b))
        comparison = compare(a, b, args.fail_if_slower)
    except (CompareError, TraceError) as exc:
        raise UsageError(str(exc)) from None
    text = render(comparison, args.format)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    else:
        sys.stdout.write(text)
    return comparison.gate.exit_code if comparison.gate is not None else 0


def render(c: Comparison, fmt: str) -> str:
    """The comparison as ``text``, ``md`` or ``json``."""
    if fmt == "json":
        return json.dumps(comparison_dict(c), indent=2, allow_nan=False) + "\n"
    if c.evidence is not None and c.evidence.same_run is not None:  # one line: nothing to tabulate
        return (c.gate.line() if c.gate is not None else c.verdict) + "\n"
    tables = _tables(c)
    if fmt == "md":
        out = [f"# Comparison: {md_text(c.a.label)} → {md_text(c.b.label)}", "", md_text(c.verdict), ""]
        for title, header, rows in tables:
            out += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            out += ["| " + " | ".join(md_text(cell) for cell in row) + " |" for row in rows]
            out.append("")
        out += [f"- {md_text(n)}" for n in c.notes]
        if c.gate is not None:
            out += ["", f"**{md_text(c.gate.line())}**"]
        return "\n".join(out).rstrip() + "\n"

    buffer = StringIO()
    console = Console(file=buffer, width=140, highlight=False, soft_wrap=False)
    console.print(f"[bold]A[/bold] {c.a.label}\n[bold]B[/bold] {c.b.label}\n{c.verdict}")
    for title, header, rows in tables:
        table = Table(title=title, title_justify="left")
        for i, h in enumerate(header):
            table.add_column(h, justify="left" if i == 0 else "right", overflow="fold")
        for row in rows:
            table.add_row(*row)
        console.print(table)
    for note in c.notes:
        console.print(f"- {note}")
    text = buffer.getvalue()
    return text + c.gate.line() + "\n" if c.gate is not None else text


def _value(d: Delta, value: float | None) -> str:

    if value is None:
        return NA
    if d.unit == "s":
        return format_seconds(value)
    if d.unit == "bytes":
        return format_bytes(value)
    if d.unit in ("µs/step", "µs/trace"):
        return f"{format_seconds(value / 1e6)}/{d.unit.split('/')[1]}"
    return f"{value:,.1f} {d.unit}"


def _change(d: Delta) -> str:
    """B / A, or B − A for a load (a ratio of near-idle loads says nothing)."""
    if d.unit == "cores":
        return "n/a" if d.a is None or d.b is None else f"{d.b - d.a:+.1f} cores"
    return "n/a" if d.ratio is None else f"{d.ratio:.2f}x"


def _side_row(name: str, s: Side) -> tuple[str, ...]:

    spread = (
        f"{format_seconds(s.step_low_s)}–{format_seconds(s.step_high_s)}"
        if s.step_low_s is not None and s.step_high_s is not None
        else NA
    )
    params = " ".join(f"{k}={v}" for k, v in sorted(s.params.items())) or "-"
    return (name, s.kind, s.device or NA, str(s.steps), format_seconds(s.step_time_s), spread, params)


def _names(rows: tuple[NameDelta, ...]) -> list[tuple[str, ...]]:

    def per_step(us: float) -> str:
        return format_seconds(us / 1e6)

    return [
        (short(r.name), per_step(r.a_us_per_step), per_step(r.b_us_per_step),
         ("+" if r.delta_us_per_step >= 0 else "−") + per_step(abs(r.delta_us_per_step)),
         f"{format_number(r.a_calls_per_step, 6)} → {format_number(r.b_calls_per_step, 6)}")
        for r in rows
    ]  # fmt: skip


_Table = tuple[str, tuple[str, ...], list[tuple[str, ...]]]


def _tables(c: Comparison) -> list[_Table]:
    """(title, header, rows) of every table, as plain text."""
    sides: _Table = ("Sides", ("", "kind", "device", "steps", "median step", "spread", "parameters"),
                     [_side_row("A", c.a), _side_row("B", c.b)])  # fmt: skip
    figures: list[tuple[str, ...]] = [(d.what, _value(d, d.a), _value(d, d.b), _change(d)) for d in c.figures]
    out: list[_Table] = [sides, ("What changed", ("figure", "A", "B", "B / A, or B − A"), figures)]
    per = "per step" if c.per_step else "per trace"
    header = ("name", f"A {per}", f"B {per}", "change", f"calls {per}")
    if c.kernels:
        out.append(("Kernels that changed most", header, _names(c.kernels)))
    if c.ops:
        out.append(("Operators that changed most (self time)", header, _names(c.ops)))
    return out


__all__ = ["render", "run"]
