"""The study rules on constructed tuning summaries (a 12-trial H200 study), and on a real small study."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.advice import rules_tune
from autotune.advice.advise import advise
from profilers.contract.rundir import load_run
from tests.autotune.advice.gpu_runs import GIB, h200_run, study

SPACE = {
    "micro_batch": {"type": "int", "low": 8, "high": 128, "log": False, "power_of_two": True},
    "precision": {"type": "choice", "choices": ["fp32", "bf16", "fp16"]},
}
FP32 = {"precision": "fp32", "global_batch": 256}


def _trials():
    return [
        {
            "id": 0,
            "params": {},
            "status": "ok",
            "throughput": 610.0,
            "peak_memory_bytes": 38 * GIB,
            "params_used": {**FP32, "micro_batch": 16},
        },
        {
            "id": 1,
            "params": {"micro_batch": 32, "precision": "bf16"},
            "status": "ok",
            "throughput": 1480.0,
            "peak_memory_bytes": 41 * GIB,
        },
        {
            "id": 2,
            "params": {"micro_batch": 32, "precision": "fp32"},
            "status": "ok",
            "throughput": 700.0,
            "peak_memory_bytes": 70 * GIB,
        },
        {
            "id": 3,
            "params": {"micro_batch": 64, "precision": "fp32"},
            "status": "oom",
            "throughput": None,
            "error": "CUDA out of memory. Tried to allocate 12.00 GiB",
        },
        {
            "id": 4,
            "params": {"micro_batch": 64, "precision": "fp16"},
            "status": "diverged",
            "throughput": None,
            "error": "the loss is NaN or infinite from step 7",
        },
        {
            "id": 5,
            "params": {"micro_batch": 128, "precision": "bf16"},
            "status": "oom",
            "throughput": None,
            "error": "CUDA out of memory",
        },
        {
            "id": 6,
            "params": {"micro_batch": 64, "precision": "bf16"},
            "status": "ok",
            "throughput": 1720.0,
            "peak_memory_bytes": 77 * GIB,
        },
    ]


STUDY = study(_trials(), best_id=6, space=SPACE)


def _with_confirmation(run, **keys):
    summary = {**run.summary, "best": {**run.summary["best"], **keys}}
    return dataclasses.replace(run, summary=summary)


def _confirmed(run, geomean=2.7, ci95=(2.4, 3.0)):
    return _with_confirmation(
        run, speedup_confirmation_rounds=3, speedup_geomean=geomean, speedup_ci95=list(ci95), confirmed=True
    )


def test_apply_tuned_reports_the_measured_speedup_and_the_parameters():
    rec = rules_tune.apply_tuned(_confirmed(STUDY))
    assert rec.measured and rec.params == {"micro_batch": 64, "precision": "bf16"}
    assert rec.speedup_estimate == pytest.approx(2.7)  # the re-measured figure, not the search's 2.82
    assert (
        "trial 6 (micro_batch=64 precision=bf16) measured 1,720.0 samples/s against the baseline's 610.0"
        in (rec.evidence[0])
    )
    assert "peak memory 77.0 GiB against the baseline's 38.0 GiB" in rec.evidence[1]
    assert (
        rec.actions[0]
        == "run with autotune.batch_plan(..., micro_batch=64), autotune.prepare(..., precision='bf16')"
    )


def test_apply_tuned_delivers_parameters_the_way_the_space_does():
    space = {"batch_size": {"type": "int", "low": 8, "high": 512, "arg": "--batch-size={value}"}}
    trials = [
        {"id": 0, "params": {}, "status": "ok", "throughput": 4806.0},
        {"id": 1, "params": {"batch_size": 512}, "status": "ok", "throughput": 87749.0},
    ]
    rec = rules_tune.apply_tuned(_confirmed(study(trials, best_id=1, space=space)))
    assert rec.actions[0] == "run with --batch-size=512"


def test_no_apply_when_the_baseline_is_best_or_the_gain_is_not_measured_again():
    kept = rules_tune.apply_tuned(study(_trials(), best_id=0, space=SPACE))
    assert kept.title == "Keep the current settings: the baseline was best" and kept.params == {}
    close = _trials()
    close[6]["throughput"] = 630.0  # 1.03x in the search, never measured again
    rec = rules_tune.apply_tuned(study(close, best_id=6, space=SPACE))
    assert rec.title == "Measure again before applying trial 6: in the search, not measured again"
    assert rec.params == {} and rec.speedup_estimate is None and "--confirm-rounds 6" in rec.actions[0]
    assert rules_tune.apply_tuned(h200_run()) is None


def test_precision_evidence_for_and_against():
    rec = rules_tune.precision_study(STUDY)
    assert rec.title == "Reduced precision diverged in 1 of 3 trial(s)" and rec.severity == "medium"
    lines = "\n".join(rec.evidence)
    assert (
        "trial 1 (micro_batch=32 precision=bf16, bf16) kept its loss within 10% of the fp32 baseline's"
        in lines
    )
    assert "1,480.0 samples/s, 2.11x trial 2 in fp32" in lines
    assert "trial 4 (micro_batch=64 precision=fp16, fp16) diverged: the loss is NaN" in lines


def test_precision_evidence_for_only():
    trials = [t for t in _trials() if t["id"] != 4]
    rec = rules_tune.precision_study(study(trials, best_id=6, space=SPACE))
    assert (
        rec.title == "Reduced precision trained like fp32 in 2 trial(s), and faster" and rec.severity == "low"
    )
    assert rec.actions == ("train in bf16: autotune.prepare(model, optimizer, precision='bf16')",)


def test_slower_reduced_precision_says_keep_fp32_and_the_baseline_counts_as_its_twin():
    # a CPU study: bf16 at the baseline's own micro-batch (read by the script) runs at a third of its speed
    trials = [
        {
            "id": 0,
            "params": {},
            "status": "ok",
            "throughput": 292.0,
            "params_used": {**FP32, "micro_batch": 2},
        },
        {"id": 1, "params": {"micro_batch": 2, "precision": "bf16"}, "status": "ok", "throughput": 97.0},
        {"id": 2, "params": {"micro_batch": 8, "precision": "bf16"}, "status": "ok", "throughput": 140.0},
    ]
    rec = rules_tune.precision_study(study(trials, best_id=0, space=SPACE))
    assert rec.title == "bf16 trains like fp32 here but runs slower"
    assert "97.0 samples/s, 0.33x trial 0 in fp32" in rec.evidence[0]
    assert rec.evidence[1].endswith("140.0 samples/s")  # no fp32 trial at micro_batch 8
    assert rec.actions[0].startswith("keep fp32/tf32 on this device")


def test_no_reduced_precision_trial_no_precision_evidence():
    trials = [t for t in _trials() if (t["params"].get("precision") or "fp32") == "fp32"]
    assert rules_tune.precision_study(study(trials, best_id=2, space=SPACE)) is None


def test_oom_boundary_gives_the_largest_batch_that_fit():
    rec = rules_tune.oom_boundary(STUDY)
    lines = "\n".join(rec.evidence)
    assert "micro_batch 32 fit with precision=fp32 (peak 70.0 GiB); 64 ran out of memory" in lines
    assert "micro_batch 64 fit with precision=bf16 (peak 77.0 GiB); 128 ran out of memory" in lines
    assert rec.actions[0] == "keep micro_batch ≤ 64 with precision=bf16, micro_batch ≤ 32 with precision=fp32"
    no_oom = [t for t in _trials() if t["status"] != "oom"]
    assert rules_tune.oom_boundary(study(no_oom, best_id=6, space=SPACE)) is None


def test_a_study_runs_the_profile_rules_on_its_best_trial():
    best_run = h200_run(data_ms=lambda rank, step: 30.0, run_dir="/runs/study/trials/trial-0006")
    run = study(_trials(), best_id=6, space=SPACE)
    run = _with_confirmation(  # re-measured: 2.7x, confirmed
        run, speedup_confirmation_rounds=3, speedup_geomean=2.7, speedup_ci95=[2.4, 3.0], confirmed=True
    )
    run = dataclasses.replace(run, profile=best_run)
    advice = advise(run)
    ids = [r.rule for r in advice.recommendations]
    assert {"apply_tuned", "precision_study", "oom_boundary", "input_bound"} <= set(ids)
    assert ids[0] == "apply_tuned"  # high, 2.8x measured and confirmed, before input-bound's 1.33x bound
    rec = next(r for r in advice.recommendations if r.rule == "input_bound")
    assert rec.evidence[0] == "measured in the run of trial 6, the best (/runs/study/trials/trial-0006)"
    assert {"apply_tuned", "input_bound", "memory_high"} <= {t.rule for t in advice.rules_checked}


SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
BATCH_SPACE = """
[space.batch_size]
type = "int"
low = 8
high = 128
power_of_two = true
arg = "--batch-size={value}"
"""


@pytest.mark.slow
def test_a_real_study_recommends_its_measured_best(tmp_path):
    space = tmp_path / "space.toml"
    space.write_text(BATCH_SPACE)
    run_dir = tmp_path / "study"
    fast = [
        "--trial-steps",
        "14",
        "--warmup-steps",
        "2",
        "--min-measured-steps",
        "5",
        "--trial-timeout",
        "120",
    ]
    cmd = [
        sys.executable,
        "-m",
        "autotune",
        "tune",
        "--space",
        str(space),
        "--trials",
        "3",
        "--searcher",
        "grid",
        "--run-dir",
        str(run_dir),
        "--quiet",
        "--confirm-rounds",
        "0",
        *fast,
        str(SCRIPTS / "train_unmodified.py"),
    ]
    out = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    best = summary["best"]
    advice = advise(load_run(run_dir))
    rec = next(r for r in advice.recommendations if r.rule == "apply_tuned")
    # --confirm-rounds 0: the search's best is never applied unconfirmed, whatever it measured
    assert rec.title == f"Measure again before applying trial {best['id']}: in the search, not measured again"
    assert rec.params == {} and rec.speedup_estimate is None
    assert rec.figures["search_speedup"] == pytest.approx(best["speedup_vs_baseline"])
    assert f"{best['throughput']:,.1f} samples/s" in rec.evidence[0]
    # the profile rules ran on the best trial's own run (trials run without the deep-profile window)
    assert {"input_bound", "step_outliers"} <= {t.rule for t in advice.rules_checked}
    label = f"(trial {best['id']}'s run)"
    assert f"communication: no deep-profile window statistics (profile_window) in summary.json {label}" in (
        advice.not_checked
    )


def _pairs_study(ratios):
    """A study with one fp32 trial and one bf16 trial per micro-batch, bf16 at ``ratio`` × fp32's speed."""
    trials = [
        {
            "id": 0,
            "params": {},
            "status": "ok",
            "throughput": 100.0,
            "params_used": {**FP32, "micro_batch": 1},
        }
    ]
    for i, ratio in enumerate(ratios):
        micro = 2 ** (i + 3)
        trials.append(
            {
                "id": 2 * i + 1,
                "params": {"micro_batch": micro, "precision": "fp32"},
                "status": "ok",
                "throughput": 200.0 + i,
            }
        )
        trials.append(
            {
                "id": 2 * i + 2,
                "params": {"micro_batch": micro, "precision": "bf16"},
                "status": "ok",
                "throughput": (200.0 + i) * ratio,
            }
        )
    return study(trials, best_id=1, space=SPACE)


