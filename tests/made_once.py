"""Runs that many test modules read, made once per session and shared by the xdist workers."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """A directory ``make`` fills once per test session, shared by every xdist worker.

    The suite's runs that many modules read (a real profile, a real study) take up to a minute each;
    with ``--dist loadfile`` two workers would each make their own. The first worker to ask makes it
    under a file lock, the others wait for it and read the same directory (read-only: a test that
    writes copies it first). A ``make`` that fails leaves no directory, and the next asker tries again.
    """
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # shared by the workers
    path, done = root / name, root / f"{name}.made"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir(parents=True)
            try:
                make(path)
            except BaseException:
                shutil.rmtree(path, ignore_errors=True)
                raise
            done.touch()
    return path
