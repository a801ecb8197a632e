"""What a profiling session measures, where it writes, and when it stops (``ProfileOptions``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from profilers.stopping import StopRules


@dataclass
class ProfileOptions:
    """What to measure, where to write it, and the step budgets (all off by default)."""

    name: str | None = None
    run_dir: str | Path | None = None
    runs_root: str | Path = "runs"
    warmup_steps: int = 3
    count_flops: bool = True
    deep_profile: bool = True
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
        """Raise ValueError with one clear sentence for a bad option."""
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if self.profile_steps < 1:
            raise ValueError(f"profile_steps must be >= 1, got {self.profile_steps}")
        if not (0 <= self.sample_hz <= 1000):
            raise ValueError(f"sample_hz must be between 0 and 1000, got {self.sample_hz}")
        if self.samples_per_step is not None and self.samples_per_step <= 0:
            raise ValueError(f"samples_per_step must be > 0, got {self.samples_per_step}")
        if self.peak_tflops is not None and self.peak_tflops <= 0:
            raise ValueError(f"peak_tflops must be > 0, got {self.peak_tflops}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if self.trace_cap_bytes <= 0:
            raise ValueError(f"trace_cap_bytes must be > 0, got {self.trace_cap_bytes}")
        if self.stable_within is not None and not (0 < self.stable_within <= 1):
            raise ValueError(f"stable_within must be in (0, 1], got {self.stable_within}")
        if self.stop_below_samples_per_s is not None and not self.stop_below_samples_per_s >= 0:
            raise ValueError(f"stop_below_samples_per_s must be >= 0, got {self.stop_below_samples_per_s}")
        if self.min_measured_steps < 2:
            raise ValueError(f"min_measured_steps must be >= 2, got {self.min_measured_steps}")

    def stop_rules(self) -> StopRules:
        """The step budgets these options ask for."""
        return StopRules(
            max_steps=self.max_steps,
            stable_within=self.stable_within,
            stop_below_samples_per_s=self.stop_below_samples_per_s,
            min_measured_steps=self.min_measured_steps,
            stop_on_non_finite_loss=self.stop_on_non_finite_loss,
        )
