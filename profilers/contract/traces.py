"""Where torch.profiler traces are: a run directory's ``traces/``, a folder of traces, or one file.

What the trace report, ``autotune compare`` and the dashboard agree on before any trace is read:
which paths are traces (not a run directory), and which files in a folder are.
"""

from __future__ import annotations

from pathlib import Path

from profilers.contract.schema import STORE_NAME, SUMMARY_NAME

#: A run's deep-profile traces, relative to the run directory.
TRACES_DIR = "traces"
#: Files that are JSON but no trace: a run's or a report's, written next to traces.
NOT_TRACES = frozenset((SUMMARY_NAME, "report.json", "tuning.json", "study.json", "space.json"))
TRACE_SUFFIXES = (".json", ".json.gz")


class NoTraceError(ValueError):
    """No trace at a path; the message is one line."""


def trace_files(path: Path) -> list[Path]:
    """The trace files at ``path``: itself if a file; in a folder its traces (or its ``traces/``)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise NoTraceError(f"{path}: no such file or directory")
    for folder in (path, path / TRACES_DIR):
        if not folder.is_dir():
            continue
        found = sorted(
            p
            for p in folder.iterdir()
            if p.is_file() and p.name.endswith(TRACE_SUFFIXES) and p.name not in NOT_TRACES
        )
        if found:
            return found
    raise NoTraceError(f"{path}: no trace files (*.json or *.json.gz) in it or in its {TRACES_DIR}/ folder")


def is_trace_path(path: Path) -> bool:
    """A trace file, or a folder of traces that is no run directory (no summary.json, no run.db)."""
    if path.is_file():
        return path.name.endswith(TRACE_SUFFIXES) and path.name not in NOT_TRACES
    if not path.is_dir() or (path / SUMMARY_NAME).exists() or (path / STORE_NAME).exists():
        return False
    try:
        return bool(trace_files(path))
    except (NoTraceError, OSError):
        return False


__all__ = ["NOT_TRACES", "TRACES_DIR", "TRACE_SUFFIXES", "NoTraceError", "is_trace_path", "trace_files"]
