"""The one reader of a run store (``run.db``): consistent snapshots and incremental reads.

A :class:`Snapshot` opens the store read-only (never creating or writing it; ``immutable`` once
its writers have finished and checkpointed, so reading a finished run leaves no ``-wal``/``-shm``
file behind), starts one read transaction, so every table is read as of the same instant while
the writer goes on, and checks the schema version. The profiler's summary, the report and the
dashboard read through it; the dashboard polls with the ``after``/``upto`` marks (steps above a
step number, samples above a rowid: the samples table is append-only) and with the grouped reads
that aggregate a long run in SQL instead of fetching every row.

Errors are :class:`RunStoreError` with a one-line message: a missing, corrupt or newer store.
"""

from __future__ import annotations

import contextlib
import gc
import json
import sqlite3
import typing
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeGuard

from profilers.contract.json_checks import JsonObject, SummaryError
from profilers.contract.profile_summary import ProfileSummary
from profilers.contract.records import (
    HOST_FIELDS,
    SAMPLE_FIELDS,
    DeviceSample,
    OpRecord,
    RankDevice,
    RankRow,
    StepRecord,
)
from profilers.contract.run_meta import RunMeta
from profilers.contract.schema import ADDED_STEP_COLUMNS, SCHEMA_VERSION, STEP_COLUMNS, TUNE_SUMMARY_SCHEMA
from profilers.contract.study.summary import TrialEntry, TuningSummary

#: Seconds a reader waits for a writer's lock before giving up on this read.
BUSY_TIMEOUT_S = 30.0


_SAMPLE_TYPES = typing.get_type_hints(DeviceSample)


def _cast(name: str) -> str:
    """A sample column as a SELECT expression giving its record's type back.

    The samples table's numeric columns have REAL affinity, so integers (indexes, bytes, bit masks)
    are stored as floats; SQLite casts them back (in C: a million rows stay fast).
    """
    return f"CAST({name} AS INTEGER)" if _SAMPLE_TYPES[name] in (int, int | None) else name


#: The SELECT list of a DeviceSample, in field order.
SAMPLE_SELECT = ", ".join(_cast(name) for name in SAMPLE_FIELDS)


def _first(item: tuple[Any, ...]) -> Any:
    return item[0]


class RunStoreError(Exception):
    """The run store cannot be read (missing, corrupt, newer schema); the message is one line."""


class StoreBusy(RunStoreError):
    """A writer held the store past the busy timeout; reading again later will work."""


def decode_loss(value: float | str | None) -> float | None:
    """A stored loss back as a float (None stays None; 'nan'/'inf' text as stored by the writer)."""
    return None if value is None else float(value)


def open_readonly(path: Path, busy_timeout_s: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    """Open ``path`` read-only, never creating it; immutable when no writer is left (no -wal file)."""
    finished = not path.with_name(path.name + "-wal").exists()
    mode = "mode=ro&immutable=1" if finished else "mode=ro"
    uri = f"{Path(path).absolute().as_uri()}?{mode}"
    conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
    return conn


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]


def step_record(row: Sequence[Any]) -> StepRecord:
    """A StepRecord from a row of STEP_COLUMNS then ADDED_STEP_COLUMNS.

    Those are ``loss``, ``eval_ns`` and ``phases_timed``; a store without one reads as no loss, no
    evaluation and phases timed.
    """
    return StepRecord(
        step=row[1],
        rank=row[0],
        start_ns=row[2],
        duration_ns=row[3],
        data_ns=row[4],
        forward_ns=row[5],
        backward_ns=row[6],
        optimizer_ns=row[7],
        other_ns=row[8],
        samples=row[9],
        tokens=row[10],
        kind=row[11],
        loss=decode_loss(row[12]),
        eval_ns=row[13] or 0,
        phases_timed=row[14] is None or bool(row[14]),
    )


