"""``--memory-snapshot``: the CUDA caching allocator's history, recorded and dumped as a snapshot.

Recording (``torch.cuda.memory._record_memory_history``, Python stacks) starts when CUDA initialises
(the session queues it with ``torch.cuda._lazy_call``; at once when CUDA is already in use; at the
model's first CUDA input should the queue fail) and ends with the deep-profile window, whose steps
the statistics leave out anyway. The snapshot is
written to ``memory/rank<R>.pickle`` (the file pytorch.org/memory_viz draws and
``autotune report`` reads) when the window closes, when the run ends before it, and at an
out-of-memory error raised while recording (``memory/rank<R>-oom.pickle``: its history holds the
failed request). Never starts CUDA itself: a run without CUDA records nothing and says so once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

SNAPSHOT_DIR = "memory"
#: Allocator actions kept (a ring): enough for the window's steps of a large model, about 100 MB.
MAX_ENTRIES = 200_000


def snapshot_name(rank: int, oom: bool = False) -> str:
    """The snapshot's path relative to the run directory."""
    return f"{SNAPSHOT_DIR}/rank{rank}{'-oom' if oom else ''}.pickle"


class MemoryHistory:
    """Records the allocator's history on the run's CUDA device and dumps it once."""

    def __init__(self, on_fault: Callable[[str, BaseException], None]) -> None:
        self.on_fault = on_fault
        self.recording = False
        self.files: list[str] = []  # written snapshots, relative to the run directory
        self.closed = False  # the run has ended: a CUDA initialisation after it records nothing
        self._device: int | None = None

    def start(self, device: int | None) -> None:
        """Record from now on (no-op when already recording, or once a snapshot was taken)."""
        if self.recording or self.files or self.closed:
            return
        try:
            torch.cuda.memory._record_memory_history(
                "all", context="all", stacks="python", max_entries=MAX_ENTRIES, device=device
            )
            self.recording, self._device = True, device
        except Exception as exc:
            self.on_fault("memory snapshot", exc)

    def dump(self, run_dir: Path | None, rank: int, oom: bool = False) -> None:
        """Write the snapshot (when recording and there is a run directory), then stop recording."""
        if not self.recording:
            return
        try:
            if run_dir is not None:
                name = snapshot_name(rank, oom)
                (run_dir / SNAPSHOT_DIR).mkdir(parents=True, exist_ok=True)
                torch.cuda.memory._dump_snapshot(str(run_dir / name))
                self.files.append(name)
        except Exception as exc:
            self.on_fault("memory snapshot", exc)
        finally:
            self.stop()

    def close(self, run_dir: Path | None, rank: int) -> None:
        """The run ended: dump what is being recorded; nothing is recorded after this."""
        self.dump(run_dir, rank)
        self.closed = True

    def stop(self) -> None:
        """Stop recording and free the history (its stacks hold host memory)."""
        if not self.recording:
            return
        self.recording = False
        try:
            torch.cuda.memory._record_memory_history(None, device=self._device)
        except Exception as exc:
            self.on_fault("memory snapshot", exc)


def is_out_of_memory(exc: BaseException | None) -> bool:
    """A CUDA out-of-memory error (``torch.OutOfMemoryError``, or its message on older builds)."""
    if exc is None:
        return False
    try:
        if isinstance(exc, torch.OutOfMemoryError):
            return True
    except Exception:
        pass
    return isinstance(exc, RuntimeError) and "CUDA out of memory" in str(exc)


__all__ = ["MAX_ENTRIES", "SNAPSHOT_DIR", "MemoryHistory", "is_out_of_memory", "snapshot_name"]
