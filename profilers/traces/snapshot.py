"""What a CUDA memory snapshot says: the peak, what held it, fragmentation, and what an OOM needed.

A snapshot is the pickle ``torch.cuda.memory._dump_snapshot(path)`` writes after
``torch.cuda.memory._record_memory_history()`` (the file pytorch.org/memory_viz draws): ``segments``
(each ``cudaMalloc``'d segment with its blocks: ``size``, ``state``, the ``frames`` that allocated
it) and ``device_traces`` (per device, the allocator's actions in order: ``alloc``,
``free_requested``, ``free_completed``, ``segment_alloc``, ``segment_free``, ``oom`` with the
``size`` asked for and the ``device_free`` bytes CUDA still had).

:func:`read_snapshot` unpickles plain data only (a snapshot holds dicts, lists, numbers and strings;
any class reference is refused), so a file from elsewhere cannot run code. :func:`analyse_snapshot`
replays the trace to find the peak of allocated memory, the allocations live at that peak, grouped
by the first frame of the user's code and by a category read from the stack, and for a snapshot
taken at an out-of-memory error, how much more was needed and which change would fit. Pure Python.
"""

from __future__ import annotations

import gzip
import io
import pickle
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profilers.contract.lenient import read_fields, read_records, records_of

#: Frames of these files are PyTorch's or Python's, not the user's code.
_LIBRARY_PARTS = ("/torch/", "/site-packages/", "/dist-packages/", "<frozen", "/lib/python3")
#: This project's own code on the user's stack (the profiler's hooks, ``autotune profile``'s runner), by
#: path parts that hold wherever the snapshot was recorded: not the user's code.
_OWN_PARTS = ("/profilers/runtime/", "/autotune/cli/", "/autotune/runscript.py", "/autotune/__main__.py",
              "/autotune/api.py")  # fmt: skip
#: An allocation with no Python frame in a history that records them was made on a C++ thread: autograd's
#: engine runs the backward there (gradients, and the gradients of activations).
NO_PYTHON_FRAME = "no Python frame: autograd's backward thread"
NO_STACKS = "no stack recorded (record_memory_history(stacks='python') records it)"
BEFORE_HISTORY = "before the recorded history"

#: Categories read from an allocation's stack, first match wins: (category, frame name or file part).
_CATEGORY_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("optimizer state and update", ("/torch/optim/",)),
    ("gradients (backward)", ("backward", "/torch/autograd/")),  # GRADIENTS
    ("parameters (model load)", ("_apply", "load_state_dict", "to_empty")),
    ("activations (forward)", ("forward", "_call_impl", "_wrapped_call_impl")),
)
OTHER = "other"
GRADIENTS = "gradients (backward)"
_GZIP_MAGIC = b"\x1f\x8b"


class SnapshotError(ValueError):
    """A file that is not a memory snapshot this version can read; the message is one line."""


class _PlainData(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"a memory snapshot holds plain data, not {module}.{name}")