def test_precision_decides_on_every_pair_not_on_the_one_that_was_faster():
    # the demo's case: 3 of 4 like-for-like pairs slower in bf16, one a little faster
    # (before, any faster pair made it "train in bf16"): 4 pairs with this spread cannot say faster
    rec = rules_tune.precision_study(_pairs_study([0.55, 0.62, 1.08, 0.71]))
    assert rec.title.endswith("at no clear difference in speed")
    assert not any("train in bf16" in a for a in rec.actions)
    summary = rec.evidence[-1]
    assert summary.startswith("4 like-for-like pairs: 1 faster, 3 slower; median 0.67x")
    low, high = rules_tune.pair_verdict([0.55, 0.62, 1.08, 0.71]).interval
    assert low < 0.67 < 1 < high  # log ratios' t(3) interval: exp(-0.33 ± 0.46)
    slower = rules_tune.precision_study(_pairs_study([0.55, 0.62, 0.71, 0.66]))
    assert slower.title == "bf16 trains like fp32 here but runs slower"
    assert rules_tune.pair_verdict([0.55, 0.62, 0.71, 0.66]).interval[1] < 1


def test_precision_pairs_within_the_noise_say_so():
    rec = rules_tune.precision_study(_pairs_study([0.97, 1.04, 1.01]))
    assert rec.title.endswith("at no clear difference in speed")
    verdict = rules_tune.pair_verdict([0.97, 1.04, 1.01])
    assert verdict.direction is None and verdict.interval[0] < 1 < verdict.interval[1]
    assert rules_tune.pair_verdict([1.03]).direction is None  # one pair inside its ±5% noise
    assert rules_tune.pair_verdict([1.4, 1.5, 1.45]).direction == "faster"


