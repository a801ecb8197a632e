"""Snapshots of every screen at 120×40 for the recorded runs (pytest-textual-snapshot).

The runs are fixed (tests/tui/recorded.py) and opened by relative path from inside their root, so
the screens hold no clock and no temporary path. Update with ``pytest tests/tui --snapshot-update``
and look at every SVG under tests/tui/__snapshots__ before keeping it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from tests.tui.waiting import press, settle
from tui.app import DashboardApp

SIZE = (120, 40)


def _keys(*keys: str) -> Callable[[Pilot[Any]], Any]:
    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        for key in keys:
            await press(pilot, key)
        await settle(pilot)

    return run_before


@pytest.mark.usefixtures("in_root")
@pytest.mark.parametrize(
    ("run", "keys"),
    [
        pytest.param("gpu", (), id="live-gpu"),
        pytest.param("cpu", (), id="live-cpu"),
        pytest.param("study", (), id="live-study"),
        pytest.param("study", ("2",), id="trials"),
        pytest.param("gpu", ("4",), id="run"),
        pytest.param("study", ("4",), id="run-study"),
        pytest.param("gpu", ("question_mark",), id="help"),
    ],
)
def test_screen(snap_compare: Any, run: str, keys: tuple[str, ...]) -> None:
    assert snap_compare(DashboardApp(Path(run)), terminal_size=SIZE, run_before=_keys(*keys))


@pytest.mark.usefixtures("in_fresh_root")
def test_advice(snap_compare: Any) -> None:
    """The recommendations of ``make_report`` (the report layer writes SQLite's WAL files: a copy)."""
    assert snap_compare(DashboardApp(Path("gpu")), terminal_size=SIZE, run_before=_keys("3"))


@pytest.mark.usefixtures("in_root")
def test_run_list(snap_compare: Any) -> None:
    assert snap_compare(DashboardApp(None, runs_root=Path(".")), terminal_size=SIZE, run_before=_keys())


def test_not_a_run(snap_compare: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("not a run\n")
    monkeypatch.chdir(tmp_path)
    assert snap_compare(DashboardApp(Path("notes")), terminal_size=SIZE, run_before=_keys())


def test_corrupt_store(snap_compare: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "run.db").write_bytes(b"this is not an SQLite database" * 100)
    monkeypatch.chdir(tmp_path)
    assert snap_compare(DashboardApp(Path("broken")), terminal_size=SIZE, run_before=_keys())
