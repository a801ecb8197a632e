"""Fixed runs for the dashboard tests, written once per session under one root.

``recorded_root`` holds ``gpu`` (a finished 2-GPU profile run), ``cpu`` (a finished CPU-only run)
and ``study`` (a 10-trial study with 8 finished trials and trial 8 being written). Their files get
fixed modification times, and tests that draw them run from inside the root (relative paths), so
no clock or temporary path reaches the screen.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tui.recorded import write_profile_run, write_study

#: Modification time of every file of the recorded runs (2025-11-24T16:30:00Z).
FIXED_MTIME = 1_764_001_800


def _freeze_mtimes(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        os.utime(path, (FIXED_MTIME, FIXED_MTIME))


@pytest.fixture(autouse=True)
def _no_animations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Apps start with animations off (TEXTUAL_ANIMATIONS=none): the pilot waits for none."""
    import textual.constants

    monkeypatch.setattr(textual.constants, "TEXTUAL_ANIMATIONS", "none")


@pytest.fixture(scope="session")
def recorded_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The root of the three recorded runs (do not write into it; copy a run first)."""
    root = tmp_path_factory.mktemp("runs")
    write_profile_run(root / "gpu")
    write_profile_run(root / "cpu", name="mlp-cpu", gpus=0, command=["train_cpu.py"])
    write_study(root / "study")
    _freeze_mtimes(root)
    return root


@pytest.fixture
def fresh_root(recorded_root: Path, tmp_path: Path) -> Path:
    """A copy of the recorded root (same modification times) for a test that may write into it.

    Building the report (Advice screen, export) goes through ``profilers.runtime.store``, which leaves
    SQLite's ``run.db-wal``/``-shm`` behind; such tests work on a copy.
    """
    return Path(shutil.copytree(recorded_root, tmp_path / "runs"))


@pytest.fixture
def in_root(recorded_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Run the test from inside the recorded root, in UTC (relative paths, fixed local times)."""
    monkeypatch.chdir(recorded_root)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield recorded_root
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def in_fresh_root(fresh_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """As ``in_root``, in a copy of the recorded root."""
    monkeypatch.chdir(fresh_root)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield fresh_root
    monkeypatch.undo()
    time.tzset()
