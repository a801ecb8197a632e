"""The bridge to the report layer (``autotune.report``), for the Advice and Run screens and export.

``autotune.report`` builds on the advice and the cost model (and plotly for HTML), so it is
imported here only inside the functions, which the dashboard calls from worker threads when a
screen that needs them is shown (never when ``tui`` is imported).

Building a report reads the whole run (8 s for 100k steps and 1M samples); in a thread of the
dashboard's process it would hold the interpreter lock and make every key take seconds. So the
report is built, and written, in a child process (``python -m tui.report``), its output sent to
/dev/null so that nothing reaches the dashboard's terminal. What it hands back is the report's own
JSON (``autotune report --format json``: the same data CI reads), through a temporary file outside
the run directory; the Advice screen draws the ``advice`` section of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.advice.records import AdviceSection
from profilers.contract.json_checks import JsonObject
from profilers.contract.lenient import read_fields, record_of
from profilers.contract.run_meta import RunMeta

from tui.model import RunFacts

REPORT_NAME = "report.html"
#: Exception types whose message is already one line for the user.
_ONE_LINERS = ("RunDirError", "PriceTableError")


@dataclass(frozen=True)
class ReportView:
    """What the Advice screen draws of a report: the run's name and its advice section."""

    name: str
    advice: AdviceSection


def report_view(data: Mapping[str, Any]) -> ReportView:
    """The view of a report.json document (read leniently: what it lacks reads as empty)."""
    document = _ReportDocument(**read_fields(_ReportDocument, data))
    return ReportView(document.overview.name, AdviceSection.from_json(document.advice))


@dataclass(frozen=True)
class _Overview:
    name: str = ""


@dataclass(frozen=True)
class _ReportDocument:
    """The parts of report.json the Advice screen reads."""

    overview: _Overview = field(default=_Overview(), metadata=record_of(_Overview))
    advice: JsonObject = field(default_factory=dict)


class ReportError(Exception):
    """The report could not be built: the exception type's name and its first line, from the child."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def failure_line(exc: BaseException) -> str:
    """One line that says why the report layer failed (never a traceback)."""
    kind = exc.kind if isinstance(exc, ReportError) else type(exc).__name__
    text = str(exc).strip()
    first = text.splitlines()[0] if text else kind
    if kind in ("ImportError", "ModuleNotFoundError") or isinstance(exc, ImportError):
        return f"the advice module is not available ({first})"
    return first if kind in _ONE_LINERS else f"{kind}: {first}"


class ChildTask:
    """One report task (``report``: build it; ``html``: write report.html) in a child process.

    :meth:`run` blocks (call it from a worker thread) and returns the task's result or raises
    :class:`ReportError`; :meth:`cancel` kills the child (the dashboard is closing).
    """

    def __init__(self, task: str, run_dir: Path) -> None:
        self.task = task
        self.run_dir = run_dir
        self._child: subprocess.Popen[bytes] | None = None
        self._cancelled = False

    def run(self) -> Any:
        """The result of the task (the report's JSON data, or the path written)."""
        root = str(Path(__file__).resolve().parents[1])  # where ``tui`` (and a source checkout) lives
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        with tempfile.TemporaryDirectory(prefix="autotune-dashboard-") as tmp:
            out = Path(tmp) / "result.json"
            command = [sys.executable, "-m", "tui.report", self.task, str(self.run_dir), str(out)]
            self._child = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": path},
            )
            code = self._child.wait()
            if self._cancelled:
                raise ReportError("Cancelled", "the dashboard closed")
            if not out.exists():
                raise ReportError("ChildError", f"the report process ended with status {code} and no result")
            result = json.loads(out.read_text(encoding="utf-8"))
        if not result["ok"]:
            raise ReportError(result["kind"], result["message"])
        return result["value"]

    def cancel(self) -> None:
        """Kill the child if it still runs."""
        self._cancelled = True
        if self._child is not None and self._child.poll() is None:
            self._child.kill()


def _child_main(task: str, run_dir: str, out: str) -> int:
    """``python -m tui.report TASK RUN_DIR OUT``: run the task, write its JSON result into OUT.

    ``{"ok": true, "value": ...}`` (the report's JSON data, or the path written) or ``{"ok": false,
    "kind": the exception's type, "message": its first line}``.
    """
    try:
        from autotune.report.jsonout import report_dict
        from autotune.report.make import make_report, write_report

        report = make_report(run_dir)
        value: Any = (
            str(write_report(report, "html", Path(run_dir) / REPORT_NAME))
            if task == "html"
            else report_dict(report)
        )
        result: JsonObject = {"ok": True, "value": value}
    except Exception as exc:  # every failure goes back as (type name, first line)
        text = str(exc).strip()
        result = {"ok": False, "kind": type(exc).__name__, "message": text.splitlines()[0] if text else ""}
    tmp = Path(out + ".tmp")
    tmp.write_text(json.dumps(result, allow_nan=False), encoding="utf-8")
    os.replace(tmp, out)
    return 0


def build_report(run_dir: Path, running: set[ChildTask] | None = None) -> ReportView:
    """``make_report(run_dir)`` in a child process: the same recommendations as ``autotune report``.

    The child is in ``running`` while it runs (so that it can be cancelled); raises ReportError.
    """
    return report_view(_run(ChildTask("report", run_dir), running))


def export_html(run_dir: Path, running: set[ChildTask] | None = None) -> Path:
    """Build the report now and write it to ``run_dir / report.html`` (in a child process)."""
    return Path(_run(ChildTask("html", run_dir), running))


def _run(task: ChildTask, running: set[ChildTask] | None) -> Any:
    if running is not None:
        running.add(task)
    try:
        return task.run()
    finally:
        if running is not None:
            running.discard(task)


def environment_items(facts: RunFacts) -> tuple[tuple[str, str], ...]:
    """The report's environment section for what the dashboard has read (no further file access)."""
    from autotune.report.build import environment_section
    from profilers.contract.rundir import RunData

    run_dir = Path(facts.run_dir)
    if facts.kind == "study":
        profile = None
        if facts.trial_dir is not None:
            profile = RunData(
                run_dir=Path(facts.trial_dir),
                kind="profile",
                summary=facts.trial_summary.to_json() if facts.trial_summary is not None else {},
                finished=facts.trial_summary is not None,
                meta=facts.trial_meta or RunMeta(),
            )
        study = facts.summary.to_json() if facts.summary is not None else {}
        run = RunData(run_dir=run_dir, kind="tune", summary=study, profile=profile)
    else:
        run = RunData(
            run_dir=run_dir,
            kind="profile",
            summary=facts.summary.to_json() if facts.summary is not None else {},
            finished=facts.summary is not None,
            meta=facts.meta,
        )
    return environment_section(run).items


if __name__ == "__main__":
    sys.exit(_child_main(*sys.argv[1:4]))