def test_two_pairs_each_far_slower_are_slower_whatever_the_wide_interval():
    """The issue's case: bf16 at 0.13x and 0.19x of fp32 in two pairs. Their t(1) interval holds 1
    (12.7 × the spread of two logs), yet each pair alone is beyond the one-pair margin: slower."""
    verdict = rules_tune.pair_verdict([0.13, 0.19])
    assert verdict.interval is not None and verdict.interval[1] > 1
    assert verdict.direction == "slower" and verdict.summary.endswith("the one-pair margin")
    rec = rules_tune.precision_study(_pairs_study([0.13, 0.19]))
    assert rec.title == "bf16 trains like fp32 here but runs slower"
    assert rules_tune.pair_verdict([0.13, 0.97]).direction is None  # one pair inside the margin
    assert rules_tune.pair_verdict([1.5, 2.5]).direction == "faster"


def test_apply_tuned_is_high_only_when_the_re_measurements_confirm_it():
    confirmed = _with_confirmation(
        STUDY, speedup_confirmation_rounds=3, speedup_geomean=2.7, speedup_ci95=[2.4, 3.0], confirmed=True
    )
    rec = rules_tune.apply_tuned(confirmed)
    # the headline is the re-measured figure (the search's 2.82x is the biased one)
    assert rec.severity == "high"
    assert rec.title == (
        "Apply the tuned configuration: 2.70x the baseline's throughput, confirmed (95% interval 2.40–3.00x)"
    )
    assert rec.speedup_estimate == pytest.approx(2.7)
    assert rec.figures["search_speedup"] == pytest.approx(1720 / 610)
    assert "verdict: confirmed: 2.70× (95% interval 2.40–3.00×, 3 interleaved rounds)" in rec.evidence
    noise = _with_confirmation(
        STUDY, speedup_confirmation_rounds=3, speedup_geomean=1.1, speedup_ci95=[0.8, 1.5], confirmed=False
    )
    rec = rules_tune.apply_tuned(noise)
    # within the noise: keep the settings, no configuration to apply, no gain claimed
    assert rec.severity == "low" and rec.title == "Keep the current settings: within the noise"
    assert rec.params == {} and rec.speedup_estimate is None
    assert any("--confirm-rounds 6" in a for a in rec.actions)
    never = rules_tune.apply_tuned(STUDY)  # a study from before the re-measurements, or --confirm-rounds 0
    assert never.severity == "low" and never.title.endswith("in the search, not measured again")
    assert never.title.startswith("Measure again before applying trial 6") and never.params == {}


