"""The judgements a study makes between trials.

- :func:`check_space`: a space's built-in knobs take values those knobs allow (before any trial).
- :func:`default_space`: the search space built from the knobs a baseline read, when none is given.
- :func:`ignored_params` and :func:`same_everywhere`: the script ignores what is tuned, so every
  trial would measure the same; the study stops with a message saying which parameters.
- :func:`loss_drift`: a trial in a lower precision whose loss left the fp32 baseline's path.
"""

from __future__ import annotations

import difflib
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeGuard

from autotune.knob_values import KnobValues
from autotune.knobs import KNOBS, check_knob
from autotune.search.records import Trial
from autotune.search.space import Choice, Int, Space, Value
from autotune.tuner.host_load import machine_cores
from autotune.tuner.trial_facts import TrialFacts, facts, metrics
from profilers.contract.load import RunLoad, compare_loads
from profilers.runtime.parallel_degrees import model_parallel_degrees

#: Trials that must agree before "every trial measured the same" stops a study.
SAME_MIN_TRIALS = 5
#: How far the fastest trial may be above the median trial and still be "the same" when
#: everything else, losses included, is identical. A busy machine slows some of a set of
#: identical runs by up to half; it rarely speeds one up by this much.
SAME_MAX_SPREAD = 0.3
#: Leading steps whose losses must agree for two trials to have trained the same.
SAME_MIN_LOSS_STEPS = 3
#: Measured steps at the end of two loss paths compared for drift.
DRIFT_WINDOW = 5


class _StudyView(Protocol):
    @property
    def space(self) -> Space: ...

    @property
    def trials(self) -> list[Trial]: ...


def check_space(space: Space) -> None:
    """ValueError for a parameter delivered through autotune (no ``arg``/``env``) that cannot work.

    A built-in knob's values must be allowed (``precision`` in fp32/tf32/bf16/fp16...); a name
    that is one typo away from a built-in knob is taken for a misspelt knob. Other names are the
    script's own ``autotune.param()`` parameters, checked after the first trial.
    """
    for name, p in space.params.items():
        if p.arg is not None or p.env is not None:
            continue
        if name in KNOBS:
            values = p.values() if isinstance(p, Choice) else [p.low, p.high]
            for value in values:
                try:
                    check_knob(name, value)
                except ValueError as exc:
                    raise ValueError(f"parameter {name!r}: {exc}") from None
            continue
        close = difflib.get_close_matches(name, list(KNOBS), n=1, cutoff=0.8)
        if close:
            raise ValueError(
                f"unknown knob {name!r} (it has no arg or env, and no built-in knob has that name); "
                f"did you mean {close[0]!r}?"
            )


def default_space(
    params_used: Mapping[str, Any], device_kind: str, distributed_world_size: int
) -> Space | None:
    """Built-in knobs the baseline read, each over the values worth trying on this device.

    ``precision``: fp32 and bf16 (tf32 and fp16 too on CUDA); ``micro_batch`` (with a global
    batch): every power of two dividing the per-rank batch; ``activation_checkpointing``: off/on;
    ``layout``: single, ddp and fsdp when ``distributed_world_size`` > 1. None when it read none.
    """
    params: dict[str, Int | Choice] = {}
    if "precision" in params_used:
        cuda = device_kind == "cuda"
        params["precision"] = Choice(*(("fp32", "tf32", "bf16", "fp16") if cuda else ("fp32", "bf16")))
    used = KnobValues.of(params_used)
    global_batch = used.global_batch
    if "micro_batch" in params_used and global_batch is not None and global_batch > 1:
        per_rank = global_batch // max(1, used.world_size or 1)
        largest = per_rank & -per_rank  # the largest power of two dividing per_rank
        if largest > 1:
            params["micro_batch"] = Int(1, largest, power_of_two=True)
    if "activation_checkpointing" in params_used:
        params["activation_checkpointing"] = Choice(False, True)
    if "layout" in params_used and distributed_world_size > 1:
        params["layout"] = Choice("single", "ddp", "fsdp")
    return Space(**params) if params else None


def ranks_per_replica(params: Mapping[str, Value]) -> int:
    """Ranks that hold one copy of the model in ``params``: tensor × pipeline degree (1 without)."""
    degrees = model_parallel_degrees(params, environ={})  # the trial's own values, not this process's
    return degrees["tensor_parallel"] * degrees["pipeline_parallel"]


def model_parallel_problem(params: Mapping[str, Value], world_size: int) -> str | None:
    """Why the tensor × pipeline degrees of ``params`` cannot split ``world_size`` ranks, or None."""
    per_replica = ranks_per_replica(params)
    if per_replica == 1 or world_size % per_replica == 0:
        return None
    knobs = KnobValues.of(params)
    tp, pp = knobs.tensor_parallel or 1, knobs.pipeline_parallel or 1
    return (
        f"tensor_parallel {tp} × pipeline_parallel {pp} = {per_replica} ranks a replica does not "
        f"divide the {world_size} rank(s) of a trial"
    )


