"""The dashboard's readers and data records, checked against answers computed another way."""

from __future__ import annotations

import json
import sqlite3
import statistics
from pathlib import Path

import pytest

from profilers.contract.records import SAMPLE_FIELDS
from profilers.contract.study.verdict import verdict_of
from profilers.runtime.store import RunStore
from tests.tui.recorded import (
    STUDY_TRIALS,
    gpu_sample,
    host_sample,
    step_record,
    study_info,
    write_profile_run,
    write_study,
)
from tui import store as tui_store
from tui.rundir import detect_kind, list_runs, stored_trials
from tui.series import Buckets, bucket_width
from tui.source import RunSource
from tui.store import StoreProblem, StoreReader

# ------------------------------------------------------------------------------- the schema





def test_the_reader_reads_fields_the_store_has() -> None:
    # the schema itself is the contract's (profilers.contract.schema): no copy to keep equal here
    assert set(tui_store.GPU_FIELDS + tui_store.HOST_FIELDS) <= set(SAMPLE_FIELDS)


# ------------------------------------------------------------------------------- buckets


def test_buckets_keep_every_value_in_fixed_memory() -> None:
    values = [float((i * 37) % 101) for i in range(10_000)]
    b = Buckets(("v",), origin=0, base=1, capacity=64)
    for i, v in enumerate(values):
        b.add(i, (v,))
    assert b.count("v") == len(values) and b.used <= 64
    assert b.width == bucket_width(len(values), 1, 64) == 256
    means = b.means("v")
    for k, mean in enumerate(means):  # each bucket is the mean of its 256 consecutive values
        assert mean == pytest.approx(statistics.fmean(values[k * 256 : (k + 1) * 256]))
    assert b.peak("v") == max(values)


def test_buckets_from_sql_groups_match_point_by_point() -> None:
    a = Buckets(("x", "y"), origin=0, base=1, capacity=16)
    b = Buckets(("x", "y"), origin=0, base=1, capacity=16, width=8)
    for i in range(100):
        a.add(i, (float(i), None if i % 3 else 2.0))
    for k in range(13):
        xs = [float(i) for i in range(k * 8, min(100, k * 8 + 8))]
        ys = [2.0 for i in range(k * 8, min(100, k * 8 + 8)) if i % 3 == 0]
        b.merge_row(k * 8, (len(xs), len(ys)), (sum(xs), sum(ys)), (max(xs), 2.0 if ys else None))
    assert a.width == b.width == 8
    assert a.means("x") == b.means("x") and a.means("y") == b.means("y")
    assert a.ratio("x", "y") == b.ratio("x", "y")


# ------------------------------------------------------------------------------- the store reader


def _store(path: Path, steps: int, samples: int) -> RunStore:
    store = RunStore(path)
    store.set_meta({"name": "t", "started_ns": step_record(1).start_ns})
    store.add_steps([step_record(s) for s in range(1, steps + 1)])
    store.add_samples(gpu_sample(i, g) for i in range(samples) for g in range(2))
    return store


def test_reads_incrementally_what_was_appended(tmp_path: Path) -> None:
    store = _store(tmp_path / "run.db", 100, 50)
    reader = StoreReader(tmp_path / "run.db")
    reader.poll()
    assert reader.last_step == 100 and reader.steps is not None and reader.steps.count("duration_ns") == 100
    assert sorted(reader.tracks) == [(0, "gpu", 0), (0, "gpu", 1)]
    rowid = reader.sample_rowid
    store.add_steps([step_record(s) for s in range(101, 151)])
    store.add_samples(gpu_sample(i, 0) for i in range(50, 60))
    reader.poll()
    assert reader.last_step == 150 and reader.steps.count("duration_ns") == 150
    assert reader.sample_rowid == rowid + 10
    assert reader.tracks[(0, "gpu", 0)].buckets.count("gpu_util_pct") == 60
    assert [s.step for s in reader.recent] == list(range(101, 151))  # the ring keeps the last 50
    expected = statistics.fmean(step_record(s).duration_ns for s in range(1, 151))
    counts = reader.steps.means("duration_ns")
    assert statistics.fmean(counts) == pytest.approx(expected, rel=0.02)
    reader.poll()  # nothing new: nothing changes
    assert reader.last_step == 150 and reader.sample_rowid == rowid + 10
    store.delete_steps()  # steps merged into a new step 1: start over
    store.add_steps([step_record(1)])
    reader.poll()
    assert reader.last_step == 1 and reader.steps.count("duration_ns") == 1
    store.close()


