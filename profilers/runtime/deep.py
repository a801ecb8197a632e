"""The deep-profile window: torch.profiler over a few steps, its Chrome trace and top operators.

torch.profiler runs only inside the window. The trace is written gzip-compressed to ``traces/``
(Perfetto and chrome://tracing open .json.gz); a trace whose compressed size passes the cap is
dropped with a warning rather than filling the disk. :func:`window_stats` sums up the whole window
(every kernel and collective, not only the top operators) for summary.json's ``profile_window``.
"""

from __future__ import annotations

import gzip
import os
import shutil
import statistics
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from profilers.contract.figures import ProfileWindow
from profilers.contract.records import OpRecord
from profilers.runtime.kineto_chatter import kineto_chatter_filtered
from profilers.traces.gpu_time import KIND_COMMUNICATION, KIND_MEMORY, classify
from profilers.traces.intervals import overlap_us, union_us

DEFAULT_TRACE_CAP_BYTES = 64 * 1024 * 1024
TOP_OPS = 25
#: A step's range among ``prof.events()``: "ProfilerStep*" there ("ProfilerStep#N" in the trace).
_STEP_EVENT = "ProfilerStep"


class TraceTooLarge(RuntimeError):
    """The compressed trace passed the size cap and was removed."""


def warm_up_profiler(cuda: bool) -> None:
    """A torch.profiler window over one tiny op, read as the real one is: its first use imports a lot."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    window = profile(activities=activities, record_shapes=True, with_flops=True)
    with kineto_chatter_filtered(), window as prof:
        torch.ones(2, 2) @ torch.ones(2, 2)
    prof.key_averages()
    prof.events()


def _record_every_step(step: int) -> Any:
    """The window's schedule: record each of its steps (so torch marks them ``ProfilerStep#N``)."""
    from torch.profiler import ProfilerAction

    return ProfilerAction.RECORD


class DeepProfiler:
    """Starts and stops one torch.profiler window, each of its steps a ``ProfilerStep#N`` range.

    The step ranges are what trace tools divide a trace by (Holistic Trace Analysis, TensorBoard's
    profiler plugin, ``autotune compare``): N is the training's own step number.
    """

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
        prof = profile(
            activities=activities, record_shapes=True, with_flops=True, schedule=_record_every_step
        )
        prof.step_num = step  # the first ProfilerStep range carries the training's step number
        with kineto_chatter_filtered():
            prof.start()
        self._prof = prof
        self.first_step = step

    def next_step(self) -> None:
        """A step boundary inside the window: close this step's range and open the next one's."""
        if self._prof is not None:
            self._prof.step()

    def stop(self) -> Any:
        """Close the window; returns the finished profiler object."""
        prof, self._prof = self._prof, None
        if prof is not None:
            with kineto_chatter_filtered():
                prof.stop()
        return prof


def top_ops(prof: Any, cuda: bool, limit: int = TOP_OPS) -> list[OpRecord]:
    """The operators with the most self time in the window (device time on CUDA, else CPU).

    On CUDA the rows are the kernels themselves: user annotations (record_function ranges) and
    the CPU ops that launched the kernels (``aten::mm``, by their kernels' device time) are left
    out, so no GPU time is listed twice.
    """
    rows: list[OpRecord] = []
    for avg in prof.key_averages():
        if getattr(avg, "is_user_annotation", False):
            continue
        self_dev = float(getattr(avg, "self_device_time_total", 0.0) or 0.0)
        total_dev = float(getattr(avg, "device_time_total", 0.0) or 0.0)
        on_device = getattr(getattr(avg, "device_type", None), "name", "CPU") != "CPU"
        if cuda and self_dev > 0 and on_device:
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


#: Collective operations, by where torch.profiler records them, most faithful first: NCCL's device
#: kernels (``ncclKernel_*``, ``ncclDevKernel_*``: the transfer itself, classified as the trace
#: analysis does, :func:`profilers.traces.gpu_time.classify`); the backend's run of one collective
#: (``gloo:all_reduce`` on gloo's worker thread, ``nccl:all_reduce`` on the calling thread); the
#: c10d front-end ops that enqueue it (``c10d::allreduce_``, ``record_param_comms``).
COLLECTIVE_RANGE_PREFIXES: tuple[str, ...] = ("gloo:", "nccl:")
COLLECTIVE_OP_PREFIXES: tuple[str, ...] = ("c10d::", "record_param_comms")

_DATALOADER = "enumerate(DataLoader)#"


