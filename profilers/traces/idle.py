"""Why a GPU waits: each stream's idle time split by cause, from a torch.profiler (Kineto) trace.

The split is Holistic Trace Analysis's (``get_idle_time_breakdown``). On each stream, the gap
before each GPU activity (kernel, memcpy, memset) since the previous one on that stream ended is:

- **host wait** when the runtime call that launched the activity started after the previous one had
  ended: the GPU had nothing queued, because the CPU launched too late;
- **kernel wait** when it was launched in time and the gap is shorter than ``kernel_wait_us``
  (30 µs, HTA's default ``consecutive_kernel_delay``, in the trace's µs): the cost of back-to-back
  launches;
- **other** otherwise: it was queued and still waited, on something else on the GPU.

Beyond HTA, :func:`idle_causes` says what each gap overlapped: on the host, a synchronizing runtime
call (``cudaStreamSynchronize``, ``cudaDeviceSynchronize``, ``cudaEventSynchronize``, a blocking
``cudaMemcpy``) with the host operator that made it (``aten::item``, ``aten::_local_scalar_dense``,
``aten::to``…); on the GPU, a communication kernel, a copy or a kernel on another stream.
Pure Python.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: HTA's ``consecutive_kernel_delay`` default: a gap shorter than this between activities launched
#: in time is launch overhead ("kernel wait"), in the trace's unit (µs).
KERNEL_WAIT_US = 30.0

#: The activity kinds HTA's idle breakdown reads (kernels, copies, memsets; not stream syncs).
IDLE_KINDS = frozenset({"kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy", "mtia_ccp_events"})

#: Runtime calls that block the host until the GPU (or a stream, or an event) catches up.
SYNC_CALLS = ("Synchronize", "cudaMemcpy", "hipMemcpy", "cudaStreamWaitEvent", "hipStreamWaitEvent")

#: Host ops that are not the operator to name for a sync (the steps, the profiler's own ranges).
_NOT_AN_OPERATOR = ("ProfilerStep#", "## ", "cuda", "hip", "Memcpy", "Memset")

CATEGORIES = ("host_wait", "kernel_wait", "other")


@dataclass(frozen=True, slots=True)
class StreamIdle:
    """One stream's idle time, split as HTA splits it (µs and shares of the stream's idle time)."""

    stream: int
    activities: int
    busy_us: float  # summed duration of its activities
    idle_us: float  # summed gaps between them
    host_wait_us: float
    kernel_wait_us: float
    other_us: float
    host_wait_pct: float | None  # of idle_us; None when the stream never waited
    kernel_wait_pct: float | None
    other_pct: float | None


@dataclass(frozen=True, slots=True)
class IdleCause:
    """What a share of the busiest stream's idle time overlapped, and the operator behind it."""

    # "launch" (host wait), "launch_overhead" (kernel wait), "sync" (a synchronizing call on the host),
    # "communication", "copy" or "other_stream" (the GPU ran that instead), "unknown"
    cause: str
    category: str  # the HTA category the gaps were in: "host_wait", "kernel_wait" or "other"
    idle_us: float
    idle_pct: float  # of the stream's idle time
    gaps: int
    evidence: str  # the call or kernel seen, with its host operator ("cudaStreamSynchronize in aten::item")


@dataclass(frozen=True, slots=True)
class IdleBreakdown:
    """A rank's idle time by cause, on its busiest compute stream and on every stream."""

    stream: int  # the busiest compute stream, which the headline figures are of
    host_wait_pct: float | None
    kernel_wait_pct: float | None
    other_pct: float | None
    idle_us: float
    streams: tuple[StreamIdle, ...]
    causes: tuple[IdleCause, ...]  # the busiest stream's idle, by cause, largest first


# (start, end, name, correlation, stream, category, kind): category as the trace spells it ("kernel",
# "gpu_memcpy"…), kind by name as the temporal breakdown classifies it ("compute", "communication"…)
Activity = tuple[float, float, str, int, int, str, str]
# correlation -> (start, duration, name) of the runtime call that launched it
Launches = dict[int, tuple[float, float, str]]
# (start, end, name, thread) of host ops and runtime calls
HostEvent = tuple[float, float, str, Any]