def test_a_confirmed_gain_below_the_threshold_is_kept_not_applied():
    """Confirmed above 1 (1.01–1.05×) but at 1.03×: below the 1.05× a change must gain."""
    small = _confirmed(STUDY, geomean=1.03, ci95=(1.01, 1.05))
    rec = rules_tune.apply_tuned(small)
    assert rec.title == "Keep the current settings: a gain too small to act on" and rec.params == {}
    assert rec.figures["verdict"] == "small_gain"


def test_a_study_whose_knob_was_never_read_names_no_best_and_says_keep():
    stopped = "trial 1's script never read 'x'"
    run = study(_trials()[:2], best_id=None, space=SPACE, no_effect=True, stopped=stopped)
    rec = rules_tune.apply_tuned(run)
    assert rec.title == "Keep the current settings: nothing tuned had an effect" and rec.params == {}
    assert "the study stopped: trial 1's script never read 'x'" in rec.evidence
    advice = advise(run)
    assert [r.rule for r in advice.recommendations if r.rule == "apply_tuned"] == ["apply_tuned"]


def test_a_search_gain_that_the_re_measurement_did_not_hold_is_not_applied():
    # seen: the search said 1.71x, the interleaved rounds 0.79x, and the advice still said "Apply ... 1.71x"
    slower = _with_confirmation(
        STUDY, speedup_confirmation_rounds=3, speedup_geomean=0.79, speedup_ci95=[0.7, 0.9], confirmed=False
    )
    rec = rules_tune.apply_tuned(slower)
    assert rec.severity == "low" and rec.title == "Keep the current settings: slower when measured again"
    assert rec.speedup_estimate is None and any(a.startswith("do not run with") for a in rec.actions)