def test_a_long_history_is_read_from_evenly_spaced_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path / "run.db", 10, 3000)
    store.close()
    exact = StoreReader(tmp_path / "run.db")
    exact.poll()
    monkeypatch.setattr(tui_store, "HISTORY_ROWS", 600)
    monkeypatch.setattr(tui_store, "HISTORY_BLOCKS", 20)
    sampled = StoreReader(tmp_path / "run.db")
    sampled.poll()
    for key in exact.tracks:
        a, b = exact.tracks[key].buckets, sampled.tracks[key].buckets
        assert b.count("gpu_util_pct") == pytest.approx(a.count("gpu_util_pct"), rel=0.02)
        assert statistics.fmean(b.means("power_mw")) == pytest.approx(
            statistics.fmean(a.means("power_mw")), rel=0.02
        )
        assert exact.tracks[key].latest == sampled.tracks[key].latest


def test_a_finished_store_is_read_without_creating_files(tmp_path: Path) -> None:
    _store(tmp_path / "run.db", 5, 5).close()
    before = sorted(p.name for p in tmp_path.iterdir())
    StoreReader(tmp_path / "run.db").poll()
    assert sorted(p.name for p in tmp_path.iterdir()) == before == ["run.db"]


def test_corrupt_and_newer_stores_are_one_line_problems(tmp_path: Path) -> None:
    (tmp_path / "bad.db").write_bytes(b"garbage" * 1000)
    with pytest.raises(StoreProblem, match=r"corrupt or unreadable run store \(file is not a database\)"):
        StoreReader(tmp_path / "bad.db").poll()
    conn = sqlite3.connect(tmp_path / "new.db")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema', '99')")
    conn.commit()
    conn.close()
    with pytest.raises(
        StoreProblem, match=r"written by a newer gpu-autotune \(schema 99; this version reads up to 1\)"
    ):
        StoreReader(tmp_path / "new.db").poll()


# ------------------------------------------------------------------------------- run directories


@pytest.mark.parametrize(
    ("setup", "problem"),
    [
        ("missing", "no such directory"),
        ("file", "not a directory"),
        ("empty", "not a run directory (no summary.json, run.db or trials/)"),
        ("half-summary", "summary.json: unreadable or half-written"),
        ("newer-summary", "written by a newer gpu-autotune (schema 7"),
        ("newer-study", "written by a newer gpu-autotune (schema 3"),
        ("corrupt-store", "corrupt or unreadable run store"),
    ],
)
def test_bad_directories_are_one_line_problems(tmp_path: Path, setup: str, problem: str) -> None:
    path = tmp_path / "run"
    if setup == "file":
        path.write_text("x")
    elif setup != "missing":
        path.mkdir()
    if setup == "half-summary":
        (path / "run.db").touch()
        (path / "summary.json").write_text('{"schema": 1, "name": "x", "ste')
    if setup == "newer-summary":
        (path / "summary.json").write_text(json.dumps({"schema": 7, "name": "x"}))
    if setup == "newer-study":
        (path / "summary.json").write_text(json.dumps({"schema": 3, "kind": "tune", "trials": []}))
    if setup == "corrupt-store":
        (path / "run.db").write_bytes(b"\x00garbage" * 500)
    snap = RunSource(path).poll()
    assert snap.problem is not None and problem in snap.problem and "\n" not in snap.problem


def test_a_half_written_run_is_followed_from_its_store(tmp_path: Path) -> None:
    run = write_profile_run(tmp_path / "run", gpus=0, steps=12, finished=False)
    snap = RunSource(run).poll()
    assert snap.problem is None and snap.live is not None and snap.live.step == 12
    assert snap.live.state in ("unfinished", "stopped") and snap.live.summary is None