def _pct(part: float, whole: float) -> float | None:
    return 100.0 * part / whole if whole > 0 else None


def _gaps(acts: list[Activity], launches: Launches, kernel_wait_us: float) -> list[tuple[float, float, str]]:
    """(gap start, gap end, category) before every activity of one stream but its first."""
    out = []
    prev_end: float | None = None
    for start, end, _, corr, _, _, _ in acts:
        if prev_end is not None:
            launch = launches.get(corr)
            if launch is not None and launch[0] > prev_end:
                category = "host_wait"
            elif start - prev_end < kernel_wait_us:
                category = "kernel_wait"
            else:
                category = "other"
            out.append((prev_end, start, category))
        prev_end = end
    return out


def stream_idle(stream: int, acts: list[Activity], gaps: list[tuple[float, float, str]]) -> StreamIdle:
    """One stream's figures from its activities and gaps."""
    by = dict.fromkeys(CATEGORIES, 0.0)
    for start, end, category in gaps:
        by[category] += end - start
    idle = sum(by.values())
    return StreamIdle(
        stream=stream,
        activities=len(acts),
        busy_us=sum(a[1] - a[0] for a in acts),
        idle_us=idle,
        host_wait_us=by["host_wait"],
        kernel_wait_us=by["kernel_wait"],
        other_us=by["other"],
        host_wait_pct=_pct(by["host_wait"], idle),
        kernel_wait_pct=_pct(by["kernel_wait"], idle),
        other_pct=_pct(by["other"], idle),
    )


class _ByStart:
    """Spans sorted by start, to find the one that covers most of a gap without scanning them all."""

    def __init__(self, spans: Sequence[Any]) -> None:
        self.spans = sorted(spans, key=lambda x: x[0])
        self.starts = [x[0] for x in self.spans]
        self.reach: list[float] = []  # the latest end among the spans up to each index
        for x in self.spans:
            self.reach.append(max(x[1], self.reach[-1]) if self.reach else x[1])

    def most_over(self, start: float, end: float) -> tuple[Any, float]:
        """The span covering most of [start, end], and how much of it."""
        best, covered = None, 0.0
        i = bisect_left(self.starts, end) - 1
        while i >= 0 and self.reach[i] > start:  # no span at or before i reaches the gap otherwise
            x = self.spans[i]
            c = min(end, x[1]) - max(start, x[0])
            if c > covered:
                best, covered = x, c
            i -= 1
        return best, covered


def _enclosing_ops(host: Sequence[HostEvent], calls: Sequence[HostEvent]) -> dict[int, str]:
    """Each call's host operators on its thread, by id(call): "inner (from outer)", or the one.

    One pass per thread with a stack of open events (sorted by start, the longer first at a tie).
    """
    wanted = {id(c) for c in calls}
    threads: dict[Any, list[HostEvent]] = defaultdict(list)
    for event in host:
        threads[event[3]].append(event)
    out: dict[int, str] = {}
    for events in threads.values():
        events.sort(key=lambda e: (e[0], e[0] - e[1]))
        stack: list[HostEvent] = []
        for event in events:
            while stack and stack[-1][1] < event[1]:
                stack.pop()
            if id(event) in wanted:
                ops = [e[2] for e in stack if not e[2].startswith(_NOT_AN_OPERATOR)]
                if ops:
                    out[id(event)] = ops[-1] if ops[0] == ops[-1] else f"{ops[-1]} (from {ops[0]})"
            stack.append(event)
    return out


_LATE = {"host_wait": "the CPU launched the next activity late", "kernel_wait": "launch overhead"}


def _cause_of(gap: tuple[float, float, str], syncs: _ByStart, others: _ByStart) -> tuple[str, Any]:
    """(cause, evidence) of one gap: what covered most of it on the host or another stream.

    For a sync the evidence is the call itself (its operator is looked up once per call).
    """
    start, end, category = gap
    half = (end - start) / 2
    call, covered = syncs.most_over(start, end)
    if call is not None and covered >= half:
        return "sync", call
    if category != "other":
        return ("launch" if category == "host_wait" else "launch_overhead"), _LATE[category]
    act, covered = others.most_over(start, end)
    if act is None or covered < half:
        return "unknown", "nothing else ran on the GPU or synchronized on the host during it"
    cause = "communication" if act[6] == "communication" else "copy" if act[5] != "kernel" else "other_stream"
    return cause, f"{act[2][:80]} on stream {act[4]}"


