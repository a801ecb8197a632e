"""``autotune tune``: a study of real trials of the user's script, persisted in a run directory.

The run directory holds ``run.db`` (the study and one row per finished trial, see
:class:`~autotune.search.storage.SqliteStorage`), ``summary.json`` (rewritten after every trial)
and ``trials/trial-NNNN/`` (each trial's own profiler run and log). The order of a study:

1. a baseline trial of the script with its own defaults (no parameter set), always first;
2. the search space: the one given, else built from the knobs the baseline read;
3. trials the searcher proposes, each skipped when the memory model predicts it runs out of
   memory, stopped early when clearly worse than the best so far, and marked "diverged" when its
   loss is NaN/inf or drifts from the fp32 baseline's; until ``n_trials`` trials have run;
4. the best configuration and the baseline measured again, interleaved, ``confirm_rounds``
   times (:mod:`autotune.tuner.confirm`): the speedup's 95% interval, and whether it is confirmed.

With ``parallel`` N, up to N trials of step 3 run at once, each on devices of its own
(:mod:`autotune.tuner.running`); the baseline and the re-measurements of step 4 run alone.

Killed at any point (``kill -9`` included), ``resume=True`` continues from the trials stored:
none is lost or run twice; a trial that was running when the tuner died is stopped (its process
group, on this node) and runs again under its own id.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from autotune.knob_values import KnobValues
from autotune.presets import preset_space
from autotune.search.records import Infeasible, Measured, Trial
from autotune.search.searchers import BayesSearcher
from autotune.search.space import Space, Value
from autotune.search.storage import SqliteStorage
from autotune.search.structured import StructuredSearcher
from autotune.search.study import Study
from autotune.tuner import confirm
from autotune.tuner.anchors import Anchors
from autotune.tuner.config import TuneConfig
from autotune.tuner.devices import usable_cpus
from autotune.tuner.early_stop import STOPPED_LOSING, StopFloor, best_result, stop_floor
from autotune.tuner.host_load import free_cores
from autotune.tuner.memory_model import MemoryModel
from autotune.tuner.plan_memory import PlanMemory, PlanTraces
from autotune.tuner.plan_prior import PlanPrior, prior_for_study
from autotune.tuner.ray_executor import RayExecutor
from autotune.tuner.running import Placement, RunningTrials, TrialRequest
from autotune.tuner.stale_runs import noted_group, stop_stale_runs
from autotune.tuner.trial_facts import TrialFacts, facts, metrics
from autotune.tuner.trials import (
    LOG_NAME,
    STOPPING,
    TrialOutcome,
    error_line,
    study_threads,
    trial_world_size,
    usable_cores,
)
from autotune.tuner.tune_checks import (
    batch_split_problem,
    default_space,
    ignored_params,
    loss_drift,
    model_parallel_problem,
    same_everywhere,
)
from autotune.tuner.tune_summary import study_summary, write_json
from profilers.contract.profile_summary import ProfileSummary
from profilers.contract.schema import (
    STORE_NAME,
    SUMMARY_NAME,
    TRIALS_DIR,
    TUNE_LOCK_NAME,
    TrialStatus,
    resolve_trial_dir,
)
from profilers.contract.study.spread import AnchorRun, midpoint, nearest_anchor, process_spread
from profilers.contract.study.summary import Confirmation, PriorCheck, SearchPrior, TuningSummary


class TuneError(Exception):
    """The study cannot go on (bad input, a baseline that fails, ignored parameters); one line."""


def _ray_executor(config: TuneConfig) -> Any:
    """The Ray executor of a study that asks for one (ValueError without Ray installed), else None."""
    if config.executor != "ray":
        return None
    return RayExecutor(  # imports ray: only for --executor ray
        config.ray_address, config.ray_resource, config.ray_storage, device_kind=config.device_kind
    )


class Tuner:
    """Runs one study.

    ``on_start(trial_id, position, n_trials, params)`` is called as a trial starts (``position``:
    its number among the trials that run, 1-based), ``on_trial(study, trial)`` once it is stored,
    ``on_confirm(run, round, role, rounds)`` as a re-measurement starts (``run`` None) and ends,
    ``on_note(line)`` with what the study does between trials (the plan's predictions).
    """

    def __init__(
        self,
        config: TuneConfig,
        run_dir: Path,
        resume: bool = False,
        on_start: Callable[[int, int, int, dict[str, Value]], None] | None = None,
        on_trial: Callable[[Study, Trial], None] | None = None,
        on_confirm: Callable[[Confirmation | None, int, str, int], None] | None = None,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.run_dir = run_dir
        self.resume = resume
        self.on_start = on_start
        self.on_trial = on_trial
        self.on_confirm = on_confirm
        self.on_note = on_note
        self.study: Study | None = None
        self.stopped: str | None = None
        #: The study stopped because what it tunes changes nothing (a knob never read): no best.
        self.no_effect = False
        self._plan_memory: PlanMemory | None = None
        self._plans: PlanTraces | None = None
        #: What the search's prior is (or why there is none), for the summary and the progress.
        self.prior_note: str | None = None
        #: How the trials' threads per process were chosen (a new study).
        self.threads_note: str | None = None
        self._prior: PlanPrior | None = None
        ray = _ray_executor(config)
        if config.parallel < 1:  # not said: one at a time here, as many as a Ray cluster holds there
            config = self.config = replace(config, parallel=ray.capacity() if ray is not None else 1)
        #: Why fewer trials run at once than asked (said once as the study starts), or None.
        self.parallel_note: str | None = None
        on_cpu = config.device_kind != "cuda" and (ray is None or ray.resource is None)
        cores = ray.cpus_total() if ray is not None and on_cpu else len(usable_cpus())
        if on_cpu:
            if config.parallel > cores:
                where = "the Ray cluster's " if ray is not None else ""
                self.parallel_note = (
                    f"--parallel {config.parallel} on {where}{cores} cores: {cores} trials at once, so that "
                    "no two trials share a core (a shared core would slow both and decide on unequal ground)"
                )
                config = self.config = replace(config, parallel=cores)
            if ray is not None:  # each trial asks Ray for its share of the CPUs, and uses as many threads
                ray.cpus_per_trial = max(1, cores // config.parallel)
        self._running = RunningTrials(config.parallel, config.device_kind, ray)
        self._plan_lock = threading.Lock()
        ranks = trial_world_size(config.settings, {})
        self._anchors = Anchors(run_dir, run_dir / STORE_NAME, config.anchor_every, ranks, on_note)

    # ------------------------------------------------------------------ the study

    def run(self) -> TuningSummary:
        """Run (or resume) the study; its summary (summary.json's). TuneError when it cannot go on."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        STOPPING.clear()  # a study stopped before in this process does not stop this one
        if self.parallel_note is not None and self.on_note is not None:
            self.on_note(self.parallel_note)
        with _exclusive(self.run_dir):
            # first of all: nothing of a killed study runs beside this one
            stopped = stop_stale_runs(self.run_dir, self._running.node)
            if stopped and self.on_note is not None:
                names = ", ".join(stopped)
                self.on_note(f"{names} were running when the study stopped: stopped, and run again")
            storage = SqliteStorage(self.run_dir / STORE_NAME)
            meta, stored = storage.read()
            if meta is not None and not self.resume:
                raise TuneError(f"{self.run_dir} already holds a study (use --resume, or another --run-dir)")
            if meta is None:
                self._settle_threads()
            baseline = stored[0] if stored else self._run_baseline()
            self._settle_preset(baseline)
            space = self._space(meta, baseline)
            if not stored:
                baseline = replace(baseline, point=_baseline_point(space, baseline))
            study = Study(
                space,
                direction=self.config.scoring.direction,
                searcher=self.config.searcher,
                seed=self.config.seed,
                storage=storage,
                info=self.config.to_info(),
            )
            if stored:  # the options given to this resume (--trials, --confirm-rounds...) stay with it
                study.update_info(self.config.to_info())
            self.study = study
            self._stop_stale(study)  # first: a killed study's trials must not run beside anything of ours
            if not study.trials:
                study.record(baseline)
                self._after(study, baseline)
            if not baseline.ok:
                log = resolve_trial_dir(self.run_dir, facts(baseline).run_dir or ".") / LOG_NAME
                self.stopped = (
                    f"the baseline trial (the script with its own defaults) {baseline.status}: "
                    f"{_first_line(baseline.error)} (log: {log}); a new study needs another --run-dir"
                )
                self._write_summary()
                raise TuneError(self.stopped)
            try:
                self._check(study)
                self._use_plan_prior(study, baseline)
                study.optimize(
                    self._evaluate,
                    self.config.n_trials,
                    callbacks=[self._after],
                    parallel=self.config.parallel,
                    precheck=self._precheck,
                    on_abort=self._running.stop_all,
                )
                self._confirm(study)
            finally:
                written = self._write_summary()
        return written if written is not None else self.summary()

    def summary(self) -> TuningSummary:
        """The study's summary as it stands: the record summary.json is written from."""
        assert self.study is not None
        runs = confirm.stored(self.run_dir / STORE_NAME)
        prior = None
        if self.prior_note is not None:
            checks = tuple(
                PriorCheck(t.id, predicted, t.value)
                for t in self.study.trials
                if t.ok and (predicted := facts(t).plan_predicted) is not None
            )
            # the configurations the search scored, best predicted first (the first 100)
            scored = tuple(self._prior.predicted()[:100]) if self._prior is not None else ()
            prior = SearchPrior(self.prior_note, self._prior is not None, checks, scored)
        study, stopped, no_effect = self.study, self.stopped, self.no_effect
        return study_summary(study, self.config, self.run_dir, stopped, runs, no_effect, prior)

    def _write_summary(self) -> TuningSummary | None:
        """Write summary.json as the study stands; what it wrote (None before the study exists)."""
        if self.study is None:
            return None
        summary = self.summary()
        write_json(self.run_dir / SUMMARY_NAME, summary.to_json())
        return summary

    def _after(self, study: Study, trial: Trial) -> None:
        self._write_summary()
        if self.on_trial is not None:
            self.on_trial(study, trial)
        self._check(study)

    def _check(self, study: Study) -> None:
        """Stop the study when the script ignores what is tuned (every trial the same)."""
        # A preset delivers every parameter as the framework's own flags: none goes unread.
        unread = None if self.config.settings.preset is not None else ignored_params(study)
        problem = unread or same_everywhere(study)
        if problem is not None:
            self.stopped, self.no_effect = problem, True
            raise TuneError(problem)

    def _max_ranks(self) -> int:
        """The most ranks a trial of this study can run (the space's, else the layouts tried)."""
        settings, space = self.config.settings, self.config.space
        ranks = {settings.world_size}
        if self.config.layouts or (space is not None and "layout" in space.names):
            ranks.add(settings.distributed_world_size)
        if space is not None and "world_size" in space.names:
            param = space["world_size"]
            values = getattr(param, "choices", None) or (getattr(param, "high", 1),)
            ranks.update(int(v) for v in values if isinstance(v, int | float))
        return max(ranks)

    def _settle_threads(self) -> None:
        """Every trial's threads per process, the same for all (``study_threads``), said once."""
        settings = self.config.settings
        if settings.threads_per_rank is not None:
            return
        env = {**os.environ, **settings.extra_env}
        pool, ray = self._running.pool, self._running.ray  # trials at once: each its slot of the cores
        cores = pool.cores_per_slot if pool is not None else None
        if ray is not None and self.config.device_kind != "cuda" and ray.resource is None:
            cores = int(ray.cpus_per_trial)  # the CPUs each trial's Ray task asks for
        busy = ""
        if pool is None and ray is None:
            # threads beyond the cores other processes leave free collapse a step's throughput (two
            # threads beside two busy loops on 2 cores: 497 and 52,000 samples/s from two processes
            # of one configuration); fitted to the free cores as the study starts
            free, others = free_cores()
            if free < usable_cores():
                cores, busy = free, f"; other processes kept {others:.1f} cores busy as the study started"
        threads, how = study_threads(self._max_ranks(), env, cores)
        plural = "s" if threads != 1 else ""
        self.threads_note = f"{threads} thread{plural} per process in every trial ({how}{busy})"
        self.config = replace(self.config, settings=replace(settings, threads_per_rank=threads))
        if self.on_note is not None:
            self.on_note(self.threads_note)

    def _settle_preset(self, baseline: Trial) -> None:
        """A preset's global batch: the baseline's samples per rank per optimizer step."""
        settings = self.config.settings
        if settings.preset is None or settings.preset_per_rank is not None:
            return
        base = facts(baseline)
        per_step, world = base.samples_per_step, base.world_size
        if not baseline.ok or per_step is None or per_step < 1:
            raise TuneError(
                f"--preset {settings.preset}: the baseline measured no samples per step "
                f"({baseline.status}: {_first_line(baseline.error)})"
            )
        per_rank = max(1, per_step // world)
        kind = base.device_kind or self.config.device_kind
        settings = replace(settings, preset_per_rank=per_rank, device_kind=kind)
        self.config = replace(self.config, settings=settings)

    def _space(self, meta: Mapping[str, Any] | None, baseline: Trial) -> Space:
        if meta is not None:
            return self.config.space or Space.from_dict(meta["space"], source=str(self.run_dir / STORE_NAME))
        if self.config.space is not None:
            return self.config.space
        settings, base = self.config.settings, facts(baseline)
        kind = base.device_kind or self.config.device_kind  # where the script really ran
        if settings.preset is not None and settings.preset_per_rank is not None:
            ranks = settings.distributed_world_size
            return preset_space(settings.preset, settings.preset_per_rank, kind, ranks)
        if not baseline.ok:
            raise TuneError(
                f"the baseline trial {baseline.status}: {_first_line(baseline.error)}; "
                f"no search space can be built from it (log: {base.run_dir})"
            )
        space = default_space(
            base.params_used,
            kind,
            self.config.settings.distributed_world_size if self.config.layouts else 1,
        )
        if space is None:
            raise TuneError(
                "no --space given, and the script reads no built-in knob (autotune.prepare, "
                "autotune.batch_plan, autotune.param); give --space FILE (see the README)"
            )
        return space

    def _confirm(self, study: Study) -> None:
        """Re-measure the best trial's configuration against the baseline, interleaved."""
        rounds = self.config.confirm_rounds
        best = best_result(study.trials, study.direction == "maximize")
        if rounds <= 0 or best is None or best.baseline:
            return
        path = self.run_dir / STORE_NAME
        have = confirm.done(confirm.stored(path), best.id)
        for r, role in confirm.plan(rounds):
            if (r, role) in have:
                continue
            if self.on_confirm is not None:
                self.on_confirm(None, r, role, rounds)
            run_dir = self.run_dir / TRIALS_DIR / confirm.run_dir_name((r, role), best.id)
            baseline = role == "baseline"
            params = {} if baseline else best.params
            request = TrialRequest(self.config.settings, None if baseline else study.space, params, run_dir)
            outcome, placed = self._run_alone(best.id, request)
            run = confirm.confirmation_of((best.id, r, role), outcome, self.run_dir, placed)
            confirm.store(path, run)
            self._write_summary()
            if self.on_confirm is not None:
                self.on_confirm(run, r, role, rounds)

    # ------------------------------------------------------------------ trials

    def _run_baseline(self) -> Trial:
        if self.on_start is not None:
            self.on_start(0, 1, self.config.n_trials, {})
        request = TrialRequest(self.config.settings, None, {}, self._trial_dir(0))
        outcome, placed = self._run_alone(0, request)
        point = None  # set once the space is known
        world_size = trial_world_size(self.config.settings, {})
        attrs = placed.placed(self._facts(outcome, world_size)).to_attrs()
        if outcome.status != TrialStatus.OK:
            return Trial(0, {}, outcome.status, None, {}, outcome.duration_s, outcome.error, attrs, point)
        metrics = self.config.scoring.metrics(outcome.figures, world_size)
        value = metrics["objective"]
        if value is None:
            error = f"the trial measured no {self.config.scoring.metric}"
            if self.config.scoring.objective == "energy":
                error = (
                    "it measured no energy: --objective energy needs NVML's energy counter or power "
                    "readings, from an NVIDIA GPU with its driver (see autotune doctor)"
                )
            return Trial(0, {}, TrialStatus.CRASHED, None, metrics, outcome.duration_s, error, attrs, point)
        return Trial(0, {}, TrialStatus.OK, value, metrics, outcome.duration_s, None, attrs, point)

    def _run_alone(self, trial_id: int, request: TrialRequest) -> tuple[TrialOutcome, Placement]:
        """Run the script once outside the search (the baseline, a re-measurement) where trials run.

        On Ray, as a Ray task like the trials; else here, with nothing else of the study running.
        """
        ray = self._running.ray
        if ray is None:
            started_at = time.time()
            with noted_group(self.run_dir, self._running.node, request.run_dir.name) as note:
                outcome = request.run(on_spawn=note)
            return outcome, self._running.placement(None, started_at)
        return ray.run(trial_id, trial_world_size(request.settings, request.params), request)

    def _stop_stale(self, study: Study) -> None:
        """A resumed study: stop the trials the stopped one left running; they run again."""
        if not study.unfinished:
            return
        stopped = self._running.stop_stale(study)
        if self.on_note is not None:
            ids = ", ".join(str(i) for i in sorted(study.unfinished))
            killed = f" (stopped what was left of {', '.join(map(str, stopped))})" if stopped else ""
            self.on_note(f"trial(s) {ids} were running when the study stopped: run again{killed}")

    def _precheck(self, params: dict[str, Value]) -> None:
        """Infeasible for a configuration known not to run (or to run out of memory), before it starts."""
        study = self.study
        assert study is not None
        world_size = trial_world_size(self.config.settings, params)
        base = study.trials[0] if study.trials else None
        baseline_used = facts(base).params_used if base is not None else {}
        if base is not None and base.point is not None and _same(study.space, params, base.point):
            # The baseline measured this configuration already: told to the searcher as never to be
            # asked again (its value is the baseline's, which the searcher has).
            raise Infeasible(
                f"the baseline's own configuration, measured as trial {base.id}", TrialStatus.SKIPPED,
                attrs=TrialFacts(world_size=world_size, impossible=True, same_as_baseline=True).to_attrs(),
            )  # fmt: skip
        impossible = model_parallel_problem(params, world_size) or batch_split_problem(
            params, baseline_used, world_size
        )
        if impossible is not None:
            cannot = TrialFacts(world_size=world_size, impossible=True)
            raise Infeasible(impossible, TrialStatus.SKIPPED, attrs=cannot.to_attrs())
        precision = KnobValues.of(params).precision
        refused = _refused_precisions(study.trials)
        if precision is not None and precision in refused:
            raise Infeasible(
                f"precision={precision} is not for this machine: trial {refused[precision]} was refused it",
                TrialStatus.SKIPPED, attrs=TrialFacts(world_size=world_size, impossible=True).to_attrs(),
            )  # fmt: skip
        with self._plan_lock:
            skip = self._predicted_oom(params)
        if skip is not None:
            attrs = TrialFacts(world_size=world_size).to_attrs()
            raise Infeasible(skip, status=TrialStatus.SKIPPED, attrs=attrs)

    def _evaluate(self, params: dict[str, Value]) -> Measured:
        """Run one trial (in a worker thread when trials run at once) and score it."""
        study = self.study
        assert study is not None
        trial_id = study.current_trial_id
        world_size = trial_world_size(self.config.settings, params)
        precision = KnobValues.of(params).precision
        if self.on_start is not None:
            self.on_start(trial_id, study.n_run + len(study.running), self.config.n_trials, params)
        floors = [self._stop_floor(world_size)]

        def floor_now() -> float | None:  # again once the slot's anchor ended: its spread counts
            floors.append(self._stop_floor(world_size))
            return floors[-1].samples_per_s if floors[-1] is not None else None

        stop_below = floors[0].samples_per_s if floors[0] is not None else None
        run_dir = self._trial_dir(trial_id)
        request = TrialRequest(self.config.settings, study.space, params, run_dir, stop_below)
        anchor = self._anchors.claim(study.trials, world_size)
        try:
            first = None
            if anchor is not None:
                first = (self._anchors.folder(anchor), self._anchors.ended(anchor, trial_id))
            outcome, placed = self._running.run(study, trial_id, world_size, request, first, floor_now)
        finally:
            if anchor is not None:
                self._anchors.release(anchor)
        fact = placed.placed(self._facts(outcome, world_size))
        floor = floors[-1]
        if floor is not None and fact.stop_reason == STOPPED_LOSING:
            fact = replace(
                fact, stop_floor=floor.samples_per_s, stop_rule=floor.rule, stop_best_id=floor.best_id
            )
        if outcome.status != TrialStatus.OK:
            crashed = outcome.status == TrialStatus.CRASHED and precision is not None
            if crashed and _refuses(outcome.error, str(precision)):
                fact = replace(fact, refused_precision=str(precision))  # never proposed again in this study
                if self.on_note is not None:
                    why = error_line(outcome.error or "")
                    self.on_note(f"precision={precision}: the machine cannot run it ({why}); not tried again")
            reason = outcome.error or outcome.status
            raise Infeasible(reason, outcome.status, fact.to_attrs(), outcome.duration_s)
        if outcome.busy:  # measured the other processes, not the configuration: never compared
            raise Infeasible(outcome.busy_reason(), TrialStatus.BUSY, fact.to_attrs(), outcome.duration_s)
        metrics = self.config.scoring.metrics(outcome.figures, world_size)
        if metrics["objective"] is None:
            measured_none = f"the trial measured no {self.config.scoring.metric}"
            raise Infeasible(measured_none, TrialStatus.CRASHED, fact.to_attrs(), outcome.duration_s)
        drift = self._drift(study, params, outcome)
        if drift is not None:
            raise Infeasible(drift, TrialStatus.DIVERGED, fact.to_attrs(), outcome.duration_s)
        if self._prior is not None:
            with self._plan_lock:  # the plan's traces are this process's: one thread at a time
                fact = replace(fact, plan_predicted=self._prior.predict(params))
        # fixed now: the ratio printed stays the ratio
        reference = nearest_anchor(self.anchors(), midpoint(fact.started_at, fact.ended_at))
        fact = replace(fact, anchor=reference.index if reference is not None else None)
        return Measured(metrics, fact.to_attrs(), outcome.duration_s)  # its own run, not its anchor's

    def anchors(self) -> list[AnchorRun]:
        """The baseline's processes so far: the baseline trial (anchor 0) and the stored anchors."""
        baseline = self.study.trials[0] if self.study and self.study.trials else None
        return self._anchors.runs(baseline, self.config.parallel)

    def _trial_dir(self, trial_id: int) -> Path:
        return self.run_dir / TRIALS_DIR / f"trial-{trial_id:04d}"

    def _facts(self, outcome: TrialOutcome, world_size: int) -> TrialFacts:
        summary = outcome.figures
        return TrialFacts(
            run_dir=_relative_to(outcome.run_dir, self.run_dir),
            world_size=world_size,
            params_used=dict(summary.params_used),
            stop_reason=summary.stop_reason,
            measured_steps=summary.measured_steps,
            precision=summary.precision,
            samples_per_step=_samples_per_step(summary),
            flops_per_step=summary.flops_per_step,
            loss_per_step=summary.loss.per_step,
            device_memory_bytes=_device_memory_bytes(summary),
            throughput_ci95=summary.throughput.samples_per_s_ci95,
            stable=measured_stably(summary, self.config.settings.stable_within),
            other_load_cores=outcome.other_load_cores,
            load_cores=outcome.load_cores,
            starved_share=outcome.starved_share,
            busy_before=outcome.busy_before,
            threads_per_rank=self.config.settings.threads_per_rank,
            device_kind=summary.device.kind,
            device_name=summary.device.name,
        )

    def _stop_floor(self, world_size: int) -> StopFloor | None:
        """The throughput under which a new trial stops early (autotune.tuner.early_stop)."""
        assert self.study is not None
        spread = process_spread(self.anchors())
        maximize = self.study.direction == "maximize"
        return stop_floor(
            self.config.scoring, self.study.trials, world_size, spread, self.config.early_stop_ratio, maximize
        )

    def _plan_traces(self, space: Space) -> PlanTraces:
        if self._plans is None or self._plans.space != space:
            self._plans = PlanTraces(self.config.settings, space)
        return self._plans

    def _use_plan_prior(self, study: Study, baseline: Trial) -> None:
        """Give the Bayesian searcher the plan's prediction of every configuration (see plan_prior)."""
        if not self.config.plan_prior or not isinstance(study.searcher, BayesSearcher | StructuredSearcher):
            return
        self._prior, self.prior_note = prior_for_study(
            self._plan_traces(study.space), self.config.scoring, facts(baseline), baseline.value,
            self.config.device_kind, self.on_note,
        )  # fmt: skip
        if self._prior is not None:
            study.searcher.prior = self._prior.predict
        elif self.on_note is not None:  # said once, before the search goes on without it
            self.on_note(f"{self.prior_note}; the search goes on without it")

    def _predicted_oom(self, params: dict[str, Value]) -> str | None:
        """Why ``params`` would not fit the memory budget, predicted without running it, or None.

        The plan's fake-tensor trace of the configuration when it can be made, else a line
        through the finished trials; an out-of-memory trial at a smaller batch always counts.
        """
        study = self.study
        assert study is not None
        budget = self._memory_budget()
        if self._plan_memory is None or self._plan_memory.budget_bytes != budget:
            self._plan_memory = PlanMemory(
                self.config.settings, study.space, budget, plans=self._plan_traces(study.space)
            )
        baseline = study.trials[0] if study.trials else None
        if baseline is not None and baseline.ok:
            self._plan_memory.calibrate(facts(baseline).params_used, metrics(baseline).peak_memory_bytes)
        planned = self._plan_memory.predicted_peak_bytes(params)
        history = MemoryModel(study.space, budget).predict_oom(params, study.trials, fit_line=planned is None)
        return history or self._plan_memory.predict_oom(params)

    def _memory_budget(self) -> int | None:
        budget = self.config.settings.memory_budget_bytes
        if budget is not None or self.study is None:
            return budget
        baseline = self.study.trials[0] if self.study.trials else None
        total = None if baseline is None else facts(baseline).device_memory_bytes
        return total or None

    def _drift(self, study: Study, params: Mapping[str, Value], outcome: TrialOutcome) -> str | None:
        """Why the trial's loss left the fp32 baseline's trajectory, or None."""
        if self.config.loss_tolerance <= 0 or not study.trials:
            return None
        return loss_drift(
            study.trials[0],
            params,
            self._facts(outcome, 1),
            self.config.loss_tolerance,
            self.config.settings.warmup_steps,
        )


def measured_stably(summary: ProfileSummary, within: float | None) -> bool | None:
    """Whether a trial's throughput is known to ``within`` (its 95% interval's half-width over it).

    None without a measurement. ``within`` None (the study ran trials to their step budget) takes
    the tuner's default of 5%.
    """
    rate, ci = summary.throughput.samples_per_s, summary.throughput.samples_per_s_ci95
    if not rate or not ci:
        return None
    if ci[0] is None or ci[1] is None:
        return False
    return (ci[1] - ci[0]) / 2 / rate <= (within if within else 0.05)


#: What a framework or torch says when the machine lacks a precision (transformers, Lightning, torch).
_CAPABILITY_MARKERS = (
    "doesn't support bf16",
    "does not support bf16",
    "does not support bfloat16",
    "bf16 is not supported",
    "fp16 mixed precision requires a GPU",
    "requires a GPU",
    "is only supported on GPU",
    "not supported on this device",
    "Your setup doesn't support",
)


#: How an error message names each precision.
_PRECISION_NAMES = {"bf16": ("bf16", "bfloat16"), "fp16": ("fp16", "float16", "half"), "tf32": ("tf32",)}


def _refuses(error: str | None, precision: str) -> bool:
    """Whether a crashed trial's error says the machine cannot run ``precision`` (not a bug of the model).

    Both a capability phrase and the precision's own name must be in it: "requires a GPU" alone may
    be about anything else the trial did (torch.compile, a CUDA-only kernel).
    """
    text = (error or "").lower()
    named = any(name in text for name in _PRECISION_NAMES.get(precision, ()))
    return named and any(marker.lower() in text for marker in _CAPABILITY_MARKERS)


def _refused_precisions(trials: list[Trial]) -> dict[str, int]:
    """Precision -> the trial that found this machine cannot run it (kept in run.db: resume keeps it)."""
    out: dict[str, int] = {}
    for t in trials:
        value = facts(t).refused_precision
        if value is not None:
            out.setdefault(value, t.id)
    return out


def _same(space: Space, params: Mapping[str, Value], other: Mapping[str, Value]) -> bool:
    return space.key(params) == space.key(other)


def _baseline_point(space: Space, baseline: Trial) -> dict[str, Value] | None:
    """The baseline's place in the space, from the values its script reported using, or None."""
    used = facts(baseline).params_used
    if not all(name in used for name in space.names):
        return None
    return {name: used[name] for name in space.names}


def _samples_per_step(summary: ProfileSummary) -> int | None:
    """Samples in one optimizer step, job-wide: throughput times the mean step time."""
    rate, mean_s = summary.throughput.samples_per_s, summary.step_time.mean_s
    return round(rate * mean_s) if rate and mean_s else None


def _device_memory_bytes(summary: ProfileSummary) -> int | None:
    """The first GPU's total memory, from a profiler summary (None on a CPU run)."""
    return (summary.gpus[0].mem_total_bytes or None) if summary.gpus else None


def _first_line(text: str | None) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[0] if lines else "no error message"


def _relative_to(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` when it is inside it (how a study stores its trials' folders)."""
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path)


@contextlib.contextmanager
def _exclusive(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir``'s tuner lock (released at exit, also when the process is killed)."""
    with (run_dir / TUNE_LOCK_NAME).open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TuneError(f"another tuner is running in {run_dir}") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
