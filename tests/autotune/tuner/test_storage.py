"""Trial storage: the SQLite run store (round trip, refusals, WAL readers) and JSONL parity via Study."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from autotune.search import (
    Infeasible,
    Int,
    JsonlStorage,
    Measured,
    Observation,
    Space,
    SqliteStorage,
    Study,
    Trial,
)
from autotune.search.storage import STORAGE_SCHEMA, open_storage

LINE = Space(x=Int(1, 50))


def slope(params: dict) -> float:
    return float(params["x"])


def measured(params: dict) -> Measured:
    x = params["x"]
    return Measured({"objective": 2.0 * x, "peak_memory_bytes": float(x << 20)}, {"run_dir": f"/runs/x{x}"})


def sql(path: Path, statement: str, args: tuple = ()) -> list[tuple[Any, ...]]:
    """Run one statement on its own connection (committed, closed)."""
    with closing(sqlite3.connect(path)) as conn, conn:
        return conn.execute(statement, args).fetchall()


def baseline_trial(point: dict | None = None) -> Trial:
    return Trial(
        0, {}, "ok", 30.0, {"objective": 30.0}, 1.5, None, {"params_used": {"x": 15}, "run_dir": "/b"}, point
    )


def a_trial(trial_id: int, value: float = 1.0) -> Trial:
    return Trial(trial_id, {"x": trial_id + 1}, "ok", value, {"objective": value}, 0.25)


# --------------------------------------------------------------------------- SQLite round trip


def test_sqlite_round_trip_of_meta_and_trials_replays_the_searcher(tmp_path: Path) -> None:
    path = tmp_path / "run.db"
    first = Study(LINE, searcher="random", seed=4, storage=path, info={"script": "train.py", "n": 3})
    first.record(baseline_trial(point={"x": 15}))
    first.optimize(measured, n_trials=4)
    assert [t.id for t in first.trials] == [0, 1, 2, 3]

    resumed = Study(LINE, searcher="random", seed=4, storage=path, info={"script": "other.py"})
    assert resumed.trials == first.trials  # params, metrics, attrs, point, duration: all kept
    assert resumed.trials[0].point == {"x": 15} and resumed.trials[0].attrs["run_dir"] == "/b"
    for t in resumed.trials[1:]:
        x = t.params["x"]
        assert isinstance(x, int)
        assert t.attrs == {"run_dir": f"/runs/x{x}"}
        assert t.metrics == {"objective": 2.0 * x, "peak_memory_bytes": float(x << 20)}
    assert resumed.stored_info == {"script": "train.py", "n": 3}  # the first info, not the new one
    assert resumed.next_id == 4
    # the searcher was rebuilt from the stored trials: the baseline through its point
    assert resumed.searcher.history == (
        Observation({"x": 15}, 30.0, True),
        *(Observation(t.params, t.value, True) for t in first.trials[1:]),
    )

    meta, trials = SqliteStorage(path).read()
    assert meta is not None and meta["space"] == LINE.to_dict()
    assert (meta["direction"], meta["objective"], meta["searcher"], meta["seed"]) == (
        "maximize",
        "objective",
        "random",
        4,
    )
    assert trials == first.trials


def test_a_trial_id_stored_twice_is_refused_and_the_first_row_kept(tmp_path: Path) -> None:
    store = SqliteStorage(tmp_path / "run.db")
    store.write_meta({"k": 1})
    store.append(a_trial(0, value=5.0))
    with pytest.raises(ValueError, match=r"trial 0 is stored already"):
        store.append(a_trial(0, value=9.0))
    meta, trials = store.read()
    assert meta == {"k": 1}
    assert trials == [a_trial(0, value=5.0)]


def test_two_studies_on_one_store_cannot_both_record_the_same_id(tmp_path: Path) -> None:
    path = tmp_path / "run.db"
    a = Study(LINE, searcher="random", storage=path)
    b = Study(LINE, searcher="random", storage=path)  # opened before a recorded anything
    a.record(a_trial(0, value=5.0))
    with pytest.raises(ValueError, match="stored already"):
        b.record(a_trial(0, value=9.0))
    assert b.trials == [] and b.searcher.history == ()
    assert SqliteStorage(path).read()[1] == [a_trial(0, value=5.0)]


def test_a_second_study_record_is_refused(tmp_path: Path) -> None:
    store = SqliteStorage(tmp_path / "run.db")
    store.write_meta({"first": True})
    with pytest.raises(ValueError, match="already holds a study"):
        store.write_meta({"first": False})
    assert store.read() == ({"first": True}, [])


def test_a_file_that_is_not_sqlite_is_a_value_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "run.db"
    path.write_text("this is a plain text file, certainly not a SQLite database\n" * 4)
    with pytest.raises(ValueError, match="unreadable run store") as info:
        SqliteStorage(path).read()
    assert str(path) in str(info.value)
    with pytest.raises(ValueError, match="unreadable run store"):
        Study(LINE, storage=path)


def test_a_new_path_reads_as_empty_and_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "run.db"
    assert SqliteStorage(path).read() == (None, [])
    assert not path.exists()


def test_a_damaged_row_or_another_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.db"
    Study(LINE, searcher="random", storage=path).optimize(slope, n_trials=2)
    sql(path, "UPDATE trials SET record = ? WHERE id = 1", ('{"id": 1}',))
    with pytest.raises(ValueError, match="trial 1 is damaged"):
        SqliteStorage(path).read()
    sql(path, "UPDATE study SET schema = ?", (STORAGE_SCHEMA + 1,))
    with pytest.raises(ValueError, match=f"storage schema {STORAGE_SCHEMA + 1}, expected {STORAGE_SCHEMA}"):
        SqliteStorage(path).read()


def test_other_tables_of_the_run_store_are_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "run.db"
    sql(path, "CREATE TABLE steps (i INTEGER, t_ns INTEGER)")
    sql(path, "INSERT INTO steps VALUES (1, 42)")
    Study(LINE, searcher="random", storage=path).optimize(slope, n_trials=2)
    assert sql(path, "SELECT i, t_ns FROM steps") == [(1, 42)]
    assert sql(path, "SELECT id, status FROM trials ORDER BY id") == [(0, "ok"), (1, "ok")]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("run.db", SqliteStorage),
        ("a.sqlite", SqliteStorage),
        ("a.sqlite3", SqliteStorage),
        ("s.jsonl", JsonlStorage),
        ("s", JsonlStorage),
    ],
)
def test_open_storage_picks_the_store_by_suffix(tmp_path: Path, name: str, kind: type) -> None:
    store = open_storage(tmp_path / name)
    assert type(store) is kind
    assert store.path == tmp_path / name  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- resume through Study


def test_a_sqlite_study_resumes_to_the_total_without_repeating(tmp_path: Path) -> None:
    path = tmp_path / "run.db"
    Study(LINE, seed=3, searcher="random", storage=path).optimize(slope, n_trials=4)
    resumed = Study(LINE, seed=3, searcher="random", storage=path)
    assert resumed.n_run == 4
    resumed.optimize(slope, n_trials=9)
    assert [t.id for t in resumed.trials] == list(range(9))
    assert len({t.params["x"] for t in resumed.trials}) == 9
    assert [r[0] for r in sql(path, "SELECT id FROM trials ORDER BY id")] == list(range(9))
    # the same configurations as a study that was never interrupted
    straight = Study(LINE, seed=3, searcher="random")
    straight.optimize(slope, n_trials=9)
    assert [t.params for t in straight.trials] == [t.params for t in resumed.trials]


def _comparable(trials: list[Trial]) -> list[tuple]:
    return [(t.id, t.params, t.status, t.value, t.metrics, t.error, t.attrs, t.point) for t in trials]


@pytest.mark.parametrize("name", ["study.jsonl", "run.db"])
def test_jsonl_and_sqlite_behave_the_same_through_a_study(tmp_path: Path, name: str) -> None:
    def objective(params: dict) -> Measured:
        x = params["x"]
        if x % 7 == 0:
            raise Infeasible(f"oom at {x}", status="oom", attrs={"run_dir": f"/r/{x}"})
        return measured(params)

    path = tmp_path / name
    study = Study(LINE, searcher="random", seed=11, storage=path, info={"who": name})
    study.record(baseline_trial(point={"x": 15}))
    study.optimize(objective, n_trials=6)
    resumed = Study(LINE, searcher="random", seed=11, storage=path)
    assert resumed.trials == study.trials
    assert resumed.stored_info == {"who": name}
    assert resumed.searcher.history == study.searcher.history
    resumed.optimize(objective, n_trials=12)

    # the same run in memory: both stores give exactly what a study without storage gives
    plain = Study(LINE, searcher="random", seed=11)
    plain.record(baseline_trial(point={"x": 15}))
    plain.optimize(objective, n_trials=12)
    assert _comparable(resumed.trials) == _comparable(plain.trials)
    assert any(t.status == "oom" and t.attrs["run_dir"].startswith("/r/") for t in plain.trials)
    assert _comparable(open_storage(path).read()[1]) == _comparable(plain.trials)


# --------------------------------------------------------------------------- readers (WAL)


def test_a_reader_reads_the_store_while_a_study_writes(tmp_path: Path) -> None:
    path = tmp_path / "run.db"
    study = Study(LINE, searcher="random", storage=path)
    study.optimize(slope, n_trials=2)

    reader = sqlite3.connect(path, timeout=0.5, isolation_level=None)
    try:
        assert reader.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        reader.execute("BEGIN")  # a long read transaction, as a dashboard may hold
        assert reader.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 2

        seen: list[int] = []

        def peek(s: Study, trial: Trial) -> None:  # another reader, once each trial is recorded
            seen.append(len(SqliteStorage(path).read()[1]))

        study.optimize(slope, n_trials=5, callbacks=[peek])  # writes while the reader holds its snapshot
        assert seen == [3, 4, 5]
        assert reader.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 2  # its snapshot
        reader.execute("COMMIT")
        assert reader.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 5
    finally:
        reader.close()


@pytest.mark.parametrize("name", ["run.db", "study.jsonl"])
def test_a_resumed_study_stores_the_info_it_was_given_instead_of_the_first(tmp_path: Path, name: str) -> None:
    # what autotune tune --resume --trials 8 was told must hold for the next resume too
    path = tmp_path / name
    first = Study(LINE, searcher="random", seed=4, storage=path, info={"n_trials": 4, "script": "t.py"})
    first.optimize(measured, n_trials=2)
    resumed = Study(LINE, searcher="random", seed=4, storage=path, info={"n_trials": 8, "script": "t.py"})
    assert resumed.stored_info == {"n_trials": 4, "script": "t.py"}  # what was stored, until replaced
    assert resumed.update_info({"n_trials": 8, "script": "t.py"}) is True
    assert resumed.update_info({"n_trials": 8, "script": "t.py"}) is False  # nothing changed
    again = Study(LINE, searcher="random", seed=4, storage=path)
    assert again.stored_info == {"n_trials": 8, "script": "t.py"} and again.trials == first.trials