def test_kinds_and_the_run_list(tmp_path: Path) -> None:
    write_profile_run(tmp_path / "a", gpus=0, steps=5)
    write_profile_run(tmp_path / "b", gpus=0, steps=5, finished=False)
    write_study(tmp_path / "s", running=False, trial_steps=5)
    (tmp_path / "junk").mkdir()
    assert [detect_kind(tmp_path / n) for n in ("a", "b", "s", "junk")] == [
        "profile",
        "profile",
        "study",
        None,
    ]
    runs = {r.name: r for r in list_runs(tmp_path, now=4e9)}
    assert sorted(runs) == ["a", "b", "s"]
    assert (runs["a"].state, runs["a"].size) == ("finished", "5 steps")
    assert runs["b"].state == "unfinished"
    assert runs["s"].kind == "study" and runs["s"].size == "8 trials of 10"


# ------------------------------------------------------------------------------- trials


def test_trials_info_of_the_recorded_study(tmp_path: Path) -> None:
    study = write_study(tmp_path / "s", running=True, trial_steps=5)
    snap = RunSource(study).poll()
    info = snap.trials
    assert info is not None and info.best_id == 4 and info.running_id == 8
    ok = {t[0]: t[4] for t in STUDY_TRIALS if t[3] == "ok"}
    best_so_far, best = [], None
    for tid, *_ in STUDY_TRIALS:
        value = ok.get(tid)
        best = value if best is None or (value is not None and value > best) else best
        best_so_far.append(best)
    assert list(info.best_so_far) == best_so_far
    effects = {(e.param, e.value): e for e in info.effects}
    assert effects[("micro_batch", "32")].median == statistics.median([1480.0, 1150.0])
    assert effects[("micro_batch", "64")].trials == 2 and effects[("micro_batch", "64")].ok == 1
    assert effects[("precision", "fp16")].best is None
    assert snap.live is not None and snap.live.following == "trial 8 of 10"


def test_minimized_objective_and_trials_before_any_summary(tmp_path: Path) -> None:
    from autotune.search.records import Trial
    from autotune.search.storage import SqliteStorage

    storage = SqliteStorage(tmp_path / "run.db")
    storage.write_meta({"space": {}})
    for tid, value, status in ((0, 5.0, "ok"), (1, 3.0, "ok"), (2, None, "oom"), (3, 4.0, "ok")):
        storage.append(Trial(tid, {} if tid == 0 else {"b": tid}, status, value, {"samples_per_s": 1.0}, 2.0))
    entries = stored_trials(tmp_path / "run.db")
    assert [e["id"] for e in entries] == [0, 1, 2, 3] and entries[0]["baseline"]
    info = study_info({"direction": "minimize", "metric": "usd_per_million_samples"}, entries, None)
    assert info.best_id == 1 and info.best_so_far == (5.0, 3.0, 3.0, 3.0)
    assert [r.best for r in info.rows] == [False, True, False, False]


