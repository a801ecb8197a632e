"""One tuning trial: the user's own training script, run short and isolated, measured by the profiler.

A trial is ``autotune profile --max-steps N --no-deep-profile`` on the script in its own process
(through ``torch.distributed.run`` when it needs several ranks), in its own process group so a
timeout kills every rank. Parameters reach it as command-line arguments from their ``arg``
templates, as environment variables from their ``env`` names, and always as
``AUTOTUNE_PARAM_<NAME>`` (JSON) for ``autotune.param()`` and ``autotune.prepare()``. Values go to
the process as an argument list, never through a shell. Out-of-memory errors, crashes and
timeouts are outcomes, not failures of the study.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from autotune.fmt import format_number
from autotune.knob_values import KnobValues
from autotune.knobs import PARAM_ENV_PREFIX, param_env_var
from autotune.presets import preset_args
from autotune.search.space import Space, Value
from autotune.search.study import Infeasible
from autotune.tuner.devices import TRIAL_CPUS_ENV, usable_cpus
from autotune.tuner.host_load import OtherLoad, machine_cores, wait_for_calm
from autotune.tuner.objectives import Scoring
from profilers.contract.json_checks import SummaryError
from profilers.contract.load import MIN_LOAD_READINGS, load_profile, too_busy
from profilers.contract.profile_summary import ProfileSummary
from profilers.contract.rundir import read_load_profile
from profilers.contract.schema import SUMMARY_NAME, TrialStatus
from profilers.runtime.kineto_chatter import is_kineto_chatter
from profilers.runtime.options import option_args

LOG_NAME = "trial.log"
#: Set while a study stops (Ctrl-C, a stop): a trial waiting for a calm machine gives up at once and
#: does not run again (:meth:`autotune.tuner.running.RunningTrials.stop_all` sets it).
STOPPING = threading.Event()
#: The variables that set a process's intra-op threads (torch reads OMP_NUM_THREADS at start).
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
ERROR_TAIL_LINES = 12
_OOM_MARKERS = (
    "OutOfMemoryError",
    "CUDA out of memory",
    "out of memory",
    "MemoryError",
    # out of memory inside the libraries: cuBLAS at cublasCreate, cuDNN's allocations and workspace
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_NOT_ENOUGH_WORKSPACE",
)


@dataclass(frozen=True)
class TrialSettings:
    """How every trial of a study runs."""

    script: str
    script_args: tuple[str, ...] = ()
    max_steps: int = 30  # warm-up and FLOP steps included; the statistics use the rest
    warmup_steps: int = 3
    timeout_s: float = 600.0
    memory_budget_bytes: int | None = None
    #: Ranks of a trial whose params set neither ``world_size`` nor ``layout``.
    world_size: int = 1
    #: Ranks of a trial whose ``layout`` is "ddp" or "fsdp", or that sets a tensor or pipeline degree
    #: (and sets no ``world_size``).
    distributed_world_size: int = 2
    module: bool = False
    extra_env: Mapping[str, str] = field(default_factory=dict)
    #: Stop once the step-time estimate is stable within this fraction (None: run ``max_steps``).
    stable_within: float | None = None
    min_measured_steps: int = 8
    #: A trial whose median step time exceeds this is infeasible.
    max_step_time_s: float | None = None
    #: A framework preset (autotune.presets) that turns params into the script's own flags.
    preset: str | None = None
    #: The preset's global batch, in samples per rank per optimizer step (the baseline's).
    preset_per_rank: int | None = None
    #: Where the baseline ran ("cpu", "cuda"): a preset's flags for that machine.
    device_kind: str | None = None
    #: Intra-op threads of every process of every trial (OMP_NUM_THREADS, MKL_NUM_THREADS), the same
    #: for all so that no trial wins by threads (:func:`study_threads`); None leaves them as they are.
    threads_per_rank: int | None = None
    #: A run short of CPU for most of its steps (contract.load.too_busy) runs again once the machine
    #: leaves it the CPU it needs, waiting up to this long for that (0: never run again).
    calm_wait_s: float = 60.0
    #: The directory the study was started in: every trial runs there, a resumed study's too (the
    #: script and its relative paths mean what they meant); None: the tuner's own directory.
    workdir: str | None = None


@dataclass(frozen=True)
class TrialOutcome:
    """What one trial measured, or why it has no measurement."""

    status: TrialStatus
    run_dir: Path
    duration_s: float
    summary: ProfileSummary | None = None  # the trial run's summary.json, parsed
    error: str | None = None
    #: Mean cores other processes kept busy while the trial measured, on its own cores when pinned to
    #: a slot (its profile's ``load``; else autotune.tuner.host_load over its whole run).
    other_load_cores: float | None = None
    #: The share of its measured steps it ran short of CPU (other processes held its cores), or None.
    starved_share: float | None = None
    #: The cores ``other_load_cores`` is over: its slot's when it was pinned, else the machine's.
    load_cores: int | None = None
    #: The first run's starved share when it was too busy to measure and this is the run made once the
    #: machine was calmer (the first is kept in ``<run_dir>-busy``); None when it ran once.
    busy_before: float | None = None
    #: Seconds waited for the machine to leave a run too busy to measure the CPU it needs, when it
    #: waited; with :attr:`busy` still true, the machine stayed busy that long and it did not run again.
    calm_wait_s: float | None = None
    #: Why a busy run was not run again otherwise (--calm-wait 0, the study stopping, a failed probe).
    calm_problem: str | None = None

    @property
    def busy(self) -> bool:
        """Whether it finished ok on a machine too busy to measure it (its figures never compared)."""
        return self.status == TrialStatus.OK and too_busy(self.starved_share)

    def busy_reason(self) -> str:
        """Why its figures are left out, in one line (for a :attr:`busy` outcome)."""
        share = self.starved_share or 0.0
        rate = format_number(self.throughput) if self.throughput else "no"
        short = f"ran short of CPU in {share:.0%} of its measured steps"
        if self.busy_before is not None:
            again = f"ran short of CPU in {self.busy_before:.0%} of its measured steps, and in {share:.0%} "
            again += "when measured once more"
        elif self.calm_problem is not None:
            again = f"{short}, and {self.calm_problem}"
        else:
            again = f"{short}, and the machine stayed busy {self.calm_wait_s or 0:.0f} s"
        return (
            f"the machine was too busy to measure it: it {again} (other processes held the cores its "
            f"threads needed); its {rate} samples/s are kept in its folder, never compared"
        )

    @property
    def figures(self) -> ProfileSummary:
        """The trial's summary, or an empty one when it wrote none."""
        return self.summary if self.summary is not None else ProfileSummary.empty()

    @property
    def throughput(self) -> float | None:
        """Samples per second (job-wide under torchrun), or None."""
        return self.figures.throughput.samples_per_s

    @property
    def peak_memory_bytes(self) -> int | None:
        """Peak memory the profiler measured, or None."""
        return self.figures.peak_memory_bytes

    @property
    def step_time_s(self) -> float | None:
        """Median measured step time in seconds, or None."""
        return self.figures.step_time.median_s


