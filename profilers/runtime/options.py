"""What a profiling session measures, where it writes, and when it stops (``ProfileOptions``).

:data:`PROFILE_OPTIONS` is the one table of the profile options: the defaults are the dataclass's,
and from the table come the checks of :meth:`ProfileOptions.validate`, the ``autotune profile``
flags with their help and their argument checks, and the flags the tuner passes to its trials
(:func:`option_args`), so the four cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profilers.runtime.stopping import StopRules


@dataclass
class ProfileOptions:
    """What to measure, where to write it, and the step budgets (all off by default)."""

    name: str | None = None
    run_dir: str | Path | None = None
    runs_root: str | Path = "runs"
    warmup_steps: int = 3
    count_flops: bool = True
    deep_profile: bool = True
    #: Record the CUDA allocator's history until the deep-profile window ends; save a snapshot.
    memory_snapshot: bool = False
    profile_steps: int = 3
    trace_cap_bytes: int = 64 * 1024 * 1024
    sample_hz: float = 10.0
    samples_per_step: int | None = None
    backend: str | None = None
    peak_tflops: float | None = None
    nvtx: bool = True
    quiet: bool = False
    overwrite: bool = False
    max_steps: int | None = None  # stop the training after this many steps (tuning trials)
    #: Stop once the mean measured step time is known to within this fraction (95% interval).
    stable_within: float | None = None
    #: Stop once even the optimistic throughput estimate is below this many samples/s.
    stop_below_samples_per_s: float | None = None
    #: Measured steps the two rules above wait for.
    min_measured_steps: int = 8
    #: Stop at the end of a step whose loss is NaN or infinite.
    stop_on_non_finite_loss: bool = False
    command: list[str] | None = field(default=None)

    def validate(self) -> None:
        """Raise ValueError with one clear sentence for a bad option (the table's ranges)."""
        for spec in PROFILE_OPTIONS:
            problem = spec.problem(getattr(self, spec.field))
            if problem is not None:
                raise ValueError(f"{spec.field} must be {problem}, got {getattr(self, spec.field)}")

    def stop_rules(self) -> StopRules:
        """The step budgets these options ask for."""
        return StopRules(
            max_steps=self.max_steps,
            stable_within=self.stable_within,
            stop_below_samples_per_s=self.stop_below_samples_per_s,
            min_measured_steps=self.min_measured_steps,
            stop_on_non_finite_loss=self.stop_on_non_finite_loss,
        )


@dataclass(frozen=True)
class OptionSpec:
    """One profile option: its ProfileOptions field, its flag, its help and the values it accepts.

    ``kind``: "int", "float", "str", "path" or "bool". A bool's flag turns it on, or off when
    ``negated`` (``--no-flops``). Numbers must lie in [``low``, ``high``] (``low`` excluded when
    ``low_open``); ``what`` says so in words. A field without a ``flag`` is set from Python only.
    """

    field: str
    flag: str | None
    help: str
    kind: str = "str"
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    what: str = ""
    negated: bool = False
    metavar: str | None = None
    budget: bool = False  # one of the step budgets (a group of its own in --help)

    def problem(self, value: Any) -> str | None:
        """What ``value`` must be, when it is not (None: fine). None values are "not set"."""
        if value is None or self.kind not in ("int", "float"):
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            return self.what
        low, high = self.low, self.high
        if (low is not None and (value < low or (self.low_open and value == low))) or (
            high is not None and value > high
        ):
            return self.what
        return None

    @property
    def default(self) -> Any:
        """The ProfileOptions default of the field."""
        f = _FIELDS[self.field]
        return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


_FIELDS = {f.name: f for f in dataclasses.fields(ProfileOptions)}

#: Every profile option, in --help order.
PROFILE_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("name", "--name", "run name (default: the script's name)"),
    OptionSpec("run_dir", "--run-dir", "write the run here (default: runs/<timestamp>-<name>)", "path"),
    OptionSpec("runs_root", "--runs-root", "parent of default run directories", "path"),
    OptionSpec("warmup_steps", "--warmup-steps", "steps left out of the statistics", "int", 0, what=">= 0"),
    OptionSpec(
        "profile_steps", "--profile-steps", "steps in the torch.profiler window", "int", 1, what=">= 1"
    ),
    OptionSpec("deep_profile", "--no-deep-profile", "no torch.profiler window", "bool", negated=True),
    OptionSpec(
        "memory_snapshot",
        "--memory-snapshot",
        "CUDA: record the allocator's history until the profiler window ends (and at an out-of-memory "
        "error) into memory/rank<R>.pickle, which autotune report reads",
        "bool",
    ),
    OptionSpec("count_flops", "--no-flops", "do not count FLOPs", "bool", negated=True),
    OptionSpec(
        "sample_hz",
        "--sample-hz",
        "GPU/host sampling rate, 0 = off",
        "float",
        0,
        1000,
        what="between 0 and 1000",
    ),
    OptionSpec(
        "samples_per_step",
        "--samples-per-step",
        "samples in one step (default: inferred)",
        "int",
        1,
        what="> 0",
    ),
    OptionSpec(
        "backend", "--backend", "sampling backend: nvml, host or replay:FILE (default: nvml if usable)"
    ),
    OptionSpec(
        "peak_tflops",
        "--peak-tflops",
        "device peak TFLOP/s for MFU (default: table)",
        "float",
        0,
        low_open=True,
        what="> 0",
    ),
    OptionSpec("nvtx", "--no-nvtx", "do not emit NVTX ranges", "bool", negated=True),
    OptionSpec("quiet", "--quiet", "print no summary", "bool"),
    OptionSpec("overwrite", "--overwrite", "replace a run already in --run-dir", "bool"),
    OptionSpec(
        "max_steps",
        "--max-steps",
        "stop the script after N steps, saving the run (tuning trials)",
        "int",
        1,
        what=">= 1",
    ),
    OptionSpec("trace_cap_bytes", None, "largest compressed trace kept", "int", 1, what="> 0"),
    OptionSpec(
        "stable_within",
        "--stable-within",
        "stop once the mean measured step time is known to within FRAC (95%% interval, e.g. 0.03)",
        "float",
        0,
        1,
        low_open=True,
        what="in (0, 1]",
        metavar="FRAC",
        budget=True,
    ),
    OptionSpec(
        "stop_below_samples_per_s",
        "--stop-below",
        "stop once even the optimistic throughput estimate is below this (needs samples per step)",
        "float",
        0,
        what=">= 0",
        metavar="SAMPLES_PER_S",
        budget=True,
    ),
    OptionSpec(
        "min_measured_steps",
        "--min-measured-steps",
        "measured steps --stable-within and --stop-below wait for",
        "int",
        2,
        what=">= 2",
        budget=True,
    ),
    OptionSpec(
        "stop_on_non_finite_loss",
        "--stop-on-non-finite-loss",
        "stop after a step whose loss is NaN or infinite (on a GPU, a few steps later)",
        "bool",
        budget=True,
    ),
)

_BY_FIELD = {spec.field: spec for spec in PROFILE_OPTIONS}
assert set(_BY_FIELD) == set(_FIELDS) - {"command"}, "every option is in the table"


def option_args(values: Mapping[str, Any]) -> list[str]:
    """The ``autotune profile`` flags that set ``values`` (field -> value), in table order.

    What the tuner passes to each trial. A value equal to the default, or None, needs no flag.
    """
    unknown = set(values) - set(_BY_FIELD)
    if unknown:
        raise ValueError(f"not profile options: {sorted(unknown)}")
    out: list[str] = []
    for spec in PROFILE_OPTIONS:
        if spec.field not in values:
            continue
        value = values[spec.field]
        if spec.flag is None or value is None or value == spec.default:
            continue
        if spec.kind == "bool":
            if bool(value) != (not spec.negated):
                raise ValueError(f"--{spec.field}: the flag {spec.flag} cannot set it to {value}")
            out.append(spec.flag)
        else:
            out += [spec.flag, f"{value:.6g}" if spec.kind == "float" else str(value)]
    return out
