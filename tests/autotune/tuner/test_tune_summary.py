"""The tuning summary: best against the baseline, status counts, the Pareto front, atomic JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal

import pytest

from autotune.search import Int, Space, Study, Trial
from autotune.tuner.config import TuneConfig
from autotune.tuner.objectives import Scoring
from autotune.tuner.trials import TrialSettings
from autotune.tuner.tune_summary import study_summary, trial_entry, write_json

SPACE = Space(micro_batch=Int(1, 16, power_of_two=True))
PRICE = 2.0  # $ per GPU-hour


def tune_summary(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """The study's summary as summary.json holds it."""
    return study_summary(*args, **kwargs).to_json()


def usd(rate: float, devices: int = 1) -> float:
    return PRICE * devices / 3600 / rate * 1e6


def measured(trial_id: int, params: dict[str, Any], rate: float, peak: float, objective: str) -> Trial:
    metrics: dict[str, float | None] = {
        "samples_per_s": rate,
        "tokens_per_s": None,
        "peak_memory_bytes": peak,
        "step_time_s": 32 / rate,
        "devices": 1.0,
        "usd_per_million_samples": usd(rate),
        "joules_per_sample": None,
    }
    value = rate if objective == "throughput" else usd(rate)
    metrics["objective"] = value
    attrs = {"world_size": 1, "run_dir": f"/runs/t/trial-{trial_id:04d}", "params_used": {"micro_batch": 4}}
    return Trial(trial_id, params, "ok", value, metrics, 3.5, None, attrs)


def make_study(objective: str = "throughput") -> Study:
    """A baseline (400/s) and two trials (1000/s at 3e9 B; 700/s at 1e9 B), an oom and a skip."""
    direction: Literal["maximize", "minimize"] = "maximize" if objective == "throughput" else "minimize"
    study = Study(SPACE, direction=direction, searcher="random", seed=7)
    study.record(measured(0, {}, 400.0, 2e9, objective))
    study.record(measured(1, {"micro_batch": 8}, 1000.0, 3e9, objective))
    study.record(Trial(2, {"micro_batch": 16}, "oom", None, {}, 1.0, "CUDA out of memory"))
    study.record(measured(3, {"micro_batch": 2}, 700.0, 1e9, objective))
    study.record(Trial(4, {"micro_batch": 16}, "skipped", None, {}, 0.0, "predicted oom"))
    return study


def config(objective: Any = "throughput", multi_objective: bool = False) -> TuneConfig:
    return TuneConfig(
        settings=TrialSettings(script="x.py", script_args=("--epochs", "1")),
        n_trials=6,
        scoring=Scoring(objective, PRICE),
        multi_objective=multi_objective,
    )


def test_best_against_the_baseline(tmp_path: Path) -> None:
    out = tune_summary(make_study(), config(), tmp_path, None)
    best = out["best"]
    assert best["id"] == 1 and best["params"] == {"micro_batch": 8} and best["throughput"] == 1000.0
    assert best["speedup_vs_baseline"] == pytest.approx(1000.0 / 400.0)
    assert best["cost_saving_vs_baseline"] == pytest.approx(1 - usd(1000.0) / usd(400.0))  # 0.6
    assert out["baseline"]["id"] == 0 and out["baseline"]["baseline"] is True
    assert out["baseline"]["throughput"] == 400.0 and out["baseline"]["peak_memory_bytes"] == 2_000_000_000


def test_counts_and_settings(tmp_path: Path) -> None:
    out = tune_summary(make_study(), config(), tmp_path / "run", "stopped by the user")
    assert out["status_counts"] == {"ok": 3, "oom": 1, "skipped": 1}
    assert out["trials_run"] == 4  # the skipped trial never ran
    assert out["n_trials"] == 6
    assert out["command"] == ["x.py", "--epochs", "1"]
    assert (out["kind"], out["objective"], out["metric"], out["direction"]) == (
        "tune",
        "throughput",
        "samples_per_s",
        "maximize",
    )
    assert (out["searcher"], out["seed"], out["price_per_gpu_hour"]) == ("random", 7, PRICE)
    assert out["space"] == SPACE.to_dict()
    assert out["run_dir"] == str(tmp_path / "run") and out["stopped"] == "stopped by the user"
    assert [e["id"] for e in out["trials"]] == [0, 1, 2, 3, 4]
    assert [e["status"] for e in out["trials"]] == ["ok", "ok", "oom", "ok", "skipped"]
    assert out["trials"][2]["error"] == "CUDA out of memory" and out["trials"][2]["objective"] is None


def test_pareto_only_with_multi_objective(tmp_path: Path) -> None:
    assert tune_summary(make_study(), config(), tmp_path, None)["pareto"] is None
    out = tune_summary(make_study(), config(multi_objective=True), tmp_path, None)
    # the baseline is slower, larger and dearer than trial 3; 1 is fastest, 3 smallest
    assert out["pareto"] == [1, 3]


def test_cost_objective_best_is_the_cheapest(tmp_path: Path) -> None:
    out = tune_summary(make_study("cost"), config("cost"), tmp_path, None)
    assert out["direction"] == "minimize" and out["metric"] == "usd_per_million_samples"
    assert out["best"]["id"] == 1 and out["best"]["objective"] == pytest.approx(usd(1000.0))
    assert out["best"]["cost_saving_vs_baseline"] == pytest.approx(0.6)