def test_a_confirmation_under_other_load_than_the_search_is_not_high():
    summary = {**STUDY.summary, "machine_cores": 2}
    summary["baseline"] = {**summary["baseline"], "other_load_cores": 0.1}
    summary["best"] = {
        **summary["best"], "other_load_cores": 0.1, "speedup_confirmation_rounds": 3,
        "speedup_geomean": 2.7, "speedup_ci95": [2.4, 3.0], "confirmed": True,
    }  # fmt: skip
    runs = [{"status": "ok", "other_load_cores": 1.6, "round": r, "role": "best"} for r in range(3)]
    loaded = dataclasses.replace(STUDY, summary={**summary, "confirmations": runs})
    rec = rules_tune.apply_tuned(loaded)
    assert rec.severity == "low" and rec.title.endswith("measured under different load")
    assert rec.title.startswith("Measure again before applying") and rec.params == {}
    assert any("busy on 1.6 cores against 0.1 during the search (band ±0.5)" in e for e in rec.evidence)
    quiet = [{**r, "other_load_cores": 0.4} for r in runs]  # 0.3 cores apart: inside the band
    rec = rules_tune.apply_tuned(dataclasses.replace(STUDY, summary={**summary, "confirmations": quiet}))
    assert rec.severity == "high"


def test_a_gain_that_is_only_more_cores_is_not_high():
    """The demo's quiet case: DDP over 2 one-thread ranks confirmed at 1.70× (1.32–2.18×) against a
    one-thread baseline, on 2 cores: per core 0.85× the baseline. The gain is the second core, which
    the script given both cores may take anyway: LOW, and it says so. At 2.4× on 2× the cores (1.2×
    per core) the configuration itself is faster: HIGH."""
    summary = {**STUDY.summary, "threads": {"threads_per_rank": 1, "device_kind": "cpu"}}
    summary["baseline"] = {**summary["baseline"], "world_size": 1}
    summary["best"] = {
        **summary["best"], "world_size": 2, "speedup_confirmation_rounds": 3, "speedup_geomean": 1.70,
        "speedup_ci95": [1.32, 2.18], "confirmed": True,
    }  # fmt: skip
    rec = rules_tune.apply_tuned(dataclasses.replace(STUDY, summary=summary))
    assert rec.severity == "low" and rec.title == "Keep the current settings: faster only with more cores"
    assert any("per core 0.85× the baseline; the gain is the cores" in e for e in rec.evidence)
    assert any("OMP_NUM_THREADS" in a for a in rec.actions)
    summary["best"] = {**summary["best"], "speedup_geomean": 2.4, "speedup_ci95": [2.1, 2.7]}
    rec = rules_tune.apply_tuned(dataclasses.replace(STUDY, summary=summary))
    assert rec.severity == "high" and "per core it is 1.20× the baseline" in " ".join(rec.evidence)


