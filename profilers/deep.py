"""The deep-profile window: torch.profiler over a few steps, its Chrome trace and top operators.

torch.profiler runs only inside the window. The trace is written gzip-compressed to ``traces/``
(Perfetto and chrome://tracing open .json.gz); a trace whose compressed size passes the cap is
dropped with a warning rather than filling the disk.
"""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path
from typing import Any

from profilers.records import OpRecord

DEFAULT_TRACE_CAP_BYTES = 64 * 1024 * 1024
TOP_OPS = 25


class TraceTooLarge(RuntimeError):
    """The compressed trace passed the size cap and was removed."""


class DeepProfiler:
    """Starts and stops one torch.profiler window."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self._prof: Any = None
        self.first_step: int | None = None

    def start(self, step: int) -> None:
        """Open the window at the start of ``step``."""
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if self.cuda:
            activities.append(ProfilerActivity.CUDA)
        prof = profile(activities=activities, record_shapes=True, with_flops=True)
        prof.start()
        self._prof = prof
        self.first_step = step

    def stop(self) -> Any:
        """Close the window; returns the finished profiler object."""
        prof, self._prof = self._prof, None
        if prof is not None:
            prof.stop()
        return prof


def top_ops(prof: Any, cuda: bool, limit: int = TOP_OPS) -> list[OpRecord]:
    """The operators with the most self time in the window (device time on CUDA, else CPU)."""
    rows: list[OpRecord] = []
    for avg in prof.key_averages():
        self_dev = float(getattr(avg, "self_device_time_total", 0.0) or 0.0)
        total_dev = float(getattr(avg, "device_time_total", 0.0) or 0.0)
        if cuda and self_dev > 0:
            rows.append(
                OpRecord(avg.key, "cuda", int(avg.count), self_dev, total_dev, int(avg.flops) or None)
            )
        else:
            rows.append(
                OpRecord(
                    avg.key,
                    "cpu",
                    int(avg.count),
                    float(avg.self_cpu_time_total),
                    float(avg.cpu_time_total),
                    int(avg.flops) or None,
                )
            )
    if cuda:
        rows = [r for r in rows if r.device == "cuda"] or rows
    rows.sort(key=lambda r: r.self_time_us, reverse=True)
    return rows[:limit]


def export_trace(prof: Any, trace_dir: Path, stem: str, cap_bytes: int = DEFAULT_TRACE_CAP_BYTES) -> Path:
    """Write the window's Chrome trace as ``trace_dir/stem.json.gz``; raise TraceTooLarge past the cap."""
    trace_dir.mkdir(parents=True, exist_ok=True)
    raw = trace_dir / f".{stem}.json.tmp"
    out = trace_dir / f"{stem}.json.gz"
    try:
        prof.export_chrome_trace(str(raw))
        with raw.open("rb") as src, gzip.open(out, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, length=1 << 20)
    finally:
        if raw.exists():
            raw.unlink()
    size = out.stat().st_size
    if size > cap_bytes:
        os.unlink(out)
        raise TraceTooLarge(
            f"trace {out.name} was {size} bytes compressed, over the {cap_bytes}-byte cap; removed"
        )
    return out
