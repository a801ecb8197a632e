"""The kernel profiler's own lines on stderr, kept out of what the user reads.

Kineto (torch.profiler's engine) prints a ``USDT:`` line to the process's stderr each time a window
starts and stops (``USDT:2026-12-06 13:34:47 4034:4034 SyncActivityProfilerHandler.cpp:52]
profiler_start``), whatever ``KINETO_LOG_LEVEL`` says (torch 2.13). They are markers for tracing
tools, not messages. :func:`is_kineto_chatter` says which lines they are, for anything that reads a
run's output (a trial's log); :func:`kineto_chatter_filtered` keeps them off the terminal around a
window's start and stop, in the process that profiles (``autotune profile``, the demo, the decorator).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

#: How Kineto's markers begin.
PREFIXES = ("USDT:",)


def is_kineto_chatter(line: str) -> bool:
    """Whether a line of output is one of Kineto's markers (not the script's nor ours)."""
    return line.startswith(PREFIXES)


def without_kineto_chatter(text: str) -> str:
    """``text`` less its lines that are Kineto's markers (line ends kept)."""
    return "".join(line for line in text.splitlines(keepends=True) if not is_kineto_chatter(line))


@contextlib.contextmanager
def kineto_chatter_filtered() -> Iterator[None]:
    """Inside, the process's stderr (file descriptor 2) goes to a file; after, its lines go on, less Kineto's.

    What else is written meanwhile (a warning, another thread's line) reaches stderr when the
    block ends, in its order. Without a file descriptor 2 to redirect, nothing is filtered.
    """
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = without_kineto_chatter(captured.read().decode("utf-8", errors="replace"))
            if kept:
                os.write(2, kept.encode("utf-8"))


__all__ = ["PREFIXES", "is_kineto_chatter", "kineto_chatter_filtered", "without_kineto_chatter"]
