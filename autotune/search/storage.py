"""Where a study keeps its metadata and finished trials: a JSON Lines file or the run store.

Both write each finished trial durably before the study goes on, and each trial's claim (its id,
configuration and where it runs) before it starts, so a tuner killed at any moment (``kill -9``
included) loses no trial: a new ``Study`` on the same storage replays the stored trials into its
searcher (no pickle), runs the claimed trials that never finished again under their own ids, and
continues.

- :class:`SqliteStorage`: the ``study`` and ``trials`` tables of a run directory's ``run.db``
  (SQLite in WAL mode: readers such as the dashboard never block the tuner). The tuner's default.
- :class:`JsonlStorage`: one JSON line per record, for scripts that want a plain file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from autotune.search.records import Trial
from profilers.contract.json_checks import JsonObject
from profilers.contract.reader import RunStoreError, Snapshot
from profilers.contract.schema import STUDY_SQL, STUDY_STORE_SCHEMA

STORAGE_SCHEMA = STUDY_STORE_SCHEMA
#: File suffixes ``open_storage`` treats as SQLite run stores.
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


class TrialStorage(Protocol):
    """Where a study keeps its metadata and finished trials."""

    def read(self) -> tuple[JsonObject | None, list[Trial]]:
        """The study metadata (None for a new store) and every finished trial, in order."""
        ...

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Record the study metadata once, when the store is new."""
        ...

    def append(self, trial: Trial) -> None:
        """Persist one finished trial durably before returning."""
        ...


@runtime_checkable
class InfoStorage(TrialStorage, Protocol):
    """A store whose study record's ``info`` can be replaced (a resumed study's changed settings)."""

    def update_info(self, info: Mapping[str, Any]) -> None:
        """Replace the stored study's ``info`` durably before returning."""
        ...


class ClaimStorage(TrialStorage, Protocol):
    """A store that also keeps claims: trials started, with their configuration and where they run."""

    def claim(self, trial_id: int, record: Mapping[str, Any]) -> None:
        """Record (or update) the claim of trial ``trial_id`` durably before returning."""
        ...

    def claims(self) -> dict[int, JsonObject]:
        """Every claim by trial id (finished trials' too)."""
        ...


def claim_store(store: TrialStorage | None) -> ClaimStorage | None:
    """``store`` if it keeps claims (both stores here do; a user's own store may not), else None."""
    return store if hasattr(store, "claim") and hasattr(store, "claims") else None  # type: ignore[return-value]


def open_storage(path: str | os.PathLike[str]) -> TrialStorage:
    """A SQLite store for ``*.db``/``*.sqlite`` paths, else a JSON Lines file."""
    return SqliteStorage(path) if Path(path).suffix in SQLITE_SUFFIXES else JsonlStorage(path)


class SqliteStorage:
    """The ``study`` (one row: schema, metadata JSON) and ``trials`` tables of a SQLite file.

    One row per trial (``id`` is the primary key, so a trial can never be stored twice), each
    inserted in its own committed transaction with ``synchronous=FULL``. Other tables in the same
    file (a profiler run's) are left alone.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        for statement in STUDY_SQL.split(";"):
            if statement.strip():
                conn.execute(statement)
        return conn

    def read(self) -> tuple[JsonObject | None, list[Trial]]:
        """The study metadata and trials in the file (None and [] for a new file).

        Read through the run directory's one reader (:class:`profilers.contract.reader.Snapshot`:
        read-only, one transaction); a damaged store is a ValueError with one line.
        """
        if not self.path.exists():
            return None, []
        try:
            with Snapshot(self.path) as snap:
                rows, records = snap.study_rows(), snap.trial_rows()
        except RunStoreError as exc:
            raise ValueError(str(exc)) from None
        if len(rows) > 1:
            raise ValueError(f"{self.path}: {len(rows)} study records, expected one")
        meta = None
        if rows:
            schema, meta = rows[0]
            if schema != STORAGE_SCHEMA:
                raise ValueError(f"{self.path}: storage schema {schema!r}, expected {STORAGE_SCHEMA}")
        trials: list[Trial] = []
        for trial_id, record in records:
            try:
                trials.append(Trial.from_dict(record))
            except ValueError as exc:
                raise ValueError(f"{self.path}: trial {trial_id} is damaged ({exc}); not resuming") from None
        return meta, trials

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Write the study row (once, before any trial)."""
        text = json.dumps(dict(meta), allow_nan=False)
        conn = self._connect()
        try:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                if conn.execute("SELECT COUNT(*) FROM study").fetchone()[0]:
                    raise ValueError(f"{self.path} already holds a study")
                conn.execute("INSERT INTO study (schema, meta) VALUES (?, ?)", (STORAGE_SCHEMA, text))
        finally:
            conn.close()

    def update_info(self, info: Mapping[str, Any]) -> None:
        """Replace the study row's ``info`` (a resumed study's settings that changed), committed."""
        conn = self._connect()
        try:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                row = conn.execute("SELECT meta FROM study").fetchone()
                if row is None:
                    raise ValueError(f"{self.path} holds no study to update")
                meta = {**json.loads(row[0]), "info": dict(info)}
                conn.execute("UPDATE study SET meta = ?", (json.dumps(meta, allow_nan=False),))
        finally:
            conn.close()

    def append(self, trial: Trial) -> None:
        """Insert one trial row, committed before returning; ValueError if its id is stored already."""
        text = json.dumps(trial.to_dict(), allow_nan=False)
        conn = self._connect()
        try:
            with conn:
                conn.execute(
                    "INSERT INTO trials (id, status, value, record, finished_ns) VALUES (?, ?, ?, ?, ?)",
                    (trial.id, trial.status, trial.value, text, time.time_ns()),
                )
        except sqlite3.IntegrityError:
            raise ValueError(f"{self.path}: trial {trial.id} is stored already") from None
        finally:
            conn.close()

    def claim(self, trial_id: int, record: Mapping[str, Any]) -> None:
        """Insert or update the claim of trial ``trial_id``, committed before returning."""
        text = json.dumps(dict(record), allow_nan=False)
        conn = self._connect()
        try:
            with conn:
                conn.execute(
                    "INSERT OR REPLACE INTO claims (id, record, started_ns) VALUES (?, ?, ?)",
                    (trial_id, text, time.time_ns()),
                )
        finally:
            conn.close()

    def claims(self) -> dict[int, JsonObject]:
        """Every claim in the file by trial id."""
        if not self.path.exists():
            return {}
        try:
            with Snapshot(self.path) as snap:
                return dict(snap.claim_rows())
        except RunStoreError as exc:
            raise ValueError(str(exc)) from None


