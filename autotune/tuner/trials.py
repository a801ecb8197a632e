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

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.knobs import param_env_var
from autotune.tuner.space import Space, Value
from autotune.tuner.study import Infeasible

LOG_NAME = "trial.log"
ERROR_TAIL_LINES = 12
_OOM_MARKERS = ("OutOfMemoryError", "CUDA out of memory", "out of memory", "MemoryError")


@dataclass(frozen=True)
class TrialSettings:
    """How every trial of a study runs."""

    script: str
    script_args: tuple[str, ...] = ()
    max_steps: int = 30  # warm-up and FLOP steps included; the statistics use the rest
    warmup_steps: int = 3
    timeout_s: float = 600.0
    memory_budget_bytes: int | None = None
    world_size: int = 1
    module: bool = False
    extra_env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TrialOutcome:
    """What one trial measured, or why it has no measurement."""

    status: str  # "ok", "oom", "crashed" or "timeout"
    run_dir: Path
    duration_s: float
    summary: dict[str, Any] | None = None
    error: str | None = None

    @property
    def throughput(self) -> float | None:
        """Samples per second (job-wide under torchrun), or None."""
        if self.summary is None:
            return None
        value = (self.summary.get("throughput") or {}).get("samples_per_s")
        return float(value) if value is not None else None

    @property
    def peak_memory_bytes(self) -> int | None:
        """Peak memory the profiler measured, or None."""
        return None if self.summary is None else self.summary.get("peak_memory_bytes")


def trial_command(
    settings: TrialSettings, space: Space, params: Mapping[str, Value], run_dir: Path
) -> list[str]:
    """The argument list of one trial (no shell)."""
    profile = [
        "-m", "autotune", "profile", "--quiet", "--no-deep-profile", "--overwrite",
        "--run-dir", str(run_dir), "--max-steps", str(settings.max_steps),
        "--warmup-steps", str(settings.warmup_steps),
    ]  # fmt: skip
    if settings.module:
        profile.append("-m")
    target = [settings.script, *settings.script_args, *space.command_args(params)]
    if settings.world_size > 1:
        launcher = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", str(settings.world_size),
        ]  # fmt: skip
        return [*launcher, *profile, *target]
    return [sys.executable, *profile, *target]


def trial_env(settings: TrialSettings, space: Space, params: Mapping[str, Value]) -> dict[str, str]:
    """The tuner's own environment plus the trial's parameters."""
    env = dict(os.environ)
    env.update(settings.extra_env)
    env.update(space.environ(params))
    env.update({param_env_var(name): json.dumps(value) for name, value in params.items()})
    return env


def run_trial(
    settings: TrialSettings, space: Space, params: Mapping[str, Value], run_dir: Path
) -> TrialOutcome:
    """Run one trial to its step budget, its end, its crash or its timeout, and classify it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    log_path = run_dir / LOG_NAME
    started = time.monotonic()
    timed_out = False
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            trial_command(settings, space, params, run_dir),
            env=trial_env(settings, space, params),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a timeout kills every rank
        )
        try:
            code = proc.wait(timeout=settings.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            code = proc.wait()
    duration_s = time.monotonic() - started
    summary = _read_summary(run_dir)
    status, error = classify(code, timed_out, _tail(log_path), summary, settings)
    return TrialOutcome(status, run_dir, duration_s, summary, error)


def classify(
    code: int, timed_out: bool, log_tail: str, summary: dict[str, Any] | None, settings: TrialSettings
) -> tuple[str, str | None]:
    """(status, error) of a finished trial process."""
    if timed_out:
        return "timeout", f"no result within {settings.timeout_s:g} s; {log_tail}".strip()
    if code != 0:
        status = "oom" if any(marker in log_tail for marker in _OOM_MARKERS) else "crashed"
        return status, f"exit status {code}: {log_tail}".strip()
    if summary is None or not summary.get("measured_steps"):
        return (
            "crashed",
            f"the script ended without measured steps (summary: {summary is not None}); {log_tail}",
        )
    peak = summary.get("peak_memory_bytes")
    budget = settings.memory_budget_bytes
    if budget is not None and peak is not None and peak > budget:
        return "oom", f"peak memory {peak} bytes is over the budget of {budget} bytes"
    return "ok", None


def study_objective(
    settings: TrialSettings, space: Space, trials_dir: Path
) -> Callable[[dict[str, Value]], dict[str, float]]:
    """An objective for :class:`autotune.tuner.Study`: each call runs one trial.

    Returns the metrics (``objective`` = samples/s, ``peak_memory_bytes``, ``step_time_s``);
    out-of-memory and timeouts raise :class:`Infeasible`, crashes ``RuntimeError``.
    """
    counter = {"n": 0}

    def objective(params: dict[str, Value]) -> dict[str, float]:
        counter["n"] += 1
        outcome = run_trial(settings, space, params, trials_dir / f"trial-{counter['n']:04d}")
        if outcome.status in ("oom", "timeout"):
            raise Infeasible(outcome.error or outcome.status, status=outcome.status)
        if outcome.status != "ok" or outcome.throughput is None:
            raise RuntimeError(outcome.error or "the trial measured no throughput")
        step = (outcome.summary or {}).get("step_time_s") or {}
        return {
            "objective": outcome.throughput,
            "peak_memory_bytes": float(outcome.peak_memory_bytes or 0),
            "step_time_s": float(step.get("median") or 0.0),
        }

    return objective


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


def _read_summary(run_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _tail(path: Path, lines: int = ERROR_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    kept = [line for line in text.splitlines() if line.strip() and not line.startswith("USDT:")]
    return "\n".join(kept[-lines:])