def read_snapshot(path: Path) -> dict[str, Any]:
    """The snapshot at ``path``; SnapshotError for a file that is not one."""
    try:
        raw = path.read_bytes()
        if raw[:2] == _GZIP_MAGIC:  # a snapshot kept compressed (tests/data)
            raw = gzip.decompress(raw)
        data = _PlainData(io.BytesIO(raw)).load()
    except gzip.BadGzipFile as exc:
        raise SnapshotError(f"{path}: not a memory snapshot ({exc})") from None
    except OSError as exc:
        raise SnapshotError(f"{path}: {exc.strerror or exc}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError) as exc:
        raise SnapshotError(f"{path}: not a memory snapshot ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("segments"), list):
        raise SnapshotError(f"{path}: not a memory snapshot (no 'segments' list)")
    return data


@dataclass(frozen=True, slots=True)
class Site:
    """Bytes live at the peak that one place in the user's code allocated."""

    where: str  # "train.py:42 in forward", or the first frame when no user frame is on the stack
    bytes: int
    allocations: int
    category: str


@dataclass(frozen=True, slots=True)
class OomFacts:
    """The out-of-memory error the snapshot saw, and what would have fitted."""

    requested_bytes: int
    device_free_bytes: int
    allocated_bytes: int  # allocated when it failed
    reserved_bytes: int  # the allocator's segments when it failed
    capacity_bytes: int  # reserved + what CUDA still had free: what this process could use
    shortfall_bytes: int  # allocated + requested - capacity (>= 0)
    fixes: tuple[str, ...]  # changes that would fit, with their estimate


@dataclass(frozen=True, slots=True)
class SnapshotAnalysis:
    """One device's memory from a snapshot (the device with the highest peak)."""

    device: int
    peak_allocated_bytes: int
    reserved_at_peak_bytes: int
    fragmentation_bytes: int  # reserved - allocated at the peak: cached, not in use
    largest_free_block_bytes: int  # the largest inactive block at the snapshot's moment
    by_category: dict[str, int]  # bytes live at the peak
    sites: tuple[Site, ...]  # largest first
    live_at_peak: int  # allocations live at the peak
    trace_entries: int  # allocator actions recorded (0: no history, the snapshot's state alone)
    oom: OomFacts | None
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame of an allocation's stack, innermost first."""

    filename: str = "?"
    line: int | str = "?"
    name: str = "?"


@dataclass(frozen=True, slots=True)
class Action:
    """One entry of the allocator's history (``device_traces``)."""

    #: alloc, free_requested, free_completed, segment_alloc, segment_free, oom, …
    kind: str = field(default="", metadata={"key": "action"})
    addr: int = 0
    size: int = 0  # bytes; for an oom, the request that failed
    frames: tuple[Frame, ...] = field(default=(), metadata=records_of(Frame))
    device_free: int = 0  # an oom's: the bytes CUDA still had free


@dataclass(frozen=True, slots=True)
class Block:
    """A block of a segment at the snapshot's moment."""

    address: int = 0
    size: int = 0
    state: str = ""  # active_allocated, inactive, …
    frames: tuple[Frame, ...] = field(default=(), metadata=records_of(Frame))


@dataclass(frozen=True, slots=True)
class Segment:
    """One ``cudaMalloc``'d segment at the snapshot's moment."""

    device: int = 0
    total_size: int = 0
    blocks: tuple[Block, ...] = field(default=(), metadata=records_of(Block))


@dataclass(frozen=True, slots=True)
class _Segments:
    """A snapshot's ``segments`` (none when it holds only the allocator's history)."""

    segments: tuple[Segment, ...] = field(default=(), metadata=records_of(Segment))


def _traces(data: Mapping[str, Any]) -> list[tuple[Action, ...]]:
    """Each device's allocator history (``device_traces``), malformed entries left out."""
    raw = data.get("device_traces")
    return [read_records(Action, t) for t in raw] if isinstance(raw, list) else []


def _is_library(filename: str) -> bool:
    return any(part in filename for part in (*_LIBRARY_PARTS, *_OWN_PARTS))


def _where(frames: Sequence[Frame], stacks_recorded: bool = False) -> str:
    """The first frame of the user's code (the innermost), else the innermost frame."""
    for f in frames:
        if f.filename and not _is_library(f.filename):
            return f"{f.filename}:{f.line} in {f.name}"
    if frames:
        f = frames[0]
        return f"{f.filename}:{f.line} in {f.name}"
    return NO_PYTHON_FRAME if stacks_recorded else NO_STACKS


def category_of(frames: Sequence[Frame], stacks_recorded: bool = False) -> str:
    """What an allocation is, read from its stack (innermost frame first)."""
    if not frames and stacks_recorded:
        return GRADIENTS
    for category, marks in _CATEGORY_RULES:
        for f in frames:
            text = f"{f.filename} {f.name}"
            if any(mark in text for mark in marks):
                return category
    return OTHER


def _replay(entries: Sequence[Action], start_allocated: int) -> tuple[int, int, int, int | None]:
    """(peak allocated, its entry index, allocated at the end, index of the last OOM)."""
    allocated = peak = start_allocated
    peak_at, oom_at = -1, None
    for i, e in enumerate(entries):
        if e.kind == "alloc":
            allocated += e.size
            if allocated > peak:
                peak, peak_at = allocated, i
        elif e.kind == "free_completed":
            allocated -= e.size
        elif e.kind == "oom":
            oom_at = i
    return peak, peak_at, allocated, oom_at


def _live_until(
    entries: Sequence[Action], upto: int, before: int
) -> tuple[dict[int, tuple[int, tuple[Frame, ...]]], int]:
    """What is live after entry ``upto``: the history's allocations, and the bytes of ``before``.

    Returns (address -> (size, frames) of the allocations the history made, bytes allocated before
    the history began that are still live). A free of an address the history never allocated frees
    part of what was allocated before it.
    """
    live: dict[int, tuple[int, tuple[Frame, ...]]] = {}
    for e in entries[: upto + 1]:
        if e.kind == "alloc":
            live[e.addr] = (e.size, e.frames)
        elif e.kind == "free_completed" and live.pop(e.addr, None) is None:
            before = max(0, before - e.size)
    return live, before


def _reserved_at(entries: Sequence[Action], upto: int, reserved_end: int) -> int:
    """Reserved bytes after entry ``upto``, counted back from the snapshot's segments."""
    after = 0
    for e in entries[upto + 1 :]:
        if e.kind == "segment_alloc":
            after += e.size
        elif e.kind == "segment_free":
            after -= e.size
    return reserved_end - after


def _fixes(by_category: Counter[str], shortfall: int) -> tuple[str, ...]:
    """Changes that would remove ``shortfall`` bytes, from what held the peak."""
    act = by_category["activations (forward)"]
    out = []
    for k in (2, 4, 8):
        if act * (1 - 1 / k) >= shortfall:
            out.append(f"micro-batch ÷ {k} (activations {act / 2**30:.2f} GiB → {act / k / 2**30:.2f} GiB), "
                       "with gradient accumulation to keep the global batch")  # fmt: skip
            break
    if act * 0.6 >= shortfall:
        out.append("activation checkpointing of the repeated blocks (keeps about a block's activations each)")
    if act * 0.5 >= shortfall:
        out.append("bf16 autocast (activations in 2 bytes instead of 4)")
    opt = by_category["optimizer state and update"]
    if opt * 0.75 >= shortfall:
        out.append("shard the optimizer state across GPUs (FSDP), or offload it to the host")
    out.append("autotune plan: every layout and micro-batch that fits this GPU, before the next run")
    return tuple(out)


def analyse_snapshot(data: Mapping[str, Any], top: int = 10) -> SnapshotAnalysis:
    """The peak, what held it, fragmentation and the OOM of the device with the highest peak."""
    segments, traces = _Segments(**read_fields(_Segments, data)).segments, _traces(data)
    devices = {s.device for s in segments} | {i for i, t in enumerate(traces) if t}
    if not devices:
        raise SnapshotError("the snapshot has no segments and no allocator history: nothing was allocated")
    results = [_device(d, segments, traces[d] if d < len(traces) else [], top) for d in sorted(devices)]
    return max(results, key=lambda r: r.peak_allocated_bytes)


def _device(
    device: int, all_segments: Sequence[Segment], entries: Sequence[Action], top: int
) -> SnapshotAnalysis:
    segments = [s for s in all_segments if s.device == device]
    blocks = [b for s in segments for b in s.blocks]
    active = [b for b in blocks if b.state == "active_allocated"]
    allocated_end = sum(b.size for b in active)
    reserved_end = sum(s.total_size for s in segments)
    largest_free = max((b.size for b in blocks if b.state == "inactive"), default=0)
    notes = []
    _, _, end, _ = _replay(entries, 0)
    # the history is a ring: allocations older than its first entry are still live; what the trace
    # cannot account for at the end was allocated before it began
    before = max(0, allocated_end - end)
    peak, peak_at, _, oom_at = _replay(entries, before)
    if before and entries:
        notes.append(
            f"{before / 2**20:,.1f} MiB were allocated before the recorded history began (it keeps the "
            "last max_entries actions): counted as live until the history frees them, their stacks unknown"
        )
    stacks_recorded = any(e.frames for e in entries)
    if peak_at < 0:  # no history: the snapshot's own state
        live = {b.address: (b.size, b.frames) for b in active}
        peak, reserved_peak, before_live = allocated_end, reserved_end, 0
        if not entries:
            notes.append("no allocator history in the snapshot: the figures are its moment's, not the peak's")
    else:
        live, before_live = _live_until(entries, peak_at, before)
        reserved_peak = _reserved_at(entries, peak_at, reserved_end)
    sums: dict[str, list[Any]] = defaultdict(lambda: [0, 0, ""])
    by_category: Counter[str] = Counter()
    rows = [(size, _where(frames, stacks_recorded), category_of(frames, stacks_recorded))
            for size, frames in live.values()]  # fmt: skip
    if before_live:
        rows.append((before_live, BEFORE_HISTORY, OTHER))
    for size, where, category in rows:
        row = sums[where]
        row[0] += size
        row[1] += 1
        row[2] = row[2] or category
        by_category[category] += size
    sites = sorted((Site(w, n, c, cat) for w, (n, c, cat) in sums.items()), key=lambda s: -s.bytes)
    oom = None
    if oom_at is not None:
        e = entries[oom_at]
        allocated_oom = _replay(entries[:oom_at], before)[2]
        reserved_oom = _reserved_at(entries, oom_at, reserved_end)
        requested, free = e.size, e.device_free
        capacity = reserved_oom + free
        shortfall = max(0, allocated_oom + requested - capacity)
        oom = OomFacts(requested, free, allocated_oom, reserved_oom, capacity, shortfall,
                       _fixes(by_category, shortfall))  # fmt: skip
    return SnapshotAnalysis(
        device=device,
        peak_allocated_bytes=peak,
        reserved_at_peak_bytes=reserved_peak,
        fragmentation_bytes=max(0, reserved_peak - peak),
        largest_free_block_bytes=largest_free,
        by_category=dict(sorted(by_category.items(), key=lambda kv: -kv[1])),
        sites=tuple(sites[:top]),
        live_at_peak=len(live),
        trace_entries=len(entries),
        oom=oom,
        notes=tuple(notes),
    )


def is_snapshot_path(path: Path) -> bool:
    """A file named like a snapshot (``.pickle``, ``.pkl``) or starting with a pickle's header."""
    if path.suffix in (".pickle", ".pkl") or path.name.endswith((".pickle.gz", ".pkl.gz")):
        return True
    try:
        with path.open("rb") as f:
            return f.read(1) == b"\x80"
    except OSError:
        return False


__all__ = [
    "BEFORE_HISTORY",
    "NO_PYTHON_FRAME",
    "NO_STACKS",
    "Action",
    "Block",
    "Frame",
    "OomFacts",
    "Segment",
    "Site",
    "SnapshotAnalysis",
    "SnapshotError",
    "analyse_snapshot",
    "category_of",
    "is_snapshot_path",
    "read_snapshot",
]
