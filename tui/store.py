"""A read-only, incremental reader of a profile run's ``run.db`` (the profiler's run store).

The dashboard may not import ``profilers``, so this module follows the store's schema itself
(``profilers/store.py``: tables ``meta``, ``steps``, ``samples``, ``devices``, ``ops``, ``ranks``,
``warnings``). Every refresh opens the file read-only (``mode=ro`` URI, a busy timeout), reads only
what is new in one read transaction, and closes it again, so the writer is never blocked and a
finished writer can clean up its WAL files:

- ``steps`` of the lowest rank with a step number above the last one read (the primary key
  ``(rank, step)`` makes this an index range scan);
- ``samples`` with a ``rowid`` above the last one read (the table is append-only), at most
  :data:`MAX_SAMPLES_PER_POLL` rows per refresh;
- the small tables (``meta``, ``devices``, ``ranks``) whole, and ``warnings`` above the last rowid.

The first read of a large run aggregates in SQL (one ``GROUP BY`` into the buckets of
:class:`tui.series.Buckets`) instead of fetching every row; past :data:`HISTORY_ROWS` samples it
aggregates evenly spaced blocks of consecutive rows (a sample of the history, each block weighted
for the rows it stands for), so opening a run of any length costs the same. A store whose WAL
file is absent (the writer has finished and checkpointed) is opened ``immutable`` so that reading
it creates no file.
"""

from __future__ import annotations

import json
import sqlite3
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.series import Buckets, bucket_width

STORE_NAME = "run.db"
#: Newest run store schema this dashboard reads (``profilers.records.SCHEMA_VERSION``; a test
#: keeps the two equal).
READS_SCHEMA = 1
#: Steps kept whole for the phase breakdown and the recent rate.
RECENT_STEPS = 50
#: Most sample rows read in one refresh (the rest are read by the next ones).
MAX_SAMPLES_PER_POLL = 200_000
#: The first read of a run with more samples than this aggregates HISTORY_BLOCKS evenly spaced
#: blocks of consecutive rows (HISTORY_ROWS in all), each weighted for the rows it stands for.
HISTORY_ROWS = 65_536
HISTORY_BLOCKS = 512
#: Step-time and phase columns of the ``steps`` table, in the order read.
PHASE_COLUMNS = ("data_ns", "forward_ns", "backward_ns", "optimizer_ns", "eval_ns", "other_ns")
#: Columns of ``steps`` that came later, read as 0 from a store written before them.
LATER_STEP_COLUMNS = ("eval_ns",)
#: Per-device fields kept over time: (field of a GPU sample, field of a host sample).
GPU_FIELDS = ("gpu_util_pct", "mem_used_bytes", "power_mw", "sm_clock_mhz")
HOST_FIELDS = ("cpu_util_pct", "process_cpu_pct", "rss_bytes", "host_mem_used_bytes")
_SAMPLE_FIELDS = GPU_FIELDS + HOST_FIELDS
#: Step fields kept over the steps: duration, samples, and the duration of steps whose samples are known.
STEP_FIELDS = ("duration_ns", "samples", "seen_ns")
_NS_PER_SAMPLE_BUCKET = 100_000_000  # 0.1 s: the narrowest time bucket (10 Hz sampling)


class StoreProblem(Exception):
    """The store cannot be read (corrupt, newer schema); the message is one line for the user."""


@dataclass(frozen=True, slots=True)
class RecentStep:
    """One recent step of the followed rank (times in ns)."""

    step: int
    start_ns: int
    duration_ns: int
    phases_ns: tuple[int, ...]  # PHASE_COLUMNS order
    samples: int | None
    kind: str


@dataclass
class DeviceTrack:
    """One sampled device (a GPU, or a rank's host) over the run: buckets and the latest reading."""

    rank: int
    kind: str  # "gpu" or "host"
    index: int
    buckets: Buckets
    latest: dict[str, float | None] = field(default_factory=dict)
    mem_total_bytes: float | None = None


def ro_connect(path: Path, immutable: bool = False) -> sqlite3.Connection:
    """Open ``path`` read-only (never creating it) with a busy timeout."""
    uri = path.absolute().as_uri() + ("?mode=ro&immutable=1" if immutable else "?mode=ro")
    conn = sqlite3.connect(uri, uri=True, timeout=5.0, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]