def trial_world_size(settings: TrialSettings, params: Mapping[str, Value]) -> int:
    """Ranks of the trial: its ``world_size`` param, else from its ``layout``, else the settings'."""
    if "world_size" in params:
        return int(params["world_size"])
    layout = KnobValues.of(params).layout
    if layout == "single":
        return 1
    if layout in ("ddp", "fsdp") or "tensor_parallel" in params or "pipeline_parallel" in params:
        return settings.distributed_world_size
    return settings.world_size


def usable_cores() -> int:
    """Cores this process may run on (its affinity), which the trials share."""
    return len(usable_cpus()) or 1


def study_threads(max_ranks: int, env: Mapping[str, str], cores: int | None = None) -> tuple[int, str]:
    """Threads per process for every trial of a study, and how they were chosen, in words.

    The cores shared out over the most ranks any trial runs (threads x ranks <= cores), so a
    one-process trial and a two-rank one both get the same threads per process and neither wins
    by oversubscribing the cores (torchrun sets 1 thread for several ranks, torch takes every core
    for one: on a shared machine that alone made a 26x "speedup"). A thread count the user set
    (OMP_NUM_THREADS) is kept when it fits, else lowered to what fits.
    """
    cores = cores or usable_cores()
    fit = max(1, cores // max(1, max_ranks))
    raw = env.get("OMP_NUM_THREADS", "").strip()
    if raw.isdigit() and int(raw) > 0:
        asked = int(raw)
        if asked <= fit:
            return asked, f"OMP_NUM_THREADS={asked} as set"
        return fit, f"OMP_NUM_THREADS={asked} lowered to {fit}: {_over(cores, max_ranks)}"
    return fit, _over(cores, max_ranks)


def _over(cores: int, ranks: int) -> str:
    """"2 cores over up to 1 rank": how the threads were shared out."""
    return f"{cores} core{'s' if cores != 1 else ''} over up to {ranks} rank{'s' if ranks != 1 else ''}"


def trial_command(
    settings: TrialSettings,
    space: Space | None,
    params: Mapping[str, Value],
    run_dir: Path,
    stop_below: float | None = None,
) -> list[str]:
    """The argument list of one trial (no shell).

    ``stop_below``: samples/s under which the trial stops early (clearly worse than the best).
    """
    early = settings.stable_within is not None or (stop_below is not None and stop_below > 0)
    options = {
        "run_dir": run_dir,
        "warmup_steps": settings.warmup_steps,
        "deep_profile": False,
        "quiet": True,
        "overwrite": True,
        "max_steps": settings.max_steps,
        "stable_within": settings.stable_within,
        "stop_below_samples_per_s": stop_below if stop_below is not None and stop_below > 0 else None,
        "min_measured_steps": settings.min_measured_steps if early else None,
        "stop_on_non_finite_loss": True,
    }
    profile = ["-m", "autotune", "profile", *option_args(options)]
    if settings.module:
        profile.append("-m")
    if settings.preset is not None:
        args = preset_args(
            settings.preset, params, settings.preset_per_rank, run_dir / "framework", settings.device_kind
        )
    else:
        args = space.command_args(params) if space is not None and params else []
    target = [settings.script, *settings.script_args, *args]
    world_size = trial_world_size(settings, params)
    if world_size > 1:
        launcher = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", str(world_size),
        ]  # fmt: skip
        return [*launcher, *profile, *target]
    return [sys.executable, *profile, *target]


