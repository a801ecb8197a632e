"""The dashboard's incremental reader of a profile run's ``run.db`` (the profiler's run store).

It reads through the run directory's one reader (``profilers.contract.reader``; the dashboard may
import nothing else of ``profilers``). Every refresh opens one read-only snapshot (a busy timeout,
``immutable`` once the writer has finished), reads only what is new, and closes it again, so the
writer is never blocked and a finished writer can clean up its WAL files:

- ``steps`` of the lowest rank with a step number above the last one read;
- ``samples`` with a ``rowid`` above the last one read (the table is append-only), at most
  :data:`MAX_SAMPLES_PER_POLL` rows per refresh;
- the small tables (``meta``, ``devices``, ``ranks``) whole, and ``warnings`` above the last rowid.

The first read of a large run aggregates in SQL (the contract's grouped reads, into the buckets of
:class:`tui.series.Buckets`) instead of fetching every row; past :data:`HISTORY_ROWS` samples it
aggregates evenly spaced blocks of consecutive rows (a sample of the history, each block weighted
for the rows it stands for), so opening a run of any length costs the same.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profilers.contract.reader import RunStoreError, Snapshot, StoreBusy
from profilers.contract.records import RankDevice, RankRow, StepRecord
from profilers.contract.run_meta import RunMeta
from profilers.contract.schema import PHASES

from tui.series import Buckets, bucket_width

#: Steps kept whole for the phase breakdown and the recent rate.
RECENT_STEPS = 50
#: Most sample rows read in one refresh (the rest are read by the next ones).
MAX_SAMPLES_PER_POLL = 200_000
#: The first read of a run with more samples than this aggregates HISTORY_BLOCKS evenly spaced
#: blocks of consecutive rows (HISTORY_ROWS in all), each weighted for the rows it stands for.
HISTORY_ROWS = 65_536
HISTORY_BLOCKS = 512
#: Per-device fields kept over time: (field of a GPU sample, field of a host sample).
GPU_FIELDS = ("gpu_util_pct", "mem_used_bytes", "power_mw", "sm_clock_mhz")
HOST_FIELDS = ("cpu_util_pct", "process_cpu_pct", "rss_bytes", "host_mem_used_bytes")
_SAMPLE_FIELDS = GPU_FIELDS + HOST_FIELDS
#: Step fields kept over the steps: duration, samples, and the duration of steps whose samples are known.
STEP_FIELDS = ("duration_ns", "samples", "seen_ns")
_NS_PER_SAMPLE_BUCKET = 100_000_000  # 0.1 s: the narrowest time bucket (10 Hz sampling)


#: The store cannot be read (missing, corrupt, newer schema); the message is one line for the user.
StoreProblem = RunStoreError


@dataclass(frozen=True, slots=True)
class RecentStep:
    """One recent step of the followed rank (times in ns)."""

    step: int
    start_ns: int
    duration_ns: int
    phases_ns: tuple[int, ...]  # PHASES order
    samples: int | None
    kind: str
    phases_timed: bool = True  # False: a CUDA step between phase samples (the host's split)


@dataclass
class DeviceTrack:
    """One sampled device (a GPU, or a rank's host) over the run: buckets and the latest reading."""

    rank: int
    kind: str  # "gpu" or "host"
    index: int
    buckets: Buckets
    latest: dict[str, float | None] = field(default_factory=dict)
    mem_total_bytes: float | None = None


class StoreReader:
    """Follows one ``run.db``; :meth:`poll` reads what is new since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.meta = RunMeta()
        self.devices: list[RankDevice] = []
        self.ranks: dict[int, RankRow] = {}
        self.warnings: list[tuple[int, str, str]] = []  # (rank, part, message)
        self.tables: set[str] = set()
        self.rank: int | None = None  # the rank whose steps are followed (the lowest)
        self.last_step = 0
        self.steps: Buckets | None = None
        self.recent: deque[RecentStep] = deque(maxlen=RECENT_STEPS)
        self.first_step_start_ns: int | None = None
        self.tracks: dict[tuple[int, str, int], DeviceTrack] = {}
        self.sample_rowid = 0
        self.sample_origin_ns: float | None = None
        self.last_sample_ns: float | None = None
        self._warning_rowid = 0

    # ------------------------------------------------------------------ reading

    def poll(self) -> None:
        """Read what is new (StoreProblem when the store is corrupt or from a newer schema)."""
        if not self.path.exists():
            return
        try:
            with Snapshot(self.path, busy_timeout_s=5.0) as snap:
                self._read(snap)
        except StoreBusy:
            return  # the writer holds it this instant; the next refresh reads it
        except (ValueError, TypeError, KeyError) as exc:
            text = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
            raise StoreProblem(f"{self.path}: unexpected data in the run store ({text})") from None

    def _read(self, snap: Snapshot) -> None:
        self.tables = snap.tables
        self.meta = snap.meta()
        self.devices = snap.devices()
        self.ranks = snap.ranks(with_summary=False)
        for rowid, rank, part, message in snap.warnings(self._warning_rowid):
            self._warning_rowid = rowid
            self.warnings.append((rank, part, message))
        self._read_steps(snap)
        self._read_samples(snap)

    def _read_steps(self, snap: Snapshot) -> None:
        rank = snap.lowest_rank()
        if rank is None:
            return
        top = snap.last_step(rank)
        if rank != self.rank or top < self.last_step:  # a new lowest rank, or steps were merged
            self.rank, self.last_step, self.steps = rank, 0, None
            self.recent.clear()
            self.first_step_start_ns = None
        if top == self.last_step:
            return
        if self.steps is None:  # the first read: aggregate in SQL, keep the last steps whole
            self.steps = Buckets(STEP_FIELDS, origin=1, base=1, width=bucket_width(top, 1))
            width = self.steps.width
            for b, n, dur, peak, n_samples, samples, seen in snap.step_groups(rank, int(width), top):
                self.steps.merge_row(
                    1 + b * width, (n, n_samples, n_samples), (dur, samples, seen), (peak, None, None)
                )
            self.first_step_start_ns = snap.first_step_start_ns(rank)
            self.recent.extend(_recent(r) for r in snap.steps(rank, upto=top, last=RECENT_STEPS))
        else:
            for record in snap.steps(rank, after=self.last_step, upto=top):
                step = _recent(record)
                seen = step.duration_ns if step.samples is not None else None
                self.steps.add(step.step, (step.duration_ns, step.samples, seen))
                self.recent.append(step)
        self.last_step = top

    def _read_samples(self, snap: Snapshot) -> None:
        top, t0, t1 = snap.sample_extent()
        if top <= self.sample_rowid or t0 is None or t1 is None:
            return
        if self.sample_origin_ns is None:  # the first read: aggregate in SQL
            self.sample_origin_ns = t0
            width = bucket_width(t1 - t0, _NS_PER_SAMPLE_BUCKET)
            if top <= HISTORY_ROWS:  # every row
                groups = snap.sample_groups(_SAMPLE_FIELDS, t0, width, top)
                weight = 1.0
            else:  # evenly spaced blocks of consecutive rows (every device is in each), weighted
                block = HISTORY_ROWS // HISTORY_BLOCKS
                stride = top // HISTORY_BLOCKS
                weight = stride / block
                groups = snap.sample_groups(_SAMPLE_FIELDS, t0, width, top, blocks=(block, stride))
            for row in groups:
                track = self._track(int(row[0]), str(row[1]), int(row[2]), width)
                agg = row[4:]
                counts = [round(n * weight) for n in agg[0::2]]
                sums = [None if v is None else v * weight for v in agg[1::2]]
                track.buckets.merge_row(t0 + row[3] * width, counts, sums, [None] * len(counts))
            for row in snap.latest_sample_rows(_SAMPLE_FIELDS, top, 256):
                self._latest(row)
            self.sample_rowid = top
            return
        rows = snap.sample_rows(_SAMPLE_FIELDS, self.sample_rowid, MAX_SAMPLES_PER_POLL)
        end = 5 + len(_SAMPLE_FIELDS)
        newest: dict[tuple[int, str, int], tuple[Any, ...]] = {}
        for row in rows:
            key = (row[1], row[2], row[3])
            track = self.tracks.get(key) or self._track(*key)
            track.buckets.add(row[4], row[5:end])
            newest[key] = row
        for row in newest.values():
            self._latest(row[1:])
        if rows:
            self.sample_rowid = rows[-1][0]

    def _track(self, rank: int, kind: str, index: int, width: float = 0.0) -> DeviceTrack:
        key = (rank, kind, index)
        track = self.tracks.get(key)
        if track is None:
            assert self.sample_origin_ns is not None
            buckets = Buckets(_SAMPLE_FIELDS, self.sample_origin_ns, _NS_PER_SAMPLE_BUCKET, width=width)
            track = self.tracks[key] = DeviceTrack(rank, kind, index, buckets)
        return track

    def _latest(self, row: tuple[Any, ...]) -> DeviceTrack:
        """Record ``row`` (rank, kind, index, t_ns, fields..., totals) as its device's latest reading."""
        track = self._track(int(row[0]), str(row[1]), int(row[2]))
        n = len(_SAMPLE_FIELDS)
        track.latest = dict(zip(_SAMPLE_FIELDS, row[4 : 4 + n], strict=True))
        total = row[4 + n] if track.kind == "gpu" else row[5 + n]
        if total:
            track.mem_total_bytes = total
        t = row[3]
        if self.last_sample_ns is None or t > self.last_sample_ns:
            self.last_sample_ns = t
        return track

    # ------------------------------------------------------------------ facts

    @property
    def has_data(self) -> bool:
        """Whether any step or sample was read."""
        return self.last_step > 0 or bool(self.tracks)

    def finished_ns(self) -> int | None:
        """When the last rank finished, once every rank has; else None."""
        if not self.ranks or any(r.finished_ns is None for r in self.ranks.values()):
            return None
        return max(r.finished_ns or 0 for r in self.ranks.values())


def _recent(record: StepRecord) -> RecentStep:
    phases = record.phase_ns()
    return RecentStep(
        step=record.step,
        start_ns=record.start_ns,
        duration_ns=record.duration_ns,
        phases_ns=tuple(int(phases[p] or 0) for p in PHASES),
        samples=record.samples,
        kind=record.kind,
        phases_timed=record.phases_timed,
    )