def test_host_samples_of_a_cpu_run(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run.db")
    store.add_samples(host_sample(i) for i in range(20))
    store.close()
    reader = StoreReader(tmp_path / "run.db")
    reader.poll()
    track = reader.tracks[(0, "host", 0)]
    assert track.mem_total_bytes == 64 * 2**30
    assert track.buckets.means("cpu_util_pct")[0] == pytest.approx(host_sample(0).cpu_util_pct)


def test_the_baselines_row_shows_what_its_script_ran_with() -> None:

    summary = {"space": {"micro_batch": {"type": "int"}, "precision": {"type": "choice"}}, "n_trials": 2}
    entries = [
        {
            "id": 0,
            "baseline": True,
            "params": {},
            "status": "ok",
            "objective": 100.0,
            "params_used": {"micro_batch": 2, "precision": "fp32", "grad_accum": 8},
        },
        {
            "id": 1,
            "baseline": False,
            "params": {"micro_batch": 8, "precision": "bf16"},
            "status": "ok",
            "objective": 150.0,
            "params_used": {"micro_batch": 8},
        },
    ]
    info = study_info(summary, entries, None)
    assert info.rows[0].params == {"micro_batch": 2, "precision": "fp32"}  # only the searched ones
    assert info.rows[1].params == {"micro_batch": 8, "precision": "bf16"}


def test_a_store_from_before_the_eval_column_reads_with_eval_0(tmp_path):
    path = tmp_path / "run.db"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE steps (rank INTEGER NOT NULL, step INTEGER NOT NULL, start_ns INTEGER NOT NULL, "
        "duration_ns INTEGER NOT NULL, data_ns INTEGER NOT NULL, forward_ns INTEGER NOT NULL, "
        "backward_ns INTEGER NOT NULL, optimizer_ns INTEGER NOT NULL, other_ns INTEGER NOT NULL, "
        "samples INTEGER, tokens INTEGER, kind TEXT NOT NULL, loss REAL, PRIMARY KEY (rank, step))"
    )
    conn.execute("INSERT INTO steps VALUES (0, 1, 5, 100, 10, 20, 30, 40, 0, 8, NULL, 'warmup', NULL)")
    conn.commit()
    conn.close()
    reader = StoreReader(path)
    reader.poll()
    assert [r.phases_ns for r in reader.recent] == [(10, 20, 30, 40, 0, 0)]  # PHASE_COLUMNS order


def test_an_ended_study_shows_its_best_trial_not_its_last(tmp_path: Path) -> None:
    study = write_study(tmp_path / "s", running=True, trial_steps=5)
    assert RunSource(study).poll().live.following == "trial 8 of 10"  # running: the newest trial
    summary = json.loads((study / "summary.json").read_text())
    summary["trials_run"] = summary["n_trials"]  # every trial ran; trial 8 was the last (stopped early)
    (study / "summary.json").write_text(json.dumps(summary))
    snap = RunSource(study).poll()
    # named as the study's verdict names it (never measured again: the search's highest, not a best)
    label = verdict_of(summary).best_label.lower()
    assert label == "highest in the search"
    assert snap.live is not None and snap.live.following.startswith(f"trial 4 of 10 · ok · {label}")


def test_the_trials_screen_counts_every_trial_running_at_once():

    entries = [{"id": i, "params": {"b": i}, "status": "ok", "objective": float(i)} for i in range(3)]
    info = study_info({}, entries, [1, 3, 4])  # trial directories 3 and 4 have no entry yet
    assert info.running_ids == (3, 4) and info.running_id == 4
    assert study_info({}, entries, [0, 2]).running_ids == ()


def test_the_live_phases_are_the_timed_steps_as_in_the_summary(tmp_path: Path) -> None:
    """A CUDA run times its phases on the GPU in some steps; the others carry the host's split of
    their GPU duration (phases_timed False). The live panel, like summary.json's phases, reads the
    timed ones: here 40% backward, not the host split's 0%."""
    import dataclasses

    from tui.model import live_info

    path = tmp_path / "run.db"
    store = RunStore(path)
    rows = []
    for n in range(1, 21):
        record = step_record(n)
        if n % 4:  # three steps in four: the host's split, all of it waiting for data
            d = record.duration_ns
            record = dataclasses.replace(
                record, data_ns=d, forward_ns=0, backward_ns=0, optimizer_ns=0, other_ns=0, phases_timed=False
            )
        rows.append(record)
    store.add_steps(rows)
    store.close()
    reader = StoreReader(path)
    reader.poll()
    info = live_info(reader, None, "run", rows[-1].start_ns)
    timed = [r for r in rows[-len(reader.recent) :] if r.phases_timed]
    expected = statistics.mean(r.backward_ns for r in timed) / 1e9
    assert dict(info.phases_s)["backward"] == pytest.approx(expected)
    assert dict(info.phases_s)["data"] == pytest.approx(statistics.mean(r.data_ns for r in timed) / 1e9)