def batch_split_problem(
    params: Mapping[str, Value], baseline_used: Mapping[str, Any], world_size: int
) -> str | None:
    """Why ``params`` cannot split the global batch (known from the baseline), or None.

    The batch splits over the data-parallel replicas: the ranks over the tensor × pipeline degree.
    The trial would only fail in :func:`autotune.batch_plan`; saying so here costs no trial.
    """
    knobs = KnobValues.of(params)
    global_batch = (knobs if "global_batch" in params else KnobValues.of(baseline_used)).global_batch
    micro, accum = knobs.micro_batch, knobs.grad_accum
    if global_batch is None or (micro is None and accum is None):
        return None
    replicas = max(1, world_size // ranks_per_replica(params))
    if global_batch % replicas:
        return f"global batch {global_batch} does not split over {replicas} ranks"
    per_rank = global_batch // replicas
    for name, value in (("micro_batch", micro), ("grad_accum", accum)):
        if value is not None and value > 0 and per_rank % value:
            return (
                f"{name} {value} does not divide the {per_rank} samples per rank of global batch "
                f"{global_batch} over {replicas} rank(s)"
            )
    if micro is not None and accum is not None and micro * accum != per_rank:
        return f"micro_batch {micro} × grad_accum {accum} is not the {per_rank} samples per rank"
    return None


def ignored_params(study: _StudyView) -> str | None:
    """Parameters given only as ``AUTOTUNE_PARAM_*`` that an ok trial's script never read."""
    for trial in reversed(study.trials):
        if not trial.ok or not trial.params:
            continue
        used = facts(trial).params_used
        unread = [
            name
            for name in trial.params
            if study.space[name].arg is None and study.space[name].env is None and name not in used
        ]
        if unread:
            names = ", ".join(repr(n) for n in unread)
            return (
                f"trial {trial.id}'s script never read {names}: give each an `arg` or `env` in the "
                "space, or read it in the script (autotune.param, or autotune.prepare/batch_plan for "
                "built-in knobs); as it is, every trial would measure the same"
            )
        return None
    return None


def _fingerprint(trial: Trial) -> tuple[Any, ...]:
    """What a trial trained: samples and FLOPs per step, precision and ranks."""
    f = facts(trial)
    return (f.samples_per_step, f.flops_per_step, f.precision, f.world_size)


def _loss_path(trial: Trial) -> list[str | None] | None:
    losses = facts(trial).loss_per_step
    if losses is None:
        return None
    return [f"{x:.6g}" if _finite(x) else None for x in losses]


def _same_losses(trials: Sequence[Trial]) -> bool | None:
    """Whether every trial had the same loss at each step both ran (None: losses unknown)."""
    paths = [_loss_path(t) for t in trials]
    if any(p is None for p in paths):
        return None
    common = min(len(p) for p in paths if p is not None)
    if common < SAME_MIN_LOSS_STEPS:
        return None
    return len({tuple(p[:common]) for p in paths if p is not None}) == 1


def _trial_load(trial: Trial) -> RunLoad | None:
    """Other processes' CPU while a trial ran (measured by the tuner), on this machine."""
    cores = facts(trial).other_load_cores
    return None if cores is None else RunLoad(cores, machine_cores())


def _clearly_faster(ok: Sequence[Trial], median: float) -> bool:
    """Whether the fastest trial is faster than the median one beyond both measurements' noise.

    Their 95% intervals (``throughput_ci95``) must not overlap; without intervals, it is. It is not
    when the median one ran beside more of other processes' CPU than the fastest, by more than the
    load band (:mod:`profilers.contract.load`): the load can explain the gap.
    """
    by_rate = sorted(ok, key=_rate)
    fastest = by_rate[-1]
    middle = min(by_rate, key=lambda t: abs(_rate(t) - median))
    if compare_loads(_trial_load(middle), _trial_load(fastest)).explains(b_is_slower=False):
        return False
    fast_ci, mid_ci = facts(fastest).throughput_ci95, facts(middle).throughput_ci95
    if fast_ci is None or mid_ci is None or fast_ci[0] is None:
        return True
    return mid_ci[1] is not None and fast_ci[0] > mid_ci[1]


def _rate(trial: Trial) -> float:
    return metrics(trial).samples_per_s or 0.0


def same_everywhere(study: _StudyView) -> str | None:
    """A message when ok trials of different params all measure the same, else None.

    "The same": the same samples and FLOPs per step, precision and ranks, the same loss at every
    step all ran (to 6 digits, when losses were seen), and no trial faster than the median by more
    than ``SAME_MAX_SPREAD`` beyond the noise of both measurements (their 95% intervals apart), over at least
    ``SAME_MIN_TRIALS`` trials (the baseline included) none of whose tuned parameters the script
    reads through autotune. A parameter that only changes speed, not what is trained, by less
    than that spread is reported too: there is nothing to tune in it either.
    """
    ok = [t for t in study.trials if t.ok and t.value is not None]
    if (
        len(ok) < SAME_MIN_TRIALS
        or len({study.space.key(t.params) for t in ok if t.params}) < SAME_MIN_TRIALS - 1
    ):
        return None
    if any(name in facts(t).params_used for t in ok for name in study.space.names):
        return None
    if len({_fingerprint(t) for t in ok}) > 1 or _same_losses(ok) is False:
        return None
    rates = [_rate(t) for t in ok]
    median = statistics.median(rates)
    if median <= 0 or (max(rates) / median - 1 > SAME_MAX_SPREAD and _clearly_faster(ok, median)):
        return None
    delivered = [
        f"{n} (as {p.arg!r})" if p.arg is not None else f"{n} (as ${p.env})"
        for n, p in study.space.params.items()
        if p.arg is not None or p.env is not None
    ]
    samples, flops, precision, _ = _fingerprint(ok[0])
    losses = "the same loss at every step, " if _same_losses(ok) else ""
    return (
        f"every one of {len(ok)} trials measured the same ({samples} samples and {flops} FLOPs per "
        f"step, {precision}, {losses}the fastest {100 * (max(rates) / median - 1):.0f}% above the "
        "median): the "
        f"script seems to ignore {', '.join(delivered) or 'the tuned parameters'}; check that it "
        "uses them"
    )


def loss_drift(
    baseline: Trial,
    params: Mapping[str, Value],
    trial: TrialFacts,
    tolerance: float,
    warmup_steps: int,
) -> str | None:
    """Why a lower-precision trial's loss left the fp32 baseline's path, or None.

    Compared only when the baseline ran in fp32 (or tf32), the trial in another precision, both
    with the same global batch (so both train the same math), over the last ``DRIFT_WINDOW``
    steps both measured after the warm-up: the relative gap of their mean loss. Each path is
    first divided by the mean of its losses in the warm-up (at most ``DRIFT_WINDOW`` steps, at
    least the first), so a script that scales the loss it backpropagates (``loss / grad_accum``)
    compares the same.
    """
    reference = facts(baseline)
    reference_precision = reference.run_precision
    precision = KnobValues.of(params).precision if "precision" in params else trial.run_precision
    if (
        not baseline.ok
        or reference_precision not in ("fp32", "tf32")
        or precision in (None, reference_precision)
    ):
        return None
    if reference.global_batch is None or reference.global_batch != trial.global_batch:
        return None
    ref, mine = reference.loss_per_step, trial.loss_per_step
    if ref is None or mine is None:
        return None
    common = min(len(ref), len(mine))
    start = max(warmup_steps, common - DRIFT_WINDOW)
    lead = max(1, min(DRIFT_WINDOW, warmup_steps))
    ref_start, my_start = _start_level(ref, lead), _start_level(mine, lead)
    if ref_start is None or my_start is None:
        return None
    pairs = [
        (r / ref_start, m / my_start)
        for r, m in zip(ref[start:common], mine[start:common], strict=True)
        if _finite(r) and _finite(m)
    ]
    if len(pairs) < 2:
        return None
    ref_mean = statistics.fmean(r for r, _ in pairs)
    mean = statistics.fmean(m for _, m in pairs)
    gap = abs(mean - ref_mean) / max(abs(ref_mean), 1e-12)
    if gap <= tolerance:
        return None
    return (
        f"the loss drifted {100 * gap:.1f}% from the {reference_precision} baseline's over steps "
        f"{start + 1}-{common} ({mean:.3f} vs {ref_mean:.3f} of its starting level; tolerance "
        f"{100 * tolerance:g}%)"
    )


def _start_level(losses: Sequence[float | None], steps: int) -> float | None:
    """The mean of the finite losses of a path's first ``steps`` steps (its scale), or None."""
    first = [x for x in losses[:steps] if _finite(x)]
    level = statistics.fmean(first) if first else 0.0
    return level if level > 0 else None


def _finite(x: object) -> TypeGuard[float]:
    return isinstance(x, int | float) and math.isfinite(x)


__all__: Sequence[str] = [
    "batch_split_problem",
    "check_space",
    "default_space",
    "ignored_params",
    "loss_drift",
    "same_everywhere",
]
