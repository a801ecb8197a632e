"""The run directory: its name, its lock, and who may write into it.

Ranks of one torchrun job agree on a default directory without talking (the torchrun agent's start
time names it) and recognise their job in a directory that exists (by its torchrun run id). A
directory that holds another run is refused unless the user asks to overwrite it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from profilers.contract.reader import read_meta
from profilers.contract.schema import STORE_NAME


class RunDirOptions(Protocol):
    """What the run directory needs of the profile options."""

    run_dir: str | Path | None
    runs_root: str | Path


def slug(text: str) -> str:
    """A file-name-safe version of a run name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:60] or "run"


def resolve_run_dir(options: RunDirOptions, name: str, world_size: int) -> Path:
    """The run directory (created). Ranks of one torchrun job agree on it without talking."""
    if options.run_dir is not None:
        path = Path(options.run_dir)
        path.mkdir(parents=True, exist_ok=True)
        return path
    root = Path(options.runs_root)
    if world_size > 1:
        started = _agent_start_time()
        path = root / f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(started))}-{slug(name)}"
        path.mkdir(parents=True, exist_ok=True)
        return path
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for attempt in range(1, 1000):
        path = root / f"{stamp}-{slug(name)}{'' if attempt == 1 else f'-{attempt}'}"
        try:
            path.mkdir(parents=True, exist_ok=False)
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free run directory name under {root}")


class RunDirInUse(RuntimeError):
    """The run directory already holds another run."""


def job_id(world_size: int) -> str:
    """Identifies this run; every rank of one torchrun job computes the same one."""
    if world_size <= 1:
        return f"local:{uuid.uuid4().hex}"
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "none")
    if run_id and run_id != "none":
        return f"torchrun:{run_id}"
    return f"torchrun:{socket.gethostname()}:{os.getppid()}:{_agent_start_time():.0f}"


@contextlib.contextmanager
def run_dir_lock(run_dir: Path) -> Iterator[None]:
    """An exclusive lock on the run directory, so ranks claim it one at a time."""
    with (run_dir / ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


RUN_FILES = ("run.db", "run.db-wal", "run.db-shm", "summary.json", "summary.json.tmp")


def claim_run_dir(run_dir: Path, this_job: str, overwrite: bool) -> None:
    """Make sure ``run_dir`` holds no other run: join our own job's, replace or refuse another's."""
    db = run_dir / STORE_NAME
    if not db.exists():
        return
    try:
        owner = read_meta(db).job_id
    except Exception:
        owner = None
    if owner == this_job:
        return
    if not overwrite:
        raise RunDirInUse(
            f"{run_dir} already holds a run; pass overwrite=True (--overwrite) or another run directory"
        )
    for name in RUN_FILES:
        (run_dir / name).unlink(missing_ok=True)
    shutil.rmtree(run_dir / "traces", ignore_errors=True)


def _agent_start_time() -> float:
    """Start time of torchrun's agent (the ranks' common parent), the same on every local rank."""
    try:
        import psutil

        return float(psutil.Process(os.getppid()).create_time())
    except Exception:
        return float(int(time.time()) // 60 * 60)