class StoreReader:
    """Follows one ``run.db``; :meth:`poll` reads what is new since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.meta: dict[str, Any] = {}
        self.devices: list[dict[str, Any]] = []
        self.ranks: dict[int, dict[str, Any]] = {}
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
        wal = self.path.with_name(self.path.name + "-wal")
        try:
            conn = ro_connect(self.path, immutable=not wal.exists())
        except sqlite3.Error as exc:
            raise StoreProblem(f"{self.path}: cannot open the run store ({_short(exc)})") from None
        try:
            conn.execute("BEGIN")  # one snapshot for every table
            self._read(conn)
        except sqlite3.DatabaseError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                return  # the writer holds it this instant; the next refresh reads it
            raise StoreProblem(f"{self.path}: corrupt or unreadable run store ({_short(exc)})") from None
        except (ValueError, TypeError, KeyError) as exc:
            raise StoreProblem(f"{self.path}: unexpected data in the run store ({_short(exc)})") from None
        finally:
            conn.close()

    def _read(self, conn: sqlite3.Connection) -> None:
        self.tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "meta" in self.tables:
            self.meta = {k: json.loads(v) for k, v in conn.execute("SELECT key, value FROM meta")}
            schema = self.meta.get("schema")
            if isinstance(schema, int) and schema > READS_SCHEMA:
                raise StoreProblem(
                    f"{self.path}: written by a newer gpu-autotune (schema {schema}; this dashboard reads "
                    f"up to {READS_SCHEMA}); upgrade to follow it"
                )
        if "devices" in self.tables:
            self.devices = [
                {**json.loads(info), "rank": rank}
                for rank, info in conn.execute(
                    "SELECT rank, info FROM devices ORDER BY rank, kind, device_index"
                )
            ]
        if "ranks" in self.tables:
            self.ranks = {
                r[0]: {"world_size": r[1], "host": r[2], "pid": r[3], "finished_ns": r[4]}
                for r in conn.execute("SELECT rank, world_size, host, pid, finished_ns FROM ranks")
            }
        if "warnings" in self.tables:
            for rowid, rank, part, message in conn.execute(
                "SELECT rowid, rank, part, message FROM warnings WHERE rowid > ? ORDER BY rowid",
                (self._warning_rowid,),
            ):
                self._warning_rowid = rowid
                self.warnings.append((rank, str(part), str(message)))
        if "steps" in self.tables:
            self._read_steps(conn)
        if "samples" in self.tables:
            self._read_samples(conn)

    def _read_steps(self, conn: sqlite3.Connection) -> None:
        rank = conn.execute("SELECT min(rank) FROM steps").fetchone()[0]
        if rank is None:
            return
        top = conn.execute("SELECT max(step) FROM steps WHERE rank = ?", (rank,)).fetchone()[0]
        if rank != self.rank or top < self.last_step:  # a new lowest rank, or steps were merged
            self.rank, self.last_step, self.steps = rank, 0, None
            self.recent.clear()
            self.first_step_start_ns = None
        if top == self.last_step:
            return
        have = {row[1] for row in conn.execute("PRAGMA table_info(steps)")}
        phase_sql = [c if c in have or c not in LATER_STEP_COLUMNS else "0" for c in PHASE_COLUMNS]
        columns = "step, start_ns, duration_ns, " + ", ".join(phase_sql) + ", samples, kind"
        if self.steps is None:  # the first read: aggregate in SQL, keep the last steps whole
            self.steps = Buckets(STEP_FIELDS, origin=1, base=1, width=bucket_width(top, 1))
            width = self.steps.width
            for b, n, dur, peak, n_samples, samples, seen in conn.execute(
                "SELECT CAST((step - 1) / ? AS INTEGER), count(*), sum(duration_ns), max(duration_ns), "
                "count(samples), sum(samples), sum(CASE WHEN samples IS NOT NULL THEN duration_ns END) "
                "FROM steps WHERE rank = ? AND step <= ? GROUP BY 1",
                (width, rank, top),
            ):
                self.steps.merge_row(
                    1 + b * width, (n, n_samples, n_samples), (dur, samples, seen), (peak, None, None)
                )
            self.first_step_start_ns = conn.execute(
                "SELECT start_ns FROM steps WHERE rank = ? ORDER BY step LIMIT 1", (rank,)
            ).fetchone()[0]
            rows = conn.execute(
                f"SELECT {columns} FROM steps WHERE rank = ? AND step <= ? ORDER BY step DESC LIMIT ?",
                (rank, top, RECENT_STEPS),
            ).fetchall()[::-1]
            self.recent.extend(_recent(r) for r in rows)
        else:
            for row in conn.execute(
                f"SELECT {columns} FROM steps WHERE rank = ? AND step > ? AND step <= ? ORDER BY step",
                (rank, self.last_step, top),
            ):
                step = _recent(row)
                seen = step.duration_ns if step.samples is not None else None
                self.steps.add(step.step, (step.duration_ns, step.samples, seen))
                self.recent.append(step)
        self.last_step = top

    def _read_samples(self, conn: sqlite3.Connection) -> None:
        top = conn.execute("SELECT max(rowid) FROM samples").fetchone()[0]
        if top is None or top <= self.sample_rowid:
            return
        values = ", ".join(_SAMPLE_FIELDS)
        if self.sample_origin_ns is None:  # the first read: aggregate in SQL
            t0 = conn.execute("SELECT min(t_ns) FROM samples").fetchone()[0]
            t1 = conn.execute("SELECT max(t_ns) FROM samples").fetchone()[0]
            self.sample_origin_ns = t0
            width = bucket_width(t1 - t0, _NS_PER_SAMPLE_BUCKET)
            aggregates = ", ".join(f"count({f}), sum({f})" for f in _SAMPLE_FIELDS)
            grouped = f"rank, kind, device_index, CAST((t_ns - ?) / ? AS INTEGER), {aggregates}"
            if top <= HISTORY_ROWS:  # every row
                groups = conn.execute(
                    f"SELECT {grouped} FROM samples WHERE rowid <= ? GROUP BY 1, 2, 3, 4", (t0, width, top)
                )
                weight = 1.0
            else:  # evenly spaced blocks of consecutive rows (every device is in each), weighted
                block = HISTORY_ROWS // HISTORY_BLOCKS
                stride = top // HISTORY_BLOCKS
                weight = stride / block
                groups = conn.execute(
                    "WITH RECURSIVE blocks(lo) AS "
                    "(SELECT 1 UNION ALL SELECT lo + ? FROM blocks WHERE lo + ? <= ?) "
                    f"SELECT {grouped} FROM blocks JOIN samples ON samples.rowid BETWEEN blocks.lo AND "
                    "min(blocks.lo + ? - 1, ?) GROUP BY 1, 2, 3, 4",
                    (stride, stride, top, t0, width, block, top),
                )
            for row in groups:
                track = self._track(int(row[0]), str(row[1]), int(row[2]), width)
                agg = row[4:]
                counts = [round(n * weight) for n in agg[0::2]]
                sums = [None if v is None else v * weight for v in agg[1::2]]
                track.buckets.merge_row(t0 + row[3] * width, counts, sums, [None] * len(counts))
            latest = conn.execute(
                f"SELECT rank, kind, device_index, t_ns, {values}, mem_total_bytes, host_mem_total_bytes "
                "FROM samples WHERE rowid <= ? ORDER BY rowid DESC LIMIT 256",
                (top,),
            ).fetchall()
            for row in reversed(latest):
                self._latest(row)
            self.sample_rowid = top
            return
        rows = conn.execute(
            f"SELECT rowid, rank, kind, device_index, t_ns, {values}, mem_total_bytes, host_mem_total_bytes "
            "FROM samples WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (self.sample_rowid, MAX_SAMPLES_PER_POLL),
        ).fetchall()
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
        if not self.ranks or any(r["finished_ns"] is None for r in self.ranks.values()):
            return None
        return max(int(r["finished_ns"]) for r in self.ranks.values())


def _recent(row: tuple[Any, ...]) -> RecentStep:
    return RecentStep(
        step=int(row[0]),
        start_ns=int(row[1]),
        duration_ns=int(row[2]),
        phases_ns=tuple(int(v or 0) for v in row[3 : 3 + len(PHASE_COLUMNS)]),
        samples=None if row[-2] is None else int(row[-2]),
        kind=str(row[-1]),
    )
