"""Judgements between trials: the default space, ignored parameters, identical trials, loss drift."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from autotune.search import Choice, Int, Space, Study, Trial
from autotune.tuner.trial_facts import TrialFacts
from autotune.tuner.tune_checks import (
    SAME_MAX_SPREAD,
    default_space,
    ignored_params,
    loss_drift,
    same_everywhere,
)

# --------------------------------------------------------------------------- default_space


def test_precision_only() -> None:
    space = default_space({"precision": "fp32"}, "cpu", 1)
    assert space is not None
    assert space.to_dict() == {"precision": {"type": "choice", "choices": ["fp32", "bf16"]}}


def test_cuda_adds_tf32_and_fp16() -> None:
    space = default_space({"precision": "bf16"}, "cuda", 1)
    assert space is not None and space.to_dict()["precision"]["choices"] == ["fp32", "tf32", "bf16", "fp16"]


def micro_batches(space: Space | None) -> list[int]:
    assert space is not None
    param = space["micro_batch"]
    assert isinstance(param, Int) and param.power_of_two
    return param.values()


def test_micro_batch_from_the_global_batch() -> None:
    used = {"micro_batch": 4, "global_batch": 48}  # 48 = 16 x 3
    space = default_space(used, "cpu", 1)
    assert space is not None and space.names == ("micro_batch",)
    assert micro_batches(space) == [1, 2, 4, 8, 16]
    assert micro_batches(default_space({**used, "world_size": 2}, "cpu", 1)) == [1, 2, 4, 8]  # 24 a rank
    assert micro_batches(default_space({**used, "world_size": 3}, "cpu", 1)) == [1, 2, 4, 8, 16]  # 16
    assert micro_batches(default_space({"micro_batch": 8, "global_batch": 64}, "cpu", 1)) == [
        1,
        2,
        4,
        8,
        16,
        32,
        64,
    ]


@pytest.mark.parametrize(
    "used",
    [
        {"micro_batch": 4},  # no global batch
        {"micro_batch": 3, "global_batch": 15},  # odd: only 1 divides it
        {"micro_batch": 1, "global_batch": 1},
        {"global_batch": 64},  # the script does not split it
        {},
        {"lr": 0.1, "seed": 3},
    ],
)
def test_nothing_worth_searching_is_no_space(used: dict[str, Any]) -> None:
    assert default_space(used, "cuda", 1) is None


def test_layout_only_when_distributed() -> None:
    assert default_space({"layout": "single"}, "cuda", 1) is None
    space = default_space({"layout": "single"}, "cuda", 2)
    assert space is not None and space.to_dict() == {
        "layout": {"type": "choice", "choices": ["single", "ddp", "fsdp"]}
    }


def test_every_knob_in_a_fixed_order() -> None:
    used = {
        "layout": "ddp",
        "activation_checkpointing": False,
        "global_batch": 32,
        "micro_batch": 8,
        "precision": "fp32",
    }
    space = default_space(used, "cpu", 4)
    assert space is not None
    assert space.names == ("precision", "micro_batch", "activation_checkpointing", "layout")
    assert space.to_dict()["activation_checkpointing"]["choices"] == [False, True]
    assert micro_batches(space) == [1, 2, 4, 8, 16, 32]


# --------------------------------------------------------------------------- ignored_params

SPACE = Space(
    micro_batch=Int(1, 16, power_of_two=True),
    lr=Choice(0.1, 0.01, arg="--lr={value}"),
    depth=Int(1, 4, env="DEPTH"),
)


def trial(trial_id: int, params: dict[str, Any], attrs: dict[str, Any], status: str = "ok") -> Trial:
    value = 100.0 if status == "ok" else None
    return Trial(trial_id, params, status, value, {"samples_per_s": value}, 1.0, None, attrs)


def study_of(space: Space, trials: list[Trial]) -> Study:
    study = Study(space, searcher="random")
    for t in trials:
        study.record(t)
    return study


P = {"micro_batch": 4, "lr": 0.1, "depth": 2}


def test_ignored_params_names_an_unread_param_without_arg_or_env() -> None:
    base = trial(0, {}, {"params_used": {}})
    message = ignored_params(study_of(SPACE, [base, trial(1, P, {"params_used": {"global_batch": 32}})]))
    assert message is not None
    assert message.startswith("trial 1's script never read 'micro_batch': give each an `arg` or `env`")
    assert "'lr'" not in message and "'depth'" not in message  # delivered by --lr and $DEPTH


def test_ignored_params_is_quiet_when_the_script_read_it() -> None:
    base = trial(0, {}, {"params_used": {}})
    read = trial(1, P, {"params_used": {"micro_batch": 4}})
    assert ignored_params(study_of(SPACE, [base, read])) is None
    assert ignored_params(study_of(SPACE, [base])) is None  # the baseline sets nothing
    assert ignored_params(study_of(SPACE, [])) is None
    with_delivery = Space(lr=Choice(0.1, 0.01, arg="--lr={value}"), depth=Int(1, 4, env="DEPTH"))
    only_delivered = trial(1, {"lr": 0.1, "depth": 2}, {})
    assert ignored_params(study_of(with_delivery, [base, only_delivered])) is None


def test_ignored_params_looks_at_the_last_ok_trial() -> None:
    unread: dict[str, Any] = {"params_used": {}}
    read: dict[str, Any] = {"params_used": {"micro_batch": 8}}
    oom = trial(2, {**P, "micro_batch": 16}, {}, status="oom")  # not ok: not looked at
    first_unread = [trial(0, P, unread), trial(1, {**P, "micro_batch": 8}, read), oom]
    assert ignored_params(study_of(SPACE, first_unread)) is None
    last_unread = [trial(0, {**P, "micro_batch": 8}, read), trial(1, P, unread), oom]
    message = ignored_params(study_of(SPACE, last_unread))
    assert message is not None and message.startswith("trial 1's script never read 'micro_batch'")


# --------------------------------------------------------------------------- same_everywhere

DELIVERED = Space(micro_batch=Int(1, 16, power_of_two=True, arg="--mb={value}"))
LOSSES = [2.5, 2.25, 2.125, 2.0625]
FINGERPRINT = {
    "samples_per_step": 32,
    "flops_per_step": 1e9,
    "precision": "fp32",
    "world_size": 1,
    "loss_per_step": LOSSES,
}
RATES = [100.0, 101.0, 102.0, 100.5, 101.5]  # within 2%


def same_study(rates: list[float], changes: dict[int, dict[str, Any]] | None = None) -> Study:
    """A baseline and one trial per micro batch (1, 2, 4, 8...), throughput ``rates``."""
    trials = []
    for i, rate in enumerate(rates):
        params = {} if i == 0 else {"micro_batch": 2 ** (i - 1)}
        attrs = {**FINGERPRINT, "params_used": {"global_batch": 32}, **(changes or {}).get(i, {})}
        trials.append(Trial(i, params, "ok", rate, {"samples_per_s": rate}, 1.0, None, attrs))
    return study_of(DELIVERED, trials)


def test_same_everywhere_fires_for_five_identical_trials() -> None:
    message = same_everywhere(same_study(RATES))
    assert message is not None
    assert message.startswith(
        "every one of 5 trials measured the same (32 samples and 1000000000.0 FLOPs per step, fp32, "
    )
    assert "the same loss at every step" in message
    assert message.endswith(
        "the script seems to ignore micro_batch (as '--mb={value}'); check that it uses them"
    )


def test_same_everywhere_compares_losses_over_the_steps_all_ran() -> None:
    stopped_early = {2: {"loss_per_step": LOSSES[:3]}}  # the same first three steps
    assert same_everywhere(same_study(RATES, stopped_early)) is not None


def test_same_everywhere_without_losses() -> None:
    no_losses = {i: {"loss_per_step": None} for i in range(5)}
    message = same_everywhere(same_study(RATES, no_losses))
    assert message is not None and "loss" not in message


def test_same_everywhere_needs_five_ok_trials() -> None:
    assert same_everywhere(same_study(RATES[:4])) is None
    study = same_study(RATES[:4])
    study.record(Trial(4, {"micro_batch": 8}, "oom", None, {}, 1.0, "oom", dict(FINGERPRINT)))
    assert same_everywhere(study) is None


@pytest.mark.parametrize(
    "changes",
    [
        {3: {"flops_per_step": 2e9}},
        {2: {"samples_per_step": 64}},
        {4: {"precision": "bf16"}},
        {1: {"world_size": 2}},
        {3: {"loss_per_step": [2.5, 2.25, 2.125, 2.0626]}},  # another loss path: it trained differently
        {2: {"params_used": {"micro_batch": 2}}},  # the script reads the tuned param
    ],
)
def test_same_everywhere_is_quiet_when_trials_differ(changes: dict[int, dict[str, Any]]) -> None:
    assert same_everywhere(same_study(RATES)) is not None  # the control
    assert same_everywhere(same_study(RATES, changes)) is None


def test_same_everywhere_is_quiet_when_one_trial_is_much_faster() -> None:
    within = 100.0 * (1 + SAME_MAX_SPREAD - 0.01)
    beyond = 100.0 * (1 + SAME_MAX_SPREAD + 0.01)
    assert same_everywhere(same_study([100.0, 100.0, within, 100.0, 100.0])) is not None
    assert same_everywhere(same_study([100.0, 100.0, beyond, 100.0, 100.0])) is None
    assert same_everywhere(same_study([100.0, 0.0, 0.0, 0.0, 100.0])) is None  # no rate measured


def test_same_everywhere_fires_when_a_busy_machine_slowed_some_trials() -> None:
    assert same_everywhere(same_study([50.0, 100.0, 100.0, 60.0, 101.0])) is not None


def test_same_everywhere_fires_when_the_load_explains_the_fastest_trial() -> None:
    """One trial 40% above the median with the two intervals apart is 'clearly faster', unless the
    median trial ran beside most of the machine's cores of other processes and the fastest beside
    none: then the load explains the gap and the script still ignores what is tuned."""
    from autotune.tuner.host_load import machine_cores

    rates = [100.0, 100.0, 140.0, 100.0, 100.0]
    ci = {i: {"throughput_ci95": [r * 0.97, r * 1.03]} for i, r in enumerate(rates)}
    assert same_everywhere(same_study(rates, ci)) is None  # intervals apart, no load known
    busy = 0.9 * machine_cores()
    loaded = {i: {**ci[i], "other_load_cores": 0.0 if i == 2 else busy} for i in range(5)}
    assert same_everywhere(same_study(rates, loaded)) is not None
    reverse = {i: {**ci[i], "other_load_cores": busy if i == 2 else 0.0} for i in range(5)}
    assert same_everywhere(same_study(rates, reverse)) is None  # faster despite the load: it differs


# --------------------------------------------------------------------------- loss_drift

WARMUP = 3


def base_trial(precision: str = "fp32", global_batch: int = 32, status: str = "ok") -> Trial:
    losses = [5.0] * 5 + [1.0] * 5  # the last five steps (6-10) are compared
    attrs = {"precision": precision, "params_used": {"global_batch": global_batch}, "loss_per_step": losses}
    return Trial(0, {}, status, 100.0 if status == "ok" else None, {}, 1.0, None, attrs)


def trial_attrs(last: list[float | None], precision: str = "bf16", global_batch: int = 32) -> TrialFacts:
    losses = [5.0] * 5 + last  # the same starting level as the baseline's
    return TrialFacts.of(
        {"precision": precision, "params_used": {"global_batch": global_batch}, "loss_per_step": losses}
    )


def test_a_small_gap_is_no_drift() -> None:
    drift = loss_drift(base_trial(), {"precision": "bf16"}, trial_attrs([1.02] * 5), 0.1, WARMUP)
    assert drift is None


def test_a_large_gap_is_drift_with_its_percentage() -> None:
    drift = loss_drift(base_trial(), {"precision": "bf16"}, trial_attrs([1.2] * 5), 0.1, WARMUP)
    assert drift == (
        "the loss drifted 20.0% from the fp32 baseline's over steps 6-10 "
        "(0.240 vs 0.200 of its starting level; tolerance 10%)"
    )


def test_a_path_scaled_by_grad_accum_is_compared_by_its_shape() -> None:
    """A script backpropagating ``loss / grad_accum`` records a quarter of the loss at accum 4."""
    quarter = tuple(x / 4 for x in base_trial().attrs["loss_per_step"])
    scaled = dataclasses.replace(trial_attrs([]), loss_per_step=quarter)
    assert loss_drift(base_trial(), {"precision": "bf16"}, scaled, 0.1, WARMUP) is None
    worse = dataclasses.replace(scaled, loss_per_step=(5.0 / 4,) * 5 + (1.2 / 4,) * 5)
    drift = loss_drift(base_trial(), {"precision": "bf16"}, worse, 0.1, WARMUP)
    assert drift is not None and "20.0%" in drift


def test_precision_from_the_trial_attrs_when_not_tuned() -> None:
    drift = loss_drift(base_trial(), {"micro_batch": 8}, trial_attrs([1.2] * 5), 0.1, WARMUP)
    assert drift is not None and "20.0%" in drift
    assert loss_drift(base_trial(), {"micro_batch": 8}, trial_attrs([1.2] * 5, "fp32"), 0.1, WARMUP) is None


def test_a_different_global_batch_is_not_compared() -> None:
    attrs = trial_attrs([1.2] * 5, global_batch=64)
    assert loss_drift(base_trial(), {"precision": "bf16"}, attrs, 0.1, WARMUP) is None
    samples = {"precision": "bf16", "samples_per_step": 64, "loss_per_step": [1.2] * 10}
    assert loss_drift(base_trial(), {"precision": "bf16"}, TrialFacts.of(samples), 0.1, WARMUP) is None
    samples["samples_per_step"] = 32  # the global batch from samples per step when not read
    assert loss_drift(base_trial(), {"precision": "bf16"}, TrialFacts.of(samples), 0.1, WARMUP) is not None


@pytest.mark.parametrize(
    ("baseline", "precision"),
    [
        (base_trial("fp32"), "fp32"),  # the same precision
        (base_trial("bf16"), "fp16"),  # a low-precision baseline is no reference
        (base_trial("fp32", status="crashed"), "bf16"),
    ],
)
def test_no_reference_no_drift(baseline: Trial, precision: str) -> None:
    attrs = trial_attrs([1.2] * 5, precision=precision)
    assert loss_drift(baseline, {"precision": precision}, attrs, 0.1, WARMUP) is None


def test_a_tf32_baseline_is_a_reference() -> None:
    drift = loss_drift(base_trial("tf32"), {"precision": "bf16"}, trial_attrs([1.2] * 5), 0.1, WARMUP)
    assert drift is not None and "from the tf32 baseline's" in drift


def test_non_finite_losses_are_left_out() -> None:
    last: list[float | None] = [1.02, math.nan, 1.02, math.inf, None]
    assert loss_drift(base_trial(), {"precision": "bf16"}, trial_attrs(last), 0.1, WARMUP) is None
    big: list[float | None] = [1.2, math.nan, 1.2, None, 1.2]
    drift = loss_drift(base_trial(), {"precision": "bf16"}, trial_attrs(big), 0.1, WARMUP)
    assert drift is not None and "drifted 20.0%" in drift
    one_left: list[float | None] = [1.2, None, None, None, None]  # one pair: too few to compare
    assert loss_drift(base_trial(), {"precision": "bf16"}, trial_attrs(one_left), 0.1, WARMUP) is None


def test_the_window_starts_after_the_warmup() -> None:
    short_base = base_trial()
    # 4 steps: the window is steps 3-4 after 2 warm-up
    short_attrs = dataclasses.replace(trial_attrs([1.2] * 5), loss_per_step=(9.0, 9.0, 1.2, 1.2))
    short_base.attrs["loss_per_step"] = [9.0, 9.0, 1.0, 1.0]  # the same starting level (the first 5)
    drift = loss_drift(short_base, {"precision": "bf16"}, short_attrs, 0.1, 2)
    assert drift is not None and "over steps 3-4" in drift and "20.0%" in drift
    assert loss_drift(short_base, {"precision": "bf16"}, short_attrs, 0.1, 3) is None  # one pair left


def test_a_faster_trial_within_the_noise_is_still_the_same() -> None:
    # trial 4 measured 40% faster than the median, but so noisily that the two intervals overlap
    # (a loaded machine): no evidence that the parameter does anything
    rates = [100.0, 101.0, 102.0, 100.5, 140.0]
    noisy = {i: {"throughput_ci95": [r * 0.6, r * 1.6]} for i, r in enumerate(rates)}
    assert same_everywhere(same_study(rates, noisy)) is not None
    firm = {i: {"throughput_ci95": [r * 0.97, r * 1.03]} for i, r in enumerate(rates)}
    assert same_everywhere(same_study(rates, firm)) is None  # apart beyond the noise: it changes speed
    assert same_everywhere(same_study(rates)) is None  # no intervals: the spread alone decides


def test_the_baselines_own_configuration_is_never_spent_as_a_trial(tmp_path) -> None:
    # seen: a study re-ran its baseline's micro-batch 4, fp32 as a trial, in two studies
    from autotune.search.records import Infeasible
    from autotune.tuner.config import TuneConfig
    from autotune.tuner.trials import TrialSettings
    from autotune.tuner.tune import Tuner

    space = Space(micro_batch=Int(1, 16, power_of_two=True), precision=Choice("fp32", "bf16"))
    study = Study(space, searcher="grid", seed=0)
    point = {"micro_batch": 4, "precision": "fp32"}
    study.record(Trial(0, {}, "ok", 100.0, {"samples_per_s": 100.0}, 1.0, None, {}, point))
    tuner = Tuner(TuneConfig(settings=TrialSettings(script="no-such-script.py"), space=space), tmp_path)
    tuner.study = study
    with pytest.raises(Infeasible) as skipped:
        tuner._precheck(dict(point))  # would run no-such-script.py, and crash, if it ran
    assert skipped.value.status == "skipped" and skipped.value.attrs["same_as_baseline"] is True
    assert "the baseline's own configuration, measured as trial 0" in skipped.value.reason
    assert not (tmp_path / "trials").exists()
    study.record(Trial(1, dict(point), "skipped", None, {}, 0.0, skipped.value.reason, skipped.value.attrs))
    asked = [study.searcher.ask() for _ in range(8)]
    assert point not in asked  # told as never to be asked again; the baseline's value stays in the model
