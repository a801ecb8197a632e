"""Busy loops beside a test: the "other processes" of a shared machine, injected on purpose."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """``count`` processes spinning a core each for the duration of the block."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        time.sleep(0.3)  # running before the measured work starts
        yield
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()