def test_no_baseline_or_no_ok_trial(tmp_path: Path) -> None:
    study = Study(SPACE, searcher="random")
    study.record(measured(0, {"micro_batch": 4}, 500.0, 1e9, "throughput"))  # no baseline first
    out = tune_summary(study, config(), tmp_path, None)
    assert out["baseline"] is None
    assert out["best"]["id"] == 0 and out["best"]["speedup_vs_baseline"] is None
    assert out["best"]["cost_saving_vs_baseline"] is None

    failed = Study(SPACE, searcher="random")
    failed.record(Trial(0, {}, "crashed", None, {}, 1.0, "ImportError: no module named x"))
    out = tune_summary(failed, config(), tmp_path, None)
    assert out["best"] is None and out["baseline"]["status"] == "crashed"
    assert out["status_counts"] == {"crashed": 1} and out["trials_run"] == 1


def test_a_best_baseline_is_its_own_speedup(tmp_path: Path) -> None:
    study = Study(SPACE, searcher="random")
    study.record(measured(0, {}, 900.0, 1e9, "throughput"))
    study.record(measured(1, {"micro_batch": 8}, 450.0, 1e9, "throughput"))
    best = tune_summary(study, config(), tmp_path, None)["best"]
    assert best["id"] == 0 and best["speedup_vs_baseline"] == 1.0


def test_trial_entry_fields() -> None:
    t = measured(3, {"micro_batch": 2}, 700.0, 1.5e9, "throughput")
    entry = trial_entry(t)
    assert entry["peak_memory_bytes"] == 1_500_000_000 and isinstance(entry["peak_memory_bytes"], int)
    assert entry["step_time_s"] == pytest.approx(32 / 700.0)
    assert entry["usd_per_million_samples"] == pytest.approx(usd(700.0))
    assert (entry["world_size"], entry["run_dir"], entry["params_used"]) == (
        1,
        "/runs/t/trial-0003",
        {"micro_batch": 4},
    )
    assert entry["baseline"] is False and entry["duration_s"] == 3.5 and entry["error"] is None


# --------------------------------------------------------------------------- write_json


def _strict(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_the_summary_is_valid_json_and_replaced_atomically(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text("old contents that are not JSON")
    old_inode = path.stat().st_ino
    data = tune_summary(make_study(), config(multi_objective=True), tmp_path, None)
    data["where"] = tmp_path  # a Path is written as its string
    write_json(path, data)
    back = _strict(path.read_text())
    assert back["where"] == str(tmp_path)
    assert back["best"]["speedup_vs_baseline"] == pytest.approx(2.5)
    assert back["trials"] == json.loads(json.dumps(data["trials"]))
    assert path.stat().st_ino != old_inode  # a new file renamed over the old one, not rewritten in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]  # no .tmp left

    write_json(path, {"second": math.pi})
    assert _strict(path.read_text()) == {"second": math.pi}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_a_written_trial_entry_has_exactly_the_keys_its_reference_names(tmp_path: Path) -> None:
    # the record writes every field it reads (one type both ways); the docs' table names each key
    import re

    from profilers.contract.fields import meaning_of
    from profilers.contract.study.summary import TuningSummary

    def named(key: str) -> set[str]:
        return set(re.findall(r"`([a-z_0-9]+)`", meaning_of(TuningSummary, key)))

    study = Study(SPACE, searcher="random")
    study.record(measured(0, {}, 400.0, 1e9, "throughput"))
    study.record(measured(1, {"micro_batch": 8}, 1000.0, 1e9, "throughput"))
    out = json.loads(json.dumps(tune_summary(study, config(), tmp_path, None)))
    entry_keys = set(out["trials"][1])
    assert entry_keys <= named("trials") and "throughput" in entry_keys and "samples_per_s" not in entry_keys
    assert set(out["best"]) - entry_keys <= named("best")
    assert set(out["best"]) - entry_keys == {
        "cost_saving_vs_baseline", "speedup_confirmation_rounds", "speedup_ratios", "speedup_geomean",
        "speedup_ci95", "confirmed",
    }  # fmt: skip
    assert out["trials"][1]["status"] == "ok" and out["status_counts"] == {"ok": 2}


def test_a_stored_figure_of_another_type_reads_as_missing_and_the_summary_is_written(tmp_path: Path) -> None:
    # the store is the project's own: a value an older version wrote as another type must not stop
    # the study's summary (written after every trial) nor hide its trials on the dashboard
    from profilers.contract.study.summary import TrialEntry

    odd = measured(1, {"micro_batch": 8}, 1000.0, 1e9, "throughput")
    attrs = {**odd.attrs, "stable": "yes", "world_size": "2", "throughput_ci95": [1, 2, 3], "executor": 5}
    odd = Trial(1, odd.params, "ok", odd.value, odd.metrics, odd.duration_s, None, attrs)
    study = Study(SPACE, searcher="random")
    study.record(measured(0, {}, 400.0, 1e9, "throughput"))
    study.record(odd)
    out = json.loads(json.dumps(tune_summary(study, config(), tmp_path, None)))
    entry = out["trials"][1]
    odd_ones = (entry["stable"], entry["world_size"], entry["throughput_ci95"], entry["executor"])
    assert odd_ones == (None, 1, None, None)
    assert entry["throughput"] == 1000.0 and entry["run_dir"] == "/runs/t/trial-0001"
    stored = TrialEntry.from_stored(odd.to_dict(), "run.db")  # the dashboard's read of the store
    assert stored.samples_per_s == 1000.0 and stored.stable is None
