"""The run store: SQLite in WAL mode, crash-safe and readable while it is written.

One writer connection per process (owned by the recorder thread); readers never block it. Several
ranks of one torchrun job write to the same file; SQLite serialises their short transactions.
Every row carries the rank that wrote it.

The steps table's ``loss``, ``eval_ns`` and ``phases_timed`` columns came later (same schema
version: columns are only added). The readers (``profilers.contract.reader``) accept a store without
them (every loss None, every eval 0, every step's phases timed), and a writer opening such a store
adds them. The tables are defined in
``profilers.contract.schema``.
SQLite has no NaN (it would store NULL, "no loss"), so non-finite losses are stored as the text
``'nan'``, ``'inf'`` or ``'-inf'`` and read back as floats.
"""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from profilers.contract.json_checks import JsonObject, record_json
from profilers.contract.profile_summary import ProfileSummary
from profilers.contract.records import SAMPLE_FIELDS, DeviceInfo, DeviceSample, OpRecord, StepRecord
from profilers.contract.schema import ADDED_STEP_COLUMNS, SCHEMA_VERSION, STEP_COLUMNS, STORE_NAME, STORE_SQL


def encode_loss(loss: float | None) -> float | str | None:
    """A loss as stored: the float, or its text when it is not finite (SQLite has no NaN)."""
    if loss is None or math.isfinite(loss):
        return loss
    return repr(float(loss))  # 'nan', 'inf' or '-inf'


def step_columns(conn: sqlite3.Connection) -> set[str]:
    """The columns the store's ``steps`` table has."""
    return {row[1] for row in conn.execute("PRAGMA table_info(steps)")}


def connect(path: Path) -> sqlite3.Connection:
    """Open the store for writing (WAL, a busy timeout for concurrent ranks).

    Readers go through :mod:`profilers.contract.reader`.
    """
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


#: How long closing the store waits for a reader mid-read, to merge the WAL into run.db (ms).
CLOSE_WAIT_MS = 2000


class RunStore:
    """Writer side of the store. Use from one thread at a time (the recorder thread)."""

    def __init__(self, path: Path, rank: int = 0) -> None:
        self.path = path
        self.rank = rank
        self.conn = connect(path)
        for statement in STORE_SQL.split(";"):
            if statement.strip():
                self.conn.execute(statement)
        for column, sql_type in ADDED_STEP_COLUMNS.items():
            if column in step_columns(self.conn):
                continue
            try:  # a store written before the column existed
                self.conn.execute(f"ALTER TABLE steps ADD COLUMN {column} {sql_type}")
            except sqlite3.OperationalError:
                if column not in step_columns(self.conn):  # else another rank added it meanwhile
                    raise
        self.set_meta({"schema": SCHEMA_VERSION}, only_if_missing=True)

    def set_meta(self, values: JsonObject, only_if_missing: bool = False) -> None:
        """Store JSON-encoded metadata values under their keys."""
        verb = "INSERT OR IGNORE" if only_if_missing else "INSERT OR REPLACE"
        self._many(
            f"{verb} INTO meta (key, value) VALUES (?, ?)", [(k, json.dumps(v)) for k, v in values.items()]
        )

    def add_steps(self, steps: Sequence[StepRecord]) -> None:
        """Append closed steps."""
        self._many(
            f"INSERT OR REPLACE INTO steps ({STEP_COLUMNS}, {', '.join(ADDED_STEP_COLUMNS)}) "
            f"VALUES ({', '.join('?' * 15)})",
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
                    int(s.phases_timed),
                )
                for s in steps
            ],
        )

    def delete_steps(self) -> None:
        """Delete this rank's steps (they were merged into a new step 1)."""
        self._many("DELETE FROM steps WHERE rank = ?", [(self.rank,)])

    def add_samples(self, samples: Iterable[DeviceSample]) -> None:
        """Append device samples (their fields are the table's columns, in order)."""
        cols = ", ".join(SAMPLE_FIELDS)
        self._many(
            f"INSERT INTO samples (rank, {cols}) VALUES (?, {', '.join('?' * len(SAMPLE_FIELDS))})",
            [(self.rank, *sample) for sample in samples],
        )

    def set_devices(self, infos: Iterable[DeviceInfo]) -> None:
        """Record the static facts of the sampled devices."""
        self._many(
            "INSERT OR REPLACE INTO devices (rank, device_index, kind, info) VALUES (?, ?, ?, ?)",
            [(self.rank, d.index, d.kind, json.dumps(asdict(d))) for d in infos],
        )

    def replace_devices(self, infos: Sequence[DeviceInfo]) -> None:
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
        self, world_size: int, host: str, pid: int, finished_ns: int | None, summary: ProfileSummary | None
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
                    None if summary is None else json.dumps(record_json(summary)),
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
        """Close the connection, with the WAL merged into run.db first.

        SQLite removes the WAL when its last connection closes, unless a reader is in a read
        transaction at that instant (the dashboard mid-poll, a report of a running run): then the
        WAL stays, and no read-only reader ever merges it, so the run's last rows would live in
        run.db-wal alone. A TRUNCATE checkpoint waits for such a reader (up to
        :data:`CLOSE_WAIT_MS`), copies every row into run.db and empties the WAL; other ranks'
        short write transactions are waited for the same way. Past the wait, the close goes on.
        """
        with contextlib.suppress(sqlite3.Error):
            self.conn.execute(f"PRAGMA busy_timeout={CLOSE_WAIT_MS}")
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        self.conn.close()


__all__ = ["STORE_NAME", "RunStore", "connect", "encode_loss"]
