"""The advice in the terminal, at the end of ``autotune profile``, ``tune``, ``demo`` and ``report``."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from autotune.report.make import REPORT_FILES, CostOptions, report_of, write_report
from autotune.report.sections import AdviceSection
from profilers.contract.rundir import load_run

_COLOURS = {"high": "red", "medium": "yellow", "low": "cyan"}
#: Evidence lines shown per recommendation in the terminal (the report has them all).
EVIDENCE_LINES = 2


def print_advice(advice: AdviceSection, console: Console, report_path: Path | None = None) -> None:
    """The recommendations, most urgent first: title, key evidence, first action, expected gain."""
    if not advice.recommendations:
        console.print(
            f"Advice: no rule found anything to change ({len(advice.rules_checked)} rules checked)."
        )
    else:
        count = len(advice.recommendations)
        console.print(f"[bold]Advice[/bold] ({count} recommendation{'s' if count != 1 else ''}):")
    for rec in advice.recommendations:
        colour = _COLOURS.get(rec.severity, "white")
        console.print(f"  [{colour}]{escape(rec.severity.upper())}[/{colour}] {escape(rec.title)}")
        for line in rec.evidence[:EVIDENCE_LINES]:
            console.print(f"      {escape(line)}")
        if rec.actions:
            console.print(f"      → {escape(rec.actions[0])}")
        gain = " · ".join(rec.gain_parts())
        if gain:
            console.print(f"      expected: {escape(gain)}")
    if report_path is not None:
        console.print(f"Report: {escape(str(report_path))}")


def advise_at_end(
    run_dir: Path | None, console: Console, write: tuple[str, ...] = (), cost: object = None
) -> Path | None:
    """After a profile, study or demo: print the advice and write the asked report formats.

    Returns the path of the first report written. A fault here is reported in one line and never
    changes the command's outcome (the run itself is already saved).
    """
    if run_dir is None:
        return None

    try:
        report = report_of(load_run(run_dir), cost if isinstance(cost, CostOptions) else CostOptions())
        written = [write_report(report, fmt, Path(run_dir) / REPORT_FILES[fmt]) for fmt in write]
    except Exception as exc:  # the advice must never fail the user's command
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        console.print(f"autotune: no advice for this run ({escape(first)})")
        return None
    path = written[0] if written else None
    print_advice(report.advice, console, path)
    if path is None:
        console.print(f"Report: autotune report {escape(str(run_dir))}")
    return path