def idle_causes(
    stream: int, gaps: list[tuple[float, float, str]], acts: Sequence[Activity], host: Sequence[HostEvent]
) -> tuple[IdleCause, ...]:
    """The stream's idle time by what each gap overlapped, largest first."""
    sync_calls = [h for h in host if any(name in h[2] for name in SYNC_CALLS)]
    syncs = _ByStart(sync_calls)
    others = _ByStart([a for a in acts if a[4] != stream])
    ops = _enclosing_ops(host, sync_calls)  # id of a sync call -> "aten::item"
    total = sum(e - s for s, e, _ in gaps)
    sums: dict[tuple[str, str], list[Any]] = defaultdict(lambda: [0.0, 0, Counter()])
    for gap in gaps:
        cause, evidence = _cause_of(gap, syncs, others)
        if cause == "sync":
            op = ops.get(id(evidence))
            evidence = evidence[2] + (f" in {op}" if op else "")
        row = sums[(cause, gap[2])]
        row[0] += gap[1] - gap[0]
        row[1] += 1
        row[2][evidence] += gap[1] - gap[0]
    out = [
        IdleCause(cause, category, us, 100.0 * us / total if total else 0.0, n, counter.most_common(1)[0][0])
        for (cause, category), (us, n, counter) in sums.items()
        if us > 0
    ]
    return tuple(sorted(out, key=lambda c: -c.idle_us))


def idle_breakdown(
    acts: Sequence[Activity],
    launches: Launches,
    host: Sequence[HostEvent],
    kernel_wait_us: float = KERNEL_WAIT_US,
) -> IdleBreakdown | None:
    """The rank's idle breakdown; None without a compute kernel on any stream.

    Times are taken at whole µs as HTA takes them (an activity from the next whole µs after its start
    to the last one before its end, a launch at the next whole µs), so the split equals HTA's: a
    gap's category can turn on a fraction of a µs around ``kernel_wait_us``.
    """
    acts = [(math.ceil(a[0]), math.floor(a[1]), *a[2:]) for a in acts]
    launches = {corr: (math.ceil(call[0]), *call[1:]) for corr, call in launches.items()}
    by_stream: dict[int, list[Activity]] = defaultdict(list)
    for act in acts:
        if act[5] in IDLE_KINDS:
            by_stream[act[4]].append(act)
    compute_us: dict[int, float] = defaultdict(float)
    for act in acts:
        if act[6] == "compute":
            compute_us[act[4]] += act[1] - act[0]
    if not compute_us:
        return None
    busiest = max(compute_us, key=lambda s: (compute_us[s], -s))
    streams, gaps_of = [], {}
    for stream in sorted(by_stream):
        ordered = sorted(by_stream[stream], key=lambda a: a[0])
        gaps = _gaps(ordered, launches, kernel_wait_us)
        gaps_of[stream] = gaps
        streams.append(stream_idle(stream, ordered, gaps))
    head = next(s for s in streams if s.stream == busiest)
    all_acts = sorted((a for a in acts if a[5] in IDLE_KINDS), key=lambda a: a[0])
    return IdleBreakdown(
        stream=busiest,
        host_wait_pct=head.host_wait_pct,
        kernel_wait_pct=head.kernel_wait_pct,
        other_pct=head.other_pct,
        idle_us=head.idle_us,
        streams=tuple(streams),
        causes=idle_causes(busiest, gaps_of[busiest], all_acts, host),
    )


__all__ = [
    "CATEGORIES",
    "KERNEL_WAIT_US",
    "IdleBreakdown",
    "IdleCause",
    "StreamIdle",
    "idle_breakdown",
    "idle_causes",
    "stream_idle",
]
