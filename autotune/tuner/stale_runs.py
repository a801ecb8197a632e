"""Runs of a study outside its search (the baseline, re-measurements), found again after a kill.

Each keeps its process group in the study's ``.running/`` folder while it runs; a study killed then
leaves the process running, and ``--resume`` stops it first (:func:`stop_stale_runs`) before it runs
the same measurement again into the same folder.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

from autotune.tuner.trials import kill_stale_group

#: Where the process groups of the runs outside the search are kept, in the study's directory.
RUNNING_DIR = ".running"


@contextlib.contextmanager
def noted_group(study_dir: Path, node: str, name: str) -> Iterator[Callable[[int], None]]:
    """The ``on_spawn`` of a run outside the search: its process group kept in a file for the block."""
    path = study_dir / RUNNING_DIR / f"{name}.json"

    def note(pgid: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"node": node, "pgid": pgid}))

    try:
        yield note
    finally:
        path.unlink(missing_ok=True)


def stop_stale_runs(study_dir: Path, node: str) -> list[str]:
    """Stop the runs a killed study left running on ``node``; the names of those it stopped."""
    folder = study_dir / RUNNING_DIR
    stopped = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            claim = json.loads(path.read_text())
        except (OSError, ValueError):
            claim = {}
        claim = claim if isinstance(claim, dict) else {}
        pgid = claim.get("pgid")
        if claim.get("node") == node and isinstance(pgid, int) and kill_stale_group(pgid):
            stopped.append(path.stem)
        path.unlink(missing_ok=True)
    return stopped