def trial_env(settings: TrialSettings, space: Space | None, params: Mapping[str, Value]) -> dict[str, str]:
    """The tuner's own environment plus the trial's parameters (none for a baseline)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(PARAM_ENV_PREFIX)}
    env.update(settings.extra_env)
    if settings.threads_per_rank is not None:
        for name in THREAD_VARS:
            env[name] = str(settings.threads_per_rank)
    if space is not None and params:
        env.update(space.environ(params))
    env.update({param_env_var(name): json.dumps(value) for name, value in params.items()})
    return env


def run_trial(
    settings: TrialSettings,
    space: Space | None,
    params: Mapping[str, Value],
    run_dir: Path,
    stop_below: float | None = None,
    device_env: Mapping[str, str] | None = None,
    on_spawn: Callable[[int], None] | None = None,
    cwd: str | None = None,
) -> TrialOutcome:
    """Run one trial to its step budget, its end, its crash or its timeout, and classify it.

    ``space`` None and ``params`` empty: a baseline, the script with its own defaults.
    ``device_env``: the devices of a trial of a parallel study (:mod:`autotune.tuner.devices`).
    ``on_spawn``: called with the trial's process group id once it started. ``cwd``: where the
    trial runs (by default the study's ``settings.workdir``, else the tuner's own directory).

    A run short of CPU for most of its measured steps (:attr:`TrialOutcome.busy`) measured the
    machine's other processes: once they leave its cores free (``settings.calm_wait_s`` at most, read
    on its own slot's cores when pinned), it runs again and that run is the trial's; the first is kept
    in ``<run_dir>-busy``. A machine that stays busy, or a second run short of CPU again, leaves the
    outcome busy, for the caller to leave out.
    """
    once = (settings, space, params, stop_below, device_env, on_spawn, cwd)
    # a first run kept aside by an earlier attempt of this trial (its study killed while it ran again)
    shutil.rmtree(run_dir.with_name(f"{run_dir.name}-busy"), ignore_errors=True)
    first = _run_once(run_dir, *once)
    if not first.busy:
        return first
    if settings.calm_wait_s <= 0:
        return replace(first, calm_problem="it was not measured again (--calm-wait 0)")
    try:
        return _again_when_calm(first, run_dir, once)
    except Exception as exc:  # a probe or a folder that failed: the trial stays busy, the study goes on
        return replace(first, calm_problem=f"it could not be measured again ({type(exc).__name__}: {exc})")


def _again_when_calm(first: TrialOutcome, run_dir: Path, once: tuple[Any, ...]) -> TrialOutcome:
    """``first`` (busy) run again once the machine is calm (:func:`run_trial`), else ``first``, said why."""
    settings, params, device_env = once[0], once[2], once[4]
    raw = (device_env or {}).get(TRIAL_CPUS_ENV)
    cpus = [int(c) for c in raw.split(",") if c.strip()] if raw else None
    threads = settings.threads_per_rank or usable_cores()
    waited = time.monotonic()
    demand = threads * trial_world_size(settings, params)
    calm, share = wait_for_calm(cpus, demand, settings.calm_wait_s, stop=STOPPING.is_set)
    waited_s = time.monotonic() - waited
    if STOPPING.is_set():
        return replace(first, calm_problem="the study stopped while it waited to measure it again")
    if share is None:
        return replace(first, calm_problem="the CPU a run would get could not be probed to measure it again")
    if not calm:
        return replace(first, calm_wait_s=waited_s)
    aside = run_dir.with_name(f"{run_dir.name}-busy")
    shutil.rmtree(aside, ignore_errors=True)
    run_dir.rename(aside)
    second = _run_once(run_dir, *once)
    spent = first.duration_s + second.duration_s  # what the trial cost, the wait left out
    return replace(second, duration_s=spent, busy_before=first.starved_share, calm_wait_s=waited_s)


def _run_once(
    run_dir: Path,
    settings: TrialSettings,
    space: Space | None,
    params: Mapping[str, Value],
    stop_below: float | None,
    device_env: Mapping[str, str] | None,
    on_spawn: Callable[[int], None] | None,
    cwd: str | None,
) -> TrialOutcome:
    """One run of a trial's script (:func:`run_trial`), classified."""
    run_dir.mkdir(parents=True, exist_ok=True)
    log_path = run_dir / LOG_NAME
    started = time.monotonic()
    load = OtherLoad()
    timed_out = False
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            trial_command(settings, space, params, run_dir, stop_below),
            env={**trial_env(settings, space, params), **(device_env or {})},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a timeout kills every rank
            cwd=cwd or settings.workdir,
        )
        if on_spawn is not None:
            on_spawn(proc.pid)
        try:
            code = proc.wait(timeout=settings.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            code = proc.wait()
        except BaseException:  # Ctrl-C reaches the tuner only: its own session shields the trial
            _kill_group(proc)
            raise
    duration_s = time.monotonic() - started
    summary, unreadable = _read_summary(run_dir)
    status, error = classify(code, timed_out, _tail(log_path), summary, settings)
    if unreadable is not None and status != TrialStatus.TIMEOUT:
        status, error = TrialStatus.CRASHED, unreadable
    pinned = TRIAL_CPUS_ENV in (device_env or {})
    ok = status == TrialStatus.OK
    starved = _starved_share(run_dir, summary, settings, params, load, pinned) if ok else None
    others, over = _other_load(summary, load)
    return TrialOutcome(status, run_dir, duration_s, summary, error, others, starved, over)


def _starved_share(
    run_dir: Path,
    summary: ProfileSummary | None,
    settings: TrialSettings,
    params: Mapping[str, Value],
    load: OtherLoad,
    pinned: bool,
) -> float | None:
    """The share of the trial's measured steps it ran short of CPU (LoadProfile.starved_share), or None.

    What its threads could use: the study's threads per process times its ranks. A trial stopped early
    as clearly below the best, its measured steps too few for :data:`MIN_LOAD_READINGS` host readings,
    may have been stopped by the other processes, not by its configuration (seen: nanoGPT's batch 4
    stopped at 0.37× the best while they held 1.5 of 2 cores): it is judged by its whole run as one
    reading, its own CPU against the rest of the machine's, when it had the machine (unpinned: a pinned
    one's siblings are the tuner's children too). None when it cannot be told.
    """
    if summary is None or summary.device.kind not in (None, "cpu"):
        return None  # a GPU run's threads wait on the GPU: its own CPU says nothing of what it lacked
    threads = settings.threads_per_rank or usable_cores()
    demand = threads * trial_world_size(settings, params)
    profile = read_load_profile(run_dir, summary.raw)
    if profile is not None and profile.readings >= MIN_LOAD_READINGS:
        return profile.starved_share(demand)
    others, own = load.cores(), load.own_cores()
    if pinned or summary.stop_reason != "below_threshold" or others is None or own is None:
        return None
    return load_profile([others], [own], machine_cores()).starved_share(demand)


def _other_load(summary: ProfileSummary | None, load: OtherLoad) -> tuple[float | None, int]:
    """Other processes' mean cores while the trial ran, and the cores that figure is over.

    A trial pinned to a slot of the cores: its profile's figure, over those cores only, so a sibling
    trial on its own slot is not "other processes". Else the profile's figure when its measured steps
    span :data:`MIN_LOAD_READINGS` host readings or more; a shorter window is one or two 0.1 s
    readings, a moment's load (seen: 0.1 core for a baseline among readings of 1.0), so the tuner's
    figure over the trial's whole run is taken (the machine's, siblings and start-up included).
    """
    profile = summary.load if summary is not None else None
    if summary is not None and profile is not None:
        raw = summary.raw.get("load")
        readings = raw.get("samples") if isinstance(raw, dict) else None
        pinned = profile.machine_cores < machine_cores()
        if pinned or (isinstance(readings, int) and readings >= MIN_LOAD_READINGS):
            return profile.other_cores, profile.machine_cores
    return load.cores(), machine_cores()


def classify(
    code: int, timed_out: bool, log_tail: str, summary: ProfileSummary | None, settings: TrialSettings
) -> tuple[TrialStatus, str | None]:
    """(status, error) of a finished trial process."""
    if timed_out:
        return TrialStatus.TIMEOUT, f"no result within {settings.timeout_s:g} s; {log_tail}".strip()
    if code != 0:
        oom = any(marker in log_tail for marker in _OOM_MARKERS)
        status = TrialStatus.OOM if oom else TrialStatus.CRASHED
        cause = error_line(log_tail)
        return status, f"{cause} (exit status {code})\n{log_tail}".strip()
    if summary is None or not summary.measured_steps:
        return (
            TrialStatus.CRASHED,
            f"the script ended without measured steps (summary: {summary is not None}); {log_tail}",
        )
    if summary.loss.non_finite_steps:
        first = summary.loss.first_non_finite_step
        return TrialStatus.DIVERGED, f"the loss is NaN or infinite from step {first}"
    peak = summary.peak_memory_bytes
    budget = settings.memory_budget_bytes
    if budget is not None and peak is not None and peak > budget:
        return TrialStatus.OOM, f"peak memory {peak} bytes is over the budget of {budget} bytes"
    step = summary.step_time.median_s
    limit = settings.max_step_time_s
    if limit is not None and step is not None and step > limit:
        over = f"over the limit of {format_number(limit, 6)} s"
        return TrialStatus.INFEASIBLE, f"median step time {format_number(step)} s is {over}"
    return TrialStatus.OK, None


def study_objective(
    settings: TrialSettings, space: Space, trials_dir: Path, scoring: Scoring | None = None
) -> Callable[[dict[str, Value]], dict[str, float | None]]:
    """An objective for :class:`autotune.tuner.Study`: each call runs one trial.

    Returns the trial's metrics (:meth:`Scoring.metrics`; ``objective`` is samples/s unless
    ``scoring`` says otherwise); a trial that is not "ok" raises :class:`Infeasible` with its
    status, and so does one the machine was too busy to measure ("busy"). ``autotune tune``
    (:mod:`autotune.tuner.tune`) adds the baseline, skips and checks.
    """
    scoring = scoring or Scoring()
    counter = {"n": 0}

    def objective(params: dict[str, Value]) -> dict[str, float | None]:
        counter["n"] += 1
        outcome = run_trial(settings, space, params, trials_dir / f"trial-{counter['n']:04d}")
        if outcome.status != TrialStatus.OK:
            raise Infeasible(outcome.error or outcome.status, status=outcome.status)
        if outcome.busy:  # measured the machine's other processes: never compared
            raise Infeasible(outcome.busy_reason(), status=TrialStatus.BUSY)
        metrics = scoring.metrics(outcome.figures, trial_world_size(settings, params))
        if metrics["objective"] is None:
            raise Infeasible(f"the trial measured no {scoring.metric}", status=TrialStatus.CRASHED)
        return metrics

    return objective


def kill_stale_group(pgid: int) -> bool:
    """Kill the process group of a trial a stopped study left running; whether one was killed.

    Only a group whose leader is still an autotune trial (its command line says so): a process
    id may have been reused since.
    """
    try:
        cmdline = Path(f"/proc/{pgid}/cmdline").read_bytes()
    except OSError:
        return False
    if b"autotune" not in cmdline:
        return False
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def kill_group_of(pid: int) -> None:
    """SIGKILL a running trial's process group (a study stopping while trials run)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def _read_summary(run_dir: Path) -> tuple[ProfileSummary | None, str | None]:
    """(the trial's summary, parsed; why it could not be read), None for a trial that wrote none."""
    path = run_dir / SUMMARY_NAME
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None, None
    if not isinstance(data, dict):
        return None, f"{path}: not a summary (a JSON object)"
    try:
        return ProfileSummary.parse(data, str(path)), None
    except SummaryError as exc:
        return None, str(exc)


#: ``SomeError: ...`` (a traceback's last line), or argparse's ``prog: error: ...`` (exit status 2).
_EXCEPTION_LINE = re.compile(
    r"^\s*(?:(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit)\b|[\w.\-]+: error: ).*"
)
_DECORATION = re.compile(r"^[\s=\-_*#]*$")


def error_line(log_tail: str) -> str:
    """The line that says what went wrong.

    The last ``SomeError: ...`` line, else the last line that is not decoration (torchrun's
    ``=====`` blocks), else "no error message".
    """
    lines = [line.strip() for line in log_tail.splitlines() if not _DECORATION.match(line)]
    for line in reversed(lines):
        if _EXCEPTION_LINE.match(line):
            return line
    return lines[-1] if lines else "no error message"


def _tail(path: Path, lines: int = ERROR_TAIL_LINES) -> str:
    """The last ``lines`` lines of the trial's log that say something.

    Under torchrun, those ending at the first failing rank's error, above torchrun's own report.
    """
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    kept = [line for line in text.splitlines() if line.strip() and not is_kineto_chatter(line)]
    exceptions = [i for i, line in enumerate(kept) if _EXCEPTION_LINE.match(line.strip())]
    if exceptions and "torch.distributed.elastic" in text:
        first = exceptions[0]  # the rank that failed first, before torchrun's report of the rest
        return "\n".join(kept[max(0, first - lines + 1) : first + 1])
    return "\n".join(kept[-lines:])