def test_precision_reads_the_baselines_own_measured_precision():
    # seen: "no loss check: the baseline is not fp32/tf32" for a baseline whose summary records fp32
    # (a script that reads no precision knob: the profiler saw its model run in fp32)
    trials = _trials()
    trials[0] = {**trials[0], "params_used": {"micro_batch": 16, "global_batch": 256}, "precision": "fp32"}
    rec = rules_tune.precision_study(study(trials, best_id=6, space=SPACE))
    lines = "\n".join(rec.evidence)
    assert "kept its loss within 10% of the fp32 baseline's" in lines and "no loss check" not in lines
    unknown = [{**trials[0], "precision": None}, *trials[1:]]
    lines = "\n".join(rules_tune.precision_study(study(unknown, best_id=6, space=SPACE)).evidence)
    assert "no loss check" in lines  # nothing says what the baseline ran in: no claim made


def test_the_evidence_names_the_anchor_its_ratio_is_over():
    """A search ratio is over the anchor nearest in time, not the baseline trial: the evidence quotes
    that anchor's samples/s, so the ratio it prints is the quotient of the figures beside it."""
    run = _confirmed(STUDY)
    anchor = {"round": 1, "role": "anchor", "status": "ok", "samples_per_s": 500.0}
    summary = {**run.summary, "anchors": [anchor]}
    summary["best"] = {**summary["best"], "anchor": 1, "speedup_vs_baseline": 1720 / 500}
    rec = rules_tune.apply_tuned(dataclasses.replace(run, summary=summary))
    assert rec.evidence[0].endswith(
        "measured 1,720.0 samples/s against 500.0 of the baseline's configuration run again just before "
        "it (anchor 1) in the search (3.44x)"
    )
    assert rec.figures["anchor"] == 1 and rec.figures["anchor_samples_per_s"] == 500.0


def test_a_pinned_trials_load_is_compared_as_its_share_of_the_machine():
    """Under --parallel a trial is pinned to its slot and its load is over the slot's cores (0.9 of 1
    core: 90% of it taken); the baseline and the re-measurements run unpinned, over all 4. Compared as
    cores, 0.9 and 3.6 look like different loads; as shares of the machine they are the same load."""
    from profilers.contract.study.verdict import study_verdict

    summary = {**_confirmed(STUDY).summary, "machine_cores": 4}
    summary["baseline"] = {**summary["baseline"], "other_load_cores": 3.6, "load_cores": 4}
    summary["best"] = {**summary["best"], "other_load_cores": 0.9, "load_cores": 1}
    run = {"status": "ok", "other_load_cores": 3.6, "load_cores": 4, "role": "best"}
    runs = [{**run, "round": r} for r in range(3)]
    verdict = study_verdict({**summary, "confirmations": runs})
    assert verdict.status == "confirmed" and verdict.search_load_cores == pytest.approx(3.6)
    unscaled = {**summary, "best": {**summary["best"], "load_cores": None}, "confirmations": runs}
    assert study_verdict(unscaled).status == "different_load"  # 0.9 read as cores of the machine