def window_stats(events: Iterable[Any], steps: int, cuda: bool) -> ProfileWindow:
    """What the whole deep-profile window did, for summary.json's ``profile_window``.

    ``events`` are torch.profiler's ``prof.events()`` (``FunctionEvent``: ``name``,
    ``device_type``, ``time_range`` in µs, ``self_cpu_time_total``, ``is_async``); ``steps`` the
    training steps the window covered. Times are µs over the whole window; ``wall_us`` runs from
    the first CPU event's start to the last one's end (the first step range's start to the last
    one's end, when the window marks its steps). Device events are classified as the trace
    analysis classifies them (:func:`profilers.traces.gpu_time.classify`): kernels (neither communication
    nor memcpy/memset) give the kernel count, total, mean and median duration, the GPU's busy time
    (the union of kernel intervals) and the tensor-core share of kernel time (by name).
    ``cpu_op_self_us`` is the self CPU time of every synchronous CPU op on every thread (not the
    ``ProfilerStep#`` ranges, whose self time is the Python around the ops). Collective time is
    the union of the intervals of the most faithful family present (``collective_source``:
    ``device_kernels`` (NCCL kernels),
    else ``backend_ranges``, else ``frontend_ops``). On CUDA, ``collective_exposed_us`` is the part
    of it that no compute kernel overlaps (HTA's communication-computation overlap, seen from the
    other side); on the CPU overlap is unknown (null). ``dataloader_us`` sums the DataLoader's
    ``__next__`` ranges and ``dataloader_iter`` names its iterator class. Kernel fields are None
    without CUDA. Pure: no torch needed.
    """
    kernels: list[tuple[str, float, float, bool]] = []
    cpu_ops: list[tuple[str, float, float]] = []
    cpu_self_us = 0.0
    loader_us = 0.0
    loader_iter: str | None = None
    collectives: dict[str, list[tuple[float, float]]] = {
        "device_kernels": [],
        "backend_ranges": [],
        "frontend_ops": [],
    }
    for e in events:
        name = str(e.name)
        start, end = float(e.time_range.start), float(e.time_range.end)
        device = getattr(e.device_type, "name", str(e.device_type)).lower()
        lower = name.lower()
        if device != "cpu" and getattr(e, "is_user_annotation", False):
            # a record_function range seen on the GPU (gpu_user_annotation: "Optimizer.step#…",
            # "DistributedDataParallel.forward"), spanning kernels: no kernel itself (as torch's
            # own tables leave it out)
            continue
        if device != "cpu":
            kind, on_tensor_cores = classify(name)[:2]
            if kind == KIND_COMMUNICATION:
                collectives["device_kernels"].append((start, end))
            elif kind != KIND_MEMORY:  # device copies and fills are not kernels here
                kernels.append((name, start, end, on_tensor_cores))
            continue
        cpu_ops.append((name, start, end))
        if name.startswith(_DATALOADER):
            loader_us += end - start
            loader_iter = name[len(_DATALOADER) :].split(".")[0] or loader_iter
        if lower.startswith(COLLECTIVE_RANGE_PREFIXES):
            collectives["backend_ranges"].append((start, end))
            continue
        if lower.startswith(COLLECTIVE_OP_PREFIXES):
            collectives["frontend_ops"].append((start, end))
        if not getattr(e, "is_async", False) and not name.startswith(_STEP_EVENT):
            # a step's range is no op: its self time is the Python between the step's ops
            cpu_self_us += float(getattr(e, "self_cpu_time_total", 0.0) or 0.0)
    source, spans = next(((k, v) for k, v in collectives.items() if v), (None, []))
    comm_us = union_us(spans)
    wall_us = max((end for _, _, end in cpu_ops), default=0.0) - min(
        (start for _, start, _ in cpu_ops), default=0.0
    )
    window = ProfileWindow(
        steps=steps,
        wall_us=wall_us,
        cpu_op_self_us=cpu_self_us,
        collective_calls=len(spans),
        collective_time_us=comm_us,
        collective_source=source,
        dataloader_us=loader_us,
        dataloader_iter=loader_iter,
    )
    if not cuda:
        return window
    durations = [end - start for _, start, end, _ in kernels]
    total = sum(durations)
    tensor_core = sum(end - start for _, start, end, on_tc in kernels if on_tc)
    compute = [(start, end) for _, start, end, _ in kernels]
    exposed = comm_us - overlap_us(spans, compute) if source == "device_kernels" else None
    return replace(
        window,
        kernels=len(kernels),
        kernel_time_us=total,
        kernel_mean_us=total / len(durations) if durations else None,
        kernel_median_us=statistics.median(durations) if durations else None,
        kernel_busy_us=union_us(compute),
        tensor_core_fraction=tensor_core / total if total > 0 else None,
        collective_exposed_us=exposed,
    )
