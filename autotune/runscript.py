"""Run an unmodified Python script (or module) in this process, inside a profiling session."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from pathlib import Path
from types import TracebackType

_OUR_DIRS = (str(Path(__file__).resolve().parent), str(Path(runpy.__file__).resolve()))


def exit_code_of(exc: SystemExit) -> int:
    """The process exit code Python would use for this SystemExit."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _user_frames(tb: TracebackType | None) -> TracebackType | None:
    """Skip the leading frames that belong to us or runpy, so the user sees their own traceback."""
    while tb is not None:
        filename = str(Path(tb.tb_frame.f_code.co_filename).resolve())
        if not filename.startswith(_OUR_DIRS):
            return tb
        tb = tb.tb_next
    return None


def print_user_traceback(exc: BaseException) -> None:
    """Print the exception as Python would for the user's script, without our frames."""
    tb = _user_frames(exc.__traceback__)
    traceback.print_exception(type(exc), exc, tb, file=sys.stderr)


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