@contextlib.contextmanager
def _bulk() -> Iterator[None]:
    """No cyclic garbage collection while a million rows become records (none of them is a cycle).

    The collector would otherwise rescan the growing heap again and again (5.7 s -> 3.4 s for 1M
    samples, measured on benchmarks/report_big.py's run).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _where(column: str, after: int, upto: int | None, rank: int | None) -> tuple[str, list[Any]]:
    """The WHERE clause of ``after < column <= upto`` (no upper bound for None), of ``rank``'s rows."""
    where, params = [f"{column} > ?"], [after]
    if upto is not None:
        where.append(f"{column} <= ?")
        params.append(upto)
    if rank is not None:
        where.append("rank = ?")
        params.append(rank)
    return " AND ".join(where), params


class Snapshot:
    """One read transaction over a run store: every read sees the same instant.

    Use as a context manager (``with Snapshot(path) as snap:``). Reads of a table the store does
    not have (an older or empty store) return nothing rather than fail.
    """

    def __init__(self, path: Path, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self._conn: sqlite3.Connection | None = None
        self.tables: set[str] = set()
        self._step_columns: set[str] = set()

    def __enter__(self) -> Snapshot:
        if not self.path.is_file():
            raise RunStoreError(f"{self.path}: no run store here")
        try:
            conn = open_readonly(self.path, self.busy_timeout_s)
        except sqlite3.Error as exc:
            raise RunStoreError(f"{self.path}: cannot open the run store ({_short(exc)})") from None
        self._conn = conn
        try:
            self._rows("BEGIN")  # the snapshot starts at the first read below
            self.tables = {r[0] for r in self._rows("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "steps" in self.tables:
                self._step_columns = {row[1] for row in self._rows("PRAGMA table_info(steps)")}
            schema = self.meta().raw.get("schema")  # as stored: a whole number
        except BaseException:
            self.close()
            raise
        if isinstance(schema, int) and schema > SCHEMA_VERSION:
            self.close()
            raise RunStoreError(
                f"{self.path}: written by a newer gpu-autotune (schema {schema}; this version reads up to "
                f"{SCHEMA_VERSION}); upgrade to read it"
            )
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """End the read transaction and close the connection."""
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if self._conn is None:
            raise RunStoreError(f"{self.path}: the snapshot is closed")
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise StoreBusy(f"{self.path}: the run store is busy ({_short(exc)})") from None
            raise RunStoreError(f"{self.path}: corrupt or unreadable run store ({_short(exc)})") from None
        except sqlite3.DatabaseError as exc:
            raise RunStoreError(f"{self.path}: corrupt or unreadable run store ({_short(exc)})") from None

    # -- small tables -----------------------------------------------------------------------------
    def meta(self) -> RunMeta:
        """The metadata table, each value JSON-decoded and read leniently (an empty one: none)."""
        if "meta" not in self.tables:
            return RunMeta()
        return RunMeta.parse({k: json.loads(v) for k, v in self._rows("SELECT key, value FROM meta")})

    def devices(self) -> list[RankDevice]:
        """The sampled devices' static facts, each with the rank that sampled it."""
        if "devices" not in self.tables:
            return []
        rows = self._rows("SELECT rank, info FROM devices ORDER BY rank, kind, device_index")
        try:
            return [RankDevice.from_json(rank, json.loads(info)) for rank, info in rows]
        except (TypeError, ValueError) as exc:
            raise RunStoreError(f"{self.path}: unreadable device facts ({exc})") from None

    def ranks(self, with_summary: bool = True) -> dict[int, RankRow]:
        """Rank number to its row; its ``summary`` is the rank's own summary once it finished."""
        if "ranks" not in self.tables:
            return {}
        summary = "summary" if with_summary else "NULL"
        rows = self._rows(f"SELECT rank, world_size, host, pid, finished_ns, {summary} FROM ranks")
        out = {}
        for rank, world_size, host, pid, finished_ns, own in rows:
            parsed = None if own is None else json.loads(own)
            out[rank] = RankRow(rank, world_size, host, pid, finished_ns, parsed)
        return out

    def ops(self) -> list[tuple[int, OpRecord]]:
        """The top operators of every rank's deep-profile window, as (rank, op)."""
        if "ops" not in self.tables:
            return []
        rows = self._rows(
            "SELECT rank, name, device, calls, self_time_us, total_time_us, flops FROM ops "
            "ORDER BY rank, self_time_us DESC"
        )
        return [(r[0], OpRecord(r[1], r[2], r[3], r[4], r[5], r[6])) for r in rows]

    def warnings(self, after_rowid: int = 0) -> list[tuple[int, int, str, str]]:
        """(rowid, rank, part, message) of the warnings written after ``after_rowid``."""
        if "warnings" not in self.tables:
            return []
        rows = self._rows(
            "SELECT rowid, rank, part, message FROM warnings WHERE rowid > ? ORDER BY rowid", (after_rowid,)
        )
        return [(int(r[0]), int(r[1]), str(r[2]), str(r[3])) for r in rows]

    def trial_entries(self) -> list[TrialEntry]:
        """A study store's trials as entries, in id order; SummaryError for one this version cannot read."""
        where = f"{self.path}, trial records"
        return [TrialEntry.from_stored(record, where) for _, record in self.trial_rows()]

    def trial_rows(self) -> list[tuple[int, JsonObject]]:
        """(id, JSON record) of a study store's trials, in id order; RunStoreError for a damaged one."""
        return self._records_by_id("trials", "trial")

    def claim_rows(self) -> list[tuple[int, JsonObject]]:
        """(id, JSON record) of a study store's claimed trials (started; finished or not), in id order."""
        return self._records_by_id("claims", "claim")

    def _records_by_id(self, table: str, what: str) -> list[tuple[int, JsonObject]]:
        if table not in self.tables:
            return []
        out = []
        for row_id, text in self._rows(f"SELECT id, record FROM {table} ORDER BY id"):
            try:
                out.append((int(row_id), json.loads(text)))
            except (TypeError, ValueError) as exc:
                raise RunStoreError(f"{self.path}: {what} {row_id} is damaged ({_short(exc)})") from None
        return out

    def study_rows(self) -> list[tuple[Any, JsonObject]]:
        """(storage schema, metadata) of each row of a study store's ``study`` table (one, or none)."""
        if "study" not in self.tables:
            return []
        out = []
        for schema, text in self._rows("SELECT schema, meta FROM study"):
            try:
                out.append((schema, json.loads(text)))
            except (TypeError, ValueError) as exc:
                raise RunStoreError(f"{self.path}: damaged study record ({_short(exc)})") from None
        return out

    def confirmation_records(self) -> list[JsonObject]:
        """A study's re-measurements of its best and baseline (JSON records), in the order written."""
        if "confirmations" not in self.tables:
            return []
        return [json.loads(text) for (text,) in self._rows("SELECT record FROM confirmations ORDER BY seq")]

    # -- steps ------------------------------------------------------------------------------------
    def _step_select(self) -> str:
        added = ", ".join(c if c in self._step_columns else "NULL" for c in ADDED_STEP_COLUMNS)
        return f"SELECT {STEP_COLUMNS}, {added} FROM steps"

    def steps(
        self, rank: int | None = None, after: int = 0, upto: int | None = None, last: int | None = None
    ) -> list[StepRecord]:
        """Steps in (rank, step) order, of ``rank`` (else every rank).

        Numbered above ``after`` and up to ``upto``; with ``last``, only the last that many.
        """
        if "steps" not in self.tables:
            return []
        where, params = _where("step", after, upto, rank)
        sql = f"{self._step_select()} WHERE {where}"
        with _bulk():
            if last is not None:
                rows = self._rows(f"{sql} ORDER BY rank DESC, step DESC LIMIT ?", (*params, last))[::-1]
            else:
                rows = self._rows(f"{sql} ORDER BY rank, step", params)
            return [step_record(r) for r in rows]

    def lowest_rank(self) -> int | None:
        """The lowest rank that recorded a step (the one a dashboard follows), or None."""
        if "steps" not in self.tables:
            return None
        rank = self._rows("SELECT min(rank) FROM steps")[0][0]
        return None if rank is None else int(rank)

    def first_step_start_ns(self, rank: int) -> int | None:
        """When ``rank``'s first recorded step started (time.time_ns), or None."""
        if "steps" not in self.tables:
            return None
        row = self._rows("SELECT start_ns FROM steps WHERE rank = ? ORDER BY step LIMIT 1", (rank,))
        return int(row[0][0]) if row else None

    def last_step(self, rank: int) -> int:
        """The highest step number ``rank`` recorded (0 without one)."""
        if "steps" not in self.tables:
            return 0
        top = self._rows("SELECT max(step) FROM steps WHERE rank = ?", (rank,))[0][0]
        return int(top or 0)

    def step_groups(self, rank: int, width: int, upto: int) -> list[tuple[Any, ...]]:
        """Steps 1..``upto`` of ``rank`` in groups of ``width`` consecutive numbers, summed in SQL.

        Rows: (group, count, sum of duration_ns, max duration_ns, steps with samples, their samples,
        their duration_ns).
        """
        if "steps" not in self.tables:
            return []
        return self._rows(
            "SELECT CAST((step - 1) / ? AS INTEGER), count(*), sum(duration_ns), max(duration_ns), "
            "count(samples), sum(samples), sum(CASE WHEN samples IS NOT NULL THEN duration_ns END) "
            "FROM steps WHERE rank = ? AND step <= ? GROUP BY 1",
            (width, rank, upto),
        )

    # -- samples ----------------------------------------------------------------------------------
    def sample_extent(self) -> tuple[int, int | None, int | None]:
        """(highest rowid, first t_ns, last t_ns) of the samples; (0, None, None) without any."""
        if "samples" not in self.tables:
            return 0, None, None
        # one aggregate per statement: SQLite answers min() and max() from an index only when alone
        top = self._rows("SELECT max(rowid) FROM samples")[0][0]
        if not top:
            return 0, None, None
        t0 = self._rows("SELECT min(t_ns) FROM samples")[0][0]
        t1 = self._rows("SELECT max(t_ns) FROM samples")[0][0]
        return int(top), t0, t1

    def samples(
        self, rank: int | None = None, after_rowid: int = 0, upto_rowid: int | None = None
    ) -> tuple[list[int], list[int], list[DeviceSample]]:
        """(rowids, ranks, samples) in time order (of ``rank``, else every rank), above ``after_rowid``.

        Built straight from the rows (the columns are DeviceSample's fields in order): a million
        samples load in a few seconds, where dicts first would take several times that.
        """
        if "samples" not in self.tables:
            return [], [], []
        where, params = _where("rowid", after_rowid, upto_rowid, rank)
        sql = f"FROM samples WHERE {where} ORDER BY t_ns, rowid"
        with _bulk():
            ids = self._rows(f"SELECT rowid, rank {sql}", params)
            # the records straight from rows of their fields alone (no slicing: a million rows count)
            samples = list(map(DeviceSample._make, self._rows(f"SELECT {SAMPLE_SELECT} {sql}", params)))
            return [r[0] for r in ids], [r[1] for r in ids], samples

    def host_samples(self) -> tuple[list[int], list[DeviceSample]]:
        """(ranks, samples) of every host reading, in time order.

        Only the host's columns are read (:data:`HOST_FIELDS`; a host reading's GPU fields are
        None): a third of the time of whole rows on a long run's hundreds of thousands of ticks.
        """
        if "samples" not in self.tables:
            return [], []
        columns = ", ".join(_cast(name) for name in ("t_ns", "device_index", *HOST_FIELDS))
        with _bulk():
            rows = self._rows(f"SELECT rank, {columns} FROM samples WHERE kind = 'host'")
            gap = (None,) * (len(SAMPLE_FIELDS) - len(HOST_FIELDS) - 3)
            make = tuple.__new__  # DeviceSample._make without its length check, row by row
            out = [(r[1], r[0], make(DeviceSample, (r[1], r[2], "host", *gap, *r[3:]))) for r in rows]
            out.sort(key=_first)  # written in time order per rank; ranks interleave
            return [rank for _, rank, _ in out], [sample for _, _, sample in out]

    def thinned_samples(self, kind: str, points: int) -> tuple[list[int], list[DeviceSample]]:
        """(ranks, samples) of each (rank, device) series of ``kind``, about ``points`` readings each.

        The run's time is cut into ``points`` equal slices and each series keeps its first reading
        in each slice: a chart's worth of a run of millions of readings, found through the time
        index in ``points`` small lookups instead of a pass over every row. Time order.
        """
        if "samples" not in self.tables or points < 1:
            return [], []
        _, first_ns, last_ns = self.sample_extent()
        if first_ns is None or last_ns is None:
            return [], []
        listed = (
            self._rows("SELECT count(*) FROM devices WHERE kind = ?", (kind,))[0][0]
            if "devices" in self.tables
            else 0
        )
        per_slice = 2 * max(int(listed or 0), 8)  # every series' first reading, with room to spare
        width = (last_ns - first_ns) / points
        edges = [first_ns + i * width for i in range(points)] + [last_ns + 1]
        seen: set[tuple[int, int]] = set()
        kept: list[tuple[Any, ...]] = []
        sql = (
            f"SELECT rank, {SAMPLE_SELECT} FROM samples WHERE t_ns >= ? AND t_ns < ? AND kind = ? "
            "ORDER BY t_ns, rowid LIMIT ?"
        )
        for i in range(points):
            seen.clear()
            for row in self._rows(sql, (edges[i], edges[i + 1], kind, per_slice)):
                key = (row[0], row[2])  # rank, device_index
                if key not in seen:
                    seen.add(key)
                    kept.append(row)
        return [r[0] for r in kept], [DeviceSample._make(r[1:]) for r in kept]

    def sample_rows(self, fields: Sequence[str], after_rowid: int, limit: int) -> list[tuple[Any, ...]]:
        """Raw sample rows above ``after_rowid``, at most ``limit``, in write order.

        Rows: (rowid, rank, kind, device_index, t_ns, *fields, mem_total_bytes, host_mem_total_bytes).
        """
        self._check_fields(fields)
        if "samples" not in self.tables:
            return []
        return self._rows(
            f"SELECT rowid, rank, kind, device_index, t_ns, {', '.join(fields)}, mem_total_bytes, "
            "host_mem_total_bytes FROM samples WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (after_rowid, limit),
        )

    def latest_sample_rows(self, fields: Sequence[str], upto_rowid: int, count: int) -> list[tuple[Any, ...]]:
        """The last ``count`` sample rows up to ``upto_rowid``, oldest first.

        Rows: (rank, kind, device_index, t_ns, *fields, mem_total_bytes, host_mem_total_bytes).
        """
        self._check_fields(fields)
        if "samples" not in self.tables:
            return []
        rows = self._rows(
            f"SELECT rank, kind, device_index, t_ns, {', '.join(fields)}, mem_total_bytes, "
            "host_mem_total_bytes FROM samples WHERE rowid <= ? ORDER BY rowid DESC LIMIT ?",
            (upto_rowid, count),
        )
        return rows[::-1]

    def sample_groups(
        self,
        fields: Sequence[str],
        t0_ns: int,
        width_ns: float,
        upto_rowid: int,
        blocks: tuple[int, int] | None = None,
    ) -> list[tuple[Any, ...]]:
        """Samples up to ``upto_rowid`` summed in SQL per device and time bucket of ``width_ns``.

        Rows: (rank, kind, device_index, bucket, count(f1), sum(f1), count(f2), sum(f2), ...).

        ``blocks`` = (rows per block, stride): only evenly spaced blocks of consecutive rows are read
        (a sample of a long history; every device is in each block), for the caller to weight.
        """
        self._check_fields(fields)
        if "samples" not in self.tables:
            return []
        aggregates = ", ".join(f"count({f}), sum({f})" for f in fields)
        grouped = f"rank, kind, device_index, CAST((t_ns - ?) / ? AS INTEGER), {aggregates}"
        if blocks is None:
            sql = f"SELECT {grouped} FROM samples WHERE rowid <= ? GROUP BY 1, 2, 3, 4"
            return self._rows(sql, (t0_ns, width_ns, upto_rowid))
        block, stride = blocks
        return self._rows(
            "WITH RECURSIVE blocks(lo) AS (SELECT 1 UNION ALL SELECT lo + ? FROM blocks WHERE lo + ? <= ?) "
            f"SELECT {grouped} FROM blocks JOIN samples ON samples.rowid BETWEEN blocks.lo AND "
            "min(blocks.lo + ? - 1, ?) GROUP BY 1, 2, 3, 4",
            (stride, stride, upto_rowid, t0_ns, width_ns, block, upto_rowid),
        )

    @staticmethod
    def _check_fields(fields: Sequence[str]) -> None:
        unknown = [f for f in fields if f not in SAMPLE_FIELDS]
        if unknown:
            raise ValueError(f"not sample fields: {unknown}")


# -- summary.json ---------------------------------------------------------------------------------
def is_study_summary(summary: Any) -> TypeGuard[JsonObject]:
    """Whether a summary.json object is a tuning study's (``"kind": "tune"``), not a profile run's."""
    return isinstance(summary, dict) and summary.get("kind") == "tune"


def parse_summary(summary: JsonObject, path: Path) -> ProfileSummary | TuningSummary:
    """A summary.json object as its record: a study's, else a profile run's.

    SummaryError (one line naming ``path``) when this version cannot read it: no or a newer schema;
    a figure of the wrong type; a tuning summary's trial entry without its id or with an unknown
    status (:mod:`profilers.contract.study.summary`).
    """
    schema = summary.get("schema")
    study = is_study_summary(summary)
    newest = TUNE_SUMMARY_SCHEMA if study else SCHEMA_VERSION
    if not isinstance(schema, int):
        raise SummaryError(f"{path}: not a gpu-autotune summary (no schema version)")
    if schema > newest:
        raise SummaryError(
            f"{path}: written by a newer gpu-autotune (schema {schema}; this version reads up to "
            f"{newest}); upgrade to read it"
        )
    return TuningSummary.parse(summary, str(path)) if study else ProfileSummary.parse(summary, str(path))


def summary_problem(summary: JsonObject, path: Path) -> str | None:
    """Why a summary.json object cannot be read by this version (:func:`parse_summary`), or None."""
    try:
        parse_summary(summary, path)
    except SummaryError as exc:
        return str(exc)
    return None


def read_summary(path: Path) -> JsonObject | None:
    """A summary.json file's object (None when absent); RunStoreError, one line, when unreadable."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunStoreError(f"{path}: unreadable or half-written summary ({_short(exc)})") from None
    if not isinstance(data, dict):
        raise RunStoreError(f"{path}: not a summary (a JSON object was expected)")
    problem = summary_problem(data, path)
    if problem is not None:
        raise RunStoreError(problem)
    return data


# -- one-call readers: each one snapshot -----------------------------------------------------------
def read_steps(path: Path, rank: int | None = None) -> list[StepRecord]:
    """All steps in the store (of one rank, or of all ranks), ordered by rank then step."""
    with Snapshot(path) as snap:
        return snap.steps(rank)


def read_sample_records(path: Path) -> tuple[list[int], list[DeviceSample]]:
    """Every device sample as a record, in time order, with the rank that wrote each (same order)."""
    with Snapshot(path) as snap:
        _, ranks, samples = snap.samples()
    return ranks, samples


def read_meta(path: Path) -> RunMeta:
    """The metadata table (:meth:`Snapshot.meta`)."""
    with Snapshot(path) as snap:
        return snap.meta()


def read_ranks(path: Path) -> dict[int, RankRow]:
    """Rank number to its row; ``summary`` is the rank's own summary once it finished."""
    with Snapshot(path) as snap:
        return snap.ranks()


def read_ops(path: Path) -> list[tuple[int, OpRecord]]:
    """The top operators of every rank's deep-profile window, as (rank, op)."""
    with Snapshot(path) as snap:
        return snap.ops()


def read_devices(path: Path) -> list[RankDevice]:
    """The static facts of the sampled devices, each with its rank."""
    with Snapshot(path) as snap:
        return snap.devices()


__all__ = [
    "RunStoreError",
    "Snapshot",
    "StoreBusy",
    "decode_loss",
    "open_readonly",
    "parse_summary",
    "read_devices",
    "read_meta",
    "read_ops",
    "read_ranks",
    "read_sample_records",
    "read_steps",
    "read_summary",
    "step_record",
    "summary_problem",
]
