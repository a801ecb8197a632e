"""The run store: SQLite in WAL mode, crash-safe and readable while it is written.

One writer connection per process (owned by the recorder thread); readers never block it. Several
ranks of one torchrun job write to the same file; SQLite serialises their short transactions.
Every row carries the rank that wrote it.

The steps table's ``loss`` and ``eval_ns`` columns came later (same schema version: columns are only
added). The readers accept a store without them (every loss None, every eval 0), and a writer
opening such a store adds them.
SQLite has no NaN (it would store NULL, "no loss"), so non-finite losses are stored as the text
``'nan'``, ``'inf'`` or ``'-inf'`` and read back as floats.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from profilers.records import SAMPLE_FIELDS, SCHEMA_VERSION, DeviceSample, OpRecord, StepRecord

STORE_NAME = "run.db"

_SAMPLE_COLUMNS = ", ".join(f"{name} {'TEXT' if name == 'kind' else 'REAL'}" for name in SAMPLE_FIELDS)

SCHEMA_SQL = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS steps (
    rank INTEGER NOT NULL, step INTEGER NOT NULL, start_ns INTEGER NOT NULL,
    duration_ns INTEGER NOT NULL, data_ns INTEGER NOT NULL, forward_ns INTEGER NOT NULL,
    backward_ns INTEGER NOT NULL, optimizer_ns INTEGER NOT NULL, other_ns INTEGER NOT NULL,
    samples INTEGER, tokens INTEGER, kind TEXT NOT NULL, loss REAL, eval_ns INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (rank, step));
CREATE TABLE IF NOT EXISTS samples (rank INTEGER NOT NULL, {_SAMPLE_COLUMNS});
CREATE INDEX IF NOT EXISTS samples_t ON samples (t_ns);
CREATE TABLE IF NOT EXISTS devices (
    rank INTEGER NOT NULL, device_index INTEGER NOT NULL, kind TEXT NOT NULL, info TEXT NOT NULL,
    PRIMARY KEY (rank, kind, device_index));
CREATE TABLE IF NOT EXISTS ops (
    rank INTEGER NOT NULL, name TEXT NOT NULL, device TEXT NOT NULL, calls INTEGER NOT NULL,
    self_time_us REAL NOT NULL, total_time_us REAL NOT NULL, flops INTEGER);
CREATE TABLE IF NOT EXISTS ranks (
    rank INTEGER PRIMARY KEY, world_size INTEGER NOT NULL, host TEXT, pid INTEGER,
    finished_ns INTEGER, summary TEXT);
CREATE TABLE IF NOT EXISTS warnings (rank INTEGER NOT NULL, t_ns INTEGER NOT NULL, part TEXT, message TEXT);
"""

_STEP_COLUMNS = (
    "rank, step, start_ns, duration_ns, data_ns, forward_ns, backward_ns, optimizer_ns, other_ns, "
    "samples, tokens, kind"
)
#: Columns added to ``steps`` after its first version, with their SQL types.
_ADDED_STEP_COLUMNS = {"loss": "REAL", "eval_ns": "INTEGER NOT NULL DEFAULT 0"}


def encode_loss(loss: float | None) -> float | str | None:
    """A loss as stored: the float, or its text when it is not finite (SQLite has no NaN)."""
    if loss is None or math.isfinite(loss):
        return loss
    return repr(float(loss))  # 'nan', 'inf' or '-inf'


def decode_loss(value: float | str | None) -> float | None:
    """A stored loss back as a float (None stays None)."""
    return None if value is None else float(value)


def step_columns(conn: sqlite3.Connection) -> set[str]:
    """The columns the store's ``steps`` table has."""
    return {row[1] for row in conn.execute("PRAGMA table_info(steps)")}


def connect(path: Path, readonly: bool = False) -> sqlite3.Connection:
    """Open the store (WAL, a busy timeout for concurrent ranks); read-only opens never write."""
    if readonly:
        # A store whose writers have all closed has no -wal file: open it immutable, so reading a
        # finished run leaves no -wal/-shm files behind (and needs no write access to its folder).
        finished = not path.with_name(path.name + "-wal").exists()
        mode = "mode=ro&immutable=1" if finished else "mode=ro"
        uri = f"{Path(path).resolve().as_uri()}?{mode}"
        conn = sqlite3.connect(uri, uri=True, timeout=30, check_same_thread=False)
    else:
        conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