class JsonlStorage:
    """A JSON Lines file: one ``{"record": "study", ...}`` line, then one ``{"record": "trial"}`` each.

    Every line is written whole, flushed and fsync'd. A last line cut short (the tuner was killed
    mid-write) is ignored with a warning and cut off before the next write; a damaged line before
    the last is an error, since trials would be lost silently.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._cut_at: int | None = None  # byte offset of a damaged tail to cut before the next write
        self._add_newline = False  # the last line is intact but lacks its line end
        self._claims: dict[int, JsonObject] = {}

    def read(self) -> tuple[JsonObject | None, list[Trial]]:
        """The study metadata and trials in the file (None and [] when it does not exist)."""
        self._cut_at, self._add_newline, self._claims = None, False, {}
        if not self.path.exists():
            return None, []
        chunks = self.path.read_bytes().split(b"\n")
        lines = [(raw, True) for raw in chunks[:-1]] + ([(chunks[-1], False)] if chunks[-1] else [])
        meta: JsonObject | None = None
        trials: list[Trial] = []
        offset = 0
        for number, (raw, has_end) in enumerate(lines, start=1):
            try:
                record = json.loads(raw) if raw.strip() else None
                if record is None:
                    pass
                elif not isinstance(record, dict) or record.get("record") not in ("study", "trial", "claim"):
                    raise ValueError("not a study, trial or claim record")
                elif record["record"] == "study":
                    meta = record
                elif record["record"] == "claim":
                    facts = {k: v for k, v in record.items() if k not in ("record", "id")}
                    self._claims[int(record["id"])] = facts
                else:
                    trials.append(Trial.from_dict(record))
            except ValueError as exc:  # json.JSONDecodeError is a ValueError
                if number < len(lines):
                    raise ValueError(f"{self.path}: line {number} is damaged ({exc}); not resuming") from None
                warnings.warn(
                    f"{self.path}: ignoring a truncated last line (a write cut off, e.g. by kill -9): "
                    f"{raw[:60]!r}",
                    stacklevel=3,
                )
                self._cut_at = offset
                break
            offset += len(raw) + 1
            self._add_newline = not has_end
        if meta is not None and meta.get("schema") != STORAGE_SCHEMA:
            raise ValueError(f"{self.path}: storage schema {meta.get('schema')!r}, expected {STORAGE_SCHEMA}")
        return meta, trials

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Write the study line (before any trial)."""
        self._write({"record": "study", "schema": STORAGE_SCHEMA, **meta})

    def update_info(self, info: Mapping[str, Any]) -> None:
        """Append the study line again with ``info`` (the last study line is the one read)."""
        meta, _ = self.read()
        if meta is None:
            raise ValueError(f"{self.path} holds no study to update")
        self._write({**meta, "info": dict(info)})

    def append(self, trial: Trial) -> None:
        """Append one trial line, fsync'd."""
        self._write({"record": "trial", **trial.to_dict()})

    def claim(self, trial_id: int, record: Mapping[str, Any]) -> None:
        """Append one claim line, fsync'd (a later line for the same id updates it)."""
        self._write({"record": "claim", "id": trial_id, **record})
        self._claims[trial_id] = dict(record)

    def claims(self) -> dict[int, JsonObject]:
        """Every claim read or written, by trial id."""
        if not self._claims and self.path.exists():
            self.read()
        return dict(self._claims)

    def _write(self, record: Mapping[str, Any]) -> None:
        line = (json.dumps(record, allow_nan=False) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as f:
            if self._cut_at is not None:
                f.truncate(self._cut_at)
            elif self._add_newline:
                f.write(b"\n")
            self._cut_at, self._add_newline = None, False
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
