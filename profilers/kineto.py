"""Read a torch.profiler (Kineto) Chrome trace into the events the window analysis takes.

A trace is what ``tensorboard_trace_handler`` or ``prof.export_chrome_trace`` writes (``.json`` or
``.json.gz``): ``traceEvents`` (complete events ``"ph": "X"`` with ``ts``/``dur`` in µs and a
category: ``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``gpu_user_annotation`` on the GPU;
``cpu_op``, ``user_annotation``, ``cuda_runtime``, ``cuda_driver`` on the host), plus
``deviceProperties`` and ``distributedInfo``. :func:`trace_events` turns its events into objects
with the attributes of torch's ``FunctionEvent`` that :func:`profilers.deep.window_stats` reads
(``name``, ``device_type.name``, ``time_range.start/end``, ``self_cpu_time_total``, ``is_async``,
``is_user_annotation``), so a live window and a trace file go through the same analysis.

Pure: no torch needed.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Categories of device-side events; every other complete event of :data:`HOST_CATEGORIES` is host-side.
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
#: Host-side categories kept (the ops, ``record_function`` ranges, and CUDA runtime/driver calls).
HOST_CATEGORIES = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")
_ANNOTATIONS = ("user_annotation", "gpu_user_annotation")


class TraceError(ValueError):
    """A file that is not a readable torch.profiler trace (the message is one line)."""


@dataclass(frozen=True)
class DeviceType:
    """``FunctionEvent.device_type`` as the analysis reads it: ``name`` is "CPU" or "CUDA"."""

    name: str


@dataclass(frozen=True)
class TimeRange:
    """Start and end in µs."""

    start: float
    end: float


@dataclass
class TraceEvent:
    """One complete event of a trace, shaped like torch's ``FunctionEvent`` where it matters."""

    name: str
    category: str
    device_type: DeviceType
    time_range: TimeRange
    pid: Any
    tid: Any
    args: dict[str, Any] = field(default_factory=dict)
    self_cpu_time_total: float = 0.0
    is_async: bool = False

    @property
    def is_user_annotation(self) -> bool:
        """A ``record_function`` range (host) or its projection on the GPU."""
        return self.category in _ANNOTATIONS

    @property
    def duration_us(self) -> float:
        """Length in µs."""
        return self.time_range.end - self.time_range.start


def read_trace(path: Path) -> dict[str, Any]:
    """The trace's JSON object; :class:`TraceError` for a missing, truncated or foreign file."""
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        trace = json.loads(raw)
    except OSError as exc:
        raise TraceError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except (EOFError, zlib.error, gzip.BadGzipFile):
        raise TraceError(f"{path}: a damaged or truncated gzip file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceError(f"{path}: not JSON ({exc}); a torch.profiler trace was expected") from None
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise TraceError(f"{path}: JSON without traceEvents; a torch.profiler trace was expected")
    return trace


def trace_events(trace: dict[str, Any]) -> list[TraceEvent]:
    """The trace's complete host and device events, host ones with their self time, by start.

    Times are µs from the trace's first kept event.
    """
    out: list[TraceEvent] = []
    kept = _complete_events(trace)
    # µs since the epoch pass 10^15, where a double's step is 0.25 µs: times are taken from the
    # first event, and each end is its start plus its exact duration.
    base = min((float(raw["ts"]) for raw in kept), default=0.0)
    for raw in kept:
        category = str(raw["cat"])
        on_device = category in DEVICE_CATEGORIES
        start = float(raw["ts"]) - base
        end = start + float(raw.get("dur", 0.0))
        args = raw.get("args")
        out.append(
            TraceEvent(
                name=str(raw.get("name", "")),
                category=category,
                device_type=DeviceType("CUDA" if on_device else "CPU"),
                time_range=TimeRange(start, end),
                pid=raw.get("pid"),
                tid=raw.get("tid"),
                args=args if isinstance(args, dict) else {},
            )
        )
    out.sort(key=lambda e: (e.time_range.start, -e.duration_us))
    _set_self_times(out)
    return out


def _complete_events(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """The raw complete events of the kept categories that have a time."""
    return [
        raw
        for raw in trace.get("traceEvents", [])
        if isinstance(raw, dict)
        and raw.get("ph") == "X"
        and str(raw.get("cat", "")) in DEVICE_CATEGORIES + HOST_CATEGORIES
        and isinstance(raw.get("ts"), int | float)
        and isinstance(raw.get("dur", 0.0), int | float)
    ]


def _set_self_times(events: list[TraceEvent]) -> None:
    """Self time of each host event: its duration less its direct children's on the same thread.

    As torch's ``self_cpu_time_total``, for ops, ``record_function`` ranges and runtime calls
    alike. Events are sorted by start, the longer first at a tie, so a parent precedes its children.
    """
    stacks: dict[tuple[Any, Any], list[TraceEvent]] = {}
    for event in events:
        if event.device_type.name != "CPU":
            continue
        stack = stacks.setdefault((event.pid, event.tid), [])
        while stack and stack[-1].time_range.end <= event.time_range.start:
            stack.pop()
        event.self_cpu_time_total = event.duration_us
        if stack and event.time_range.end <= stack[-1].time_range.end:
            stack[-1].self_cpu_time_total -= event.duration_us
        stack.append(event)


def device_properties(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """The trace's ``deviceProperties`` entries (GPU name, memory, SMs), empty when absent."""
    props = trace.get("deviceProperties")
    return [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []


def profiler_steps(events: list[TraceEvent]) -> list[TraceEvent]:
    """The ``ProfilerStep#N`` ranges (host side), in order."""
    return [e for e in events if e.device_type.name == "CPU" and e.name.startswith("ProfilerStep#")]


__all__ = [
    "DEVICE_CATEGORIES",
    "HOST_CATEGORIES",
    "DeviceType",
    "TimeRange",
    "TraceError",
    "TraceEvent",
    "device_properties",
    "profiler_steps",
    "read_trace",
    "trace_events",
]
