"""Run an unmodified Python script (or module) in this process, inside a profiling session."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from pathlib import Path

_OUR_DIRS = tuple(
    str(Path(__file__).resolve().parent.parent / pkg) + os.sep for pkg in ("autotune", "profilers")
)


def exit_code_of(exc: SystemExit) -> int:
    """The process exit code Python would use for this SystemExit."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _is_ours(filename: str) -> bool:
    """Frames of the profiler, the CLI or runpy, which the user never wrote."""
    if filename.startswith("<frozen runpy") or Path(filename).name == "runpy.py":
        return True
    return str(Path(filename).resolve()).startswith(_OUR_DIRS)


def print_user_traceback(exc: BaseException) -> None:
    """Print the exception as Python would for the user's script, without our frames."""
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    _drop_our_frames(te)
    print("".join(te.format()), end="", file=sys.stderr)


def _drop_our_frames(te: traceback.TracebackException) -> None:
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if not _is_ours(f.filename)])
    for linked in (te.__cause__, te.__context__):
        if linked is not None:
            _drop_our_frames(linked)


def run_target(script: str, args: list[str], module: bool = False) -> None:
    """Execute the script as ``__main__`` with ``sys.argv`` and ``sys.path`` as Python sets them."""
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    try:
        if module:
            sys.argv = [script, *args]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(script, run_name="__main__", alter_sys=True)
        else:
            path = Path(script)
            sys.argv = [str(path), *args]
            sys.path.insert(0, str(path.resolve().parent))
            runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path and sys.path[0] != saved_path0:
            sys.path.pop(0)