class RunStore:
    """Writer side of the store. Use from one thread at a time (the recorder thread)."""

    def __init__(self, path: Path, rank: int = 0) -> None:
        self.path = path
        self.rank = rank
        self.conn = connect(path)
        for statement in SCHEMA_SQL.split(";"):
            if statement.strip():
                self.conn.execute(statement)
        for column, sql_type in _ADDED_STEP_COLUMNS.items():
            if column in step_columns(self.conn):
                continue
            try:  # a store written before the column existed
                self.conn.execute(f"ALTER TABLE steps ADD COLUMN {column} {sql_type}")
            except sqlite3.OperationalError:
                if column not in step_columns(self.conn):  # else another rank added it meanwhile
                    raise
        self.set_meta({"schema": SCHEMA_VERSION}, only_if_missing=True)

    def set_meta(self, values: dict[str, Any], only_if_missing: bool = False) -> None:
        """Store JSON-encoded metadata values under their keys."""
        verb = "INSERT OR IGNORE" if only_if_missing else "INSERT OR REPLACE"
        self._many(
            f"{verb} INTO meta (key, value) VALUES (?, ?)", [(k, json.dumps(v)) for k, v in values.items()]
        )

    def add_steps(self, steps: Sequence[StepRecord]) -> None:
        """Append closed steps."""
        self._many(
            f"INSERT OR REPLACE INTO steps ({_STEP_COLUMNS}, loss, eval_ns) VALUES ({', '.join('?' * 14)})",
            [
                (
                    s.rank,
                    s.step,
                    s.start_ns,
                    s.duration_ns,
                    s.data_ns,
                    s.forward_ns,
                    s.backward_ns,
                    s.optimizer_ns,
                    s.other_ns,
                    s.samples,
                    s.tokens,
                    s.kind,
                    encode_loss(s.loss),
                    s.eval_ns,
                )
                for s in steps
            ],
        )

    def delete_steps(self) -> None:
        """Delete this rank's steps (they were merged into a new step 1)."""
        self._many("DELETE FROM steps WHERE rank = ?", [(self.rank,)])

    def add_samples(self, rows: Iterable[dict[str, Any]]) -> None:
        """Append device samples (dicts with the SAMPLE_FIELDS keys)."""
        cols = ", ".join(SAMPLE_FIELDS)
        self._many(
            f"INSERT INTO samples (rank, {cols}) VALUES (?, {', '.join('?' * len(SAMPLE_FIELDS))})",
            [(self.rank, *(row.get(name) for name in SAMPLE_FIELDS)) for row in rows],
        )

    def set_devices(self, infos: Iterable[dict[str, Any]]) -> None:
        """Record the static facts of the sampled devices."""
        self._many(
            "INSERT OR REPLACE INTO devices (rank, device_index, kind, info) VALUES (?, ?, ?, ?)",
            [(self.rank, d["index"], d["kind"], json.dumps(d)) for d in infos],
        )

    def replace_devices(self, infos: Sequence[dict[str, Any]]) -> None:
        """Make ``infos`` this rank's devices (the job's GPUs were found among those sampled)."""
        self._many("DELETE FROM devices WHERE rank = ?", [(self.rank,)])
        self.set_devices(infos)

    def delete_gpu_samples(self, keep: Sequence[int]) -> None:
        """Delete this rank's samples of GPUs other than ``keep`` (NVML indexes): not the job's."""
        marks = ", ".join("?" * len(keep))
        where = (
            f"rank = ? AND kind = 'gpu' AND device_index NOT IN ({marks})"
            if keep
            else "rank = ? AND kind = 'gpu'"
        )
        self._many(f"DELETE FROM samples WHERE {where}", [(self.rank, *keep)])

    def set_ops(self, ops: Sequence[OpRecord]) -> None:
        """Replace this rank's top operators."""
        self.conn.execute("BEGIN")
        try:
            self.conn.execute("DELETE FROM ops WHERE rank = ?", (self.rank,))
            self.conn.executemany(
                "INSERT INTO ops (rank, name, device, calls, self_time_us, total_time_us, flops) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (self.rank, o.name, o.device, o.calls, o.self_time_us, o.total_time_us, o.flops)
                    for o in ops
                ],
            )
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def add_warning(self, t_ns: int, part: str, message: str) -> None:
        """Record a profiler fault that was reported to the user."""
        self._many(
            "INSERT INTO warnings (rank, t_ns, part, message) VALUES (?, ?, ?, ?)",
            [(self.rank, t_ns, part, message)],
        )

    def set_rank(
        self, world_size: int, host: str, pid: int, finished_ns: int | None, summary: dict[str, Any] | None
    ) -> None:
        """Record this rank, and its own summary once it has finished."""
        self._many(
            "INSERT OR REPLACE INTO ranks (rank, world_size, host, pid, finished_ns, summary) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [
                (
                    self.rank,
                    world_size,
                    host,
                    pid,
                    finished_ns,
                    None if summary is None else json.dumps(summary),
                )
            ],
        )

    def _many(self, sql: str, rows: Sequence[tuple[Any, ...]] | list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        self.conn.execute("BEGIN")
        try:
            self.conn.executemany(sql, rows)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Close the connection (checkpointing the WAL)."""
        self.conn.close()


# -- readers (no torch; used by rank 0's summary, reports and tests) -----------------------------
def read_steps(path: Path, rank: int | None = None) -> list[StepRecord]:
    """All steps in the store (of one rank, or of all ranks), ordered by rank then step."""
    conn = connect(path, readonly=True)
    try:
        where, params = ("WHERE rank = ?", (rank,)) if rank is not None else ("", ())
        have = step_columns(conn)
        added = ", ".join(c if c in have else "NULL" for c in _ADDED_STEP_COLUMNS)
        rows = conn.execute(
            f"SELECT {_STEP_COLUMNS}, {added} FROM steps {where} ORDER BY rank, step", params
        ).fetchall()
    finally:
        conn.close()
    return [
        StepRecord(
            step=r[1],
            rank=r[0],
            start_ns=r[2],
            duration_ns=r[3],
            data_ns=r[4],
            forward_ns=r[5],
            backward_ns=r[6],
            optimizer_ns=r[7],
            other_ns=r[8],
            samples=r[9],
            tokens=r[10],
            kind=r[11],
            loss=decode_loss(r[12]),
            eval_ns=r[13] or 0,
        )
        for r in rows
    ]


def read_samples(path: Path) -> list[dict[str, Any]]:
    """All device samples as dicts (with their rank), in time order."""
    conn = connect(path, readonly=True)
    try:
        cur = conn.execute(f"SELECT rank, {', '.join(SAMPLE_FIELDS)} FROM samples ORDER BY t_ns")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    finally:
        conn.close()


def read_sample_records(path: Path) -> tuple[list[int], list[DeviceSample]]:
    """Every device sample as a record, in time order, with the rank that wrote each (same order).

    Built straight from the rows (the columns are DeviceSample's fields in order): a million
    samples load in a few seconds, where dicts first would take several times that.
    """
    conn = connect(path, readonly=True)
    try:
        rows = conn.execute(f"SELECT rank, {', '.join(SAMPLE_FIELDS)} FROM samples ORDER BY t_ns").fetchall()
    finally:
        conn.close()
    return [r[0] for r in rows], [DeviceSample(*r[1:]) for r in rows]


def read_meta(path: Path) -> dict[str, Any]:
    """The metadata table, JSON-decoded."""
    conn = connect(path, readonly=True)
    try:
        return {k: json.loads(v) for k, v in conn.execute("SELECT key, value FROM meta").fetchall()}
    finally:
        conn.close()


def read_ranks(path: Path) -> dict[int, dict[str, Any]]:
    """Rank number to its row; ``summary`` is the rank's own summary once it finished."""
    conn = connect(path, readonly=True)
    try:
        rows = conn.execute("SELECT rank, world_size, host, pid, finished_ns, summary FROM ranks").fetchall()
    finally:
        conn.close()
    return {
        r[0]: {
            "world_size": r[1],
            "host": r[2],
            "pid": r[3],
            "finished_ns": r[4],
            "summary": None if r[5] is None else json.loads(r[5]),
        }
        for r in rows
    }


def read_ops(path: Path) -> list[tuple[int, OpRecord]]:
    """The top operators of every rank's deep-profile window, as (rank, op)."""
    conn = connect(path, readonly=True)
    try:
        rows = conn.execute(
            "SELECT rank, name, device, calls, self_time_us, total_time_us, flops FROM ops "
            "ORDER BY rank, self_time_us DESC"
        ).fetchall()
    finally:
        conn.close()
    return [(r[0], OpRecord(r[1], r[2], r[3], r[4], r[5], r[6])) for r in rows]


def read_devices(path: Path) -> list[dict[str, Any]]:
    """The static facts of the sampled devices (each a DeviceInfo dict with its ``rank``)."""
    conn = connect(path, readonly=True)
    try:
        rows = conn.execute("SELECT rank, info FROM devices ORDER BY rank, kind, device_index").fetchall()
    finally:
        conn.close()
    return [{**json.loads(info), "rank": rank} for rank, info in rows]
