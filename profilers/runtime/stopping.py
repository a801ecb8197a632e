"""Step budgets: stop a run (a tuning trial) as soon as its answer is known.

The rules, each off unless asked for:

- ``max_steps``: the run has done that many steps;
- ``stable``: at least ``min_measured_steps`` measured steps exist and the 95% confidence interval
  of the mean measured step time is narrow: ``1.96 * s / (mean * sqrt(n)) <= stable_within``;
- ``below_threshold``: as soon as that many measured steps exist, even the optimistic end of the
  throughput estimate (samples per step over the lower end of that interval) is below
  ``stop_below_samples_per_s``; inactive while the samples per step are unknown;
- ``non_finite_loss``: a step's loss is NaN or infinite.

Step times here are host times (``time.perf_counter_ns()`` at the step boundaries, taken on the
training thread), so no rule ever waits for the GPU. A loss on the CPU is read at the end of its
step; a loss on a GPU is only looked at once the recorder thread has read it, which it does once
the GPU finished the step (its end event), so a NaN on CUDA stops the run a few steps after it
appeared in a loop that waits for the GPU each step, and as many steps later as the host ran ahead
of the GPU in one that never waits.

Several ranks (torchrun) must stop at the same step, or the job hangs in its next collective.
Each rank only knows its own step times and losses, so under a world size above one the ranks
agree every ``AGREE_EVERY_STEPS`` steps, at step numbers every rank reaches (multiples of it): each
rank sums its view (stable?, its optimistic samples/s, non-finite loss seen?) with the others'
through a gloo process group of the profiler's own (created at the first agreement; it needs the
script to have initialized torch.distributed), and all ranks take the same decision from the
sums: stable when every rank is stable, below the threshold when the ranks' optimistic throughputs
summed (the job's) are, a non-finite loss when any rank saw one. An agreement that fails or times
out (``AGREE_TIMEOUT_S``) stands the early rules down on that rank; ``max_steps`` needs no
agreement (every rank counts the same steps) and always applies.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from profilers.contract.records import StepRecord, mean_loss

if TYPE_CHECKING:
    from profilers.runtime.timeline import ClosedStep

#: z of a two-sided 95% normal interval.
Z_95 = 1.96
#: Under several ranks the early rules are decided at multiples of this step number only.
AGREE_EVERY_STEPS = 4
#: How long one rank waits for the others at an agreement before the early rules stand down.
AGREE_TIMEOUT_S = 120.0
#: Every ``stop_reason`` of summary.json but null (the script ended on its own).
STOP_REASONS = ("max_steps", "stable", "below_threshold", "non_finite_loss", "interrupted")


class StepBudgetReached(BaseException):
    """Raised into the training code when a step budget ends the run (tuning trials).

    A BaseException, so the user's ``except Exception`` does not swallow it; ``autotune profile``
    catches it and exits with status 0 after saving the run.
    """


@dataclass(frozen=True)
class StopRules:
    """The step budgets of a run (all off by default)."""

    max_steps: int | None = None
    stable_within: float | None = None  # relative 95% half-width of the mean step time
    stop_below_samples_per_s: float | None = None
    min_measured_steps: int = 8
    stop_on_non_finite_loss: bool = False

    @property
    def early(self) -> bool:
        """Whether any rule besides ``max_steps`` is on."""
        return (
            self.stable_within is not None
            or self.stop_below_samples_per_s is not None
            or self.stop_on_non_finite_loss
        )


class StepTimeStats:
    """Running mean and variance of step times in ns (Welford)."""

    def __init__(self) -> None:
        self.n = 0
        self.mean_ns = 0.0
        self._m2 = 0.0

    def add(self, step_time_ns: float) -> None:
        """Add one step's time."""
        self.n += 1
        delta = step_time_ns - self.mean_ns
        self.mean_ns += delta / self.n
        self._m2 += delta * (step_time_ns - self.mean_ns)

    @property
    def std_ns(self) -> float | None:
        """Sample standard deviation (n - 1), None below two steps."""
        return math.sqrt(max(0.0, self._m2) / (self.n - 1)) if self.n >= 2 else None

    def half_width_ns(self, z: float = Z_95) -> float | None:
        """Half-width of the confidence interval of the mean step time, None below two steps."""
        std = self.std_ns
        return None if std is None else z * std / math.sqrt(self.n)

    def relative_half_width(self, z: float = Z_95) -> float | None:
        """Half-width over the mean (0.03 = the mean is known to within 3%), or None."""
        half = self.half_width_ns(z)
        return None if half is None or self.mean_ns <= 0 else half / self.mean_ns


@dataclass(frozen=True)
class RankView:
    """What one rank knows at a step end; the values it adds to the other ranks' at an agreement."""

    stable: bool
    optimistic_samples_per_s: float | None  # None: not enough measured steps, or samples unknown
    non_finite_loss: bool

    def values(self) -> list[float]:
        """[stable, optimistic samples/s, that figure is known, non-finite loss seen], to be summed."""
        samples_per_s = self.optimistic_samples_per_s
        return [
            float(self.stable),
            0.0 if samples_per_s is None else samples_per_s,
            float(samples_per_s is not None),
            float(self.non_finite_loss),
        ]


def decide(sums: Sequence[float], world_size: int, rules: StopRules) -> str | None:
    """The early stop reason, from the ranks' :meth:`RankView.values` summed (one rank: its own)."""
    stable, samples_per_s, known, non_finite = sums
    if rules.stop_on_non_finite_loss and non_finite > 0:
        return "non_finite_loss"
    threshold = rules.stop_below_samples_per_s
    if threshold is not None and known >= world_size and samples_per_s < threshold:
        return "below_threshold"
    if rules.stable_within is not None and stable >= world_size:
        return "stable"
    return None


class RankAgreement:
    """Sums a few numbers over every rank through a gloo process group of the profiler's own."""

    _group: tuple[Any, Any] | None = None  # (the default group it was made under, the group)

    def __init__(self, timeout_s: float = AGREE_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s

    def __call__(self, values: list[float]) -> list[float]:
        """The element-wise sum of ``values`` over all ranks (a collective: every rank calls it)."""
        import torch
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("torch.distributed is not initialized, so the ranks cannot agree when to stop")
        world = dist.group.WORLD
        cached = RankAgreement._group
        if cached is None or cached[0] is not world:  # one group per process group, kept for reuse
            group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=self.timeout_s))
            RankAgreement._group = cached = (world, group)
        tensor = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=cached[1])
        return [float(v) for v in tensor.tolist()]


def step_samples(closed: ClosedStep, samples_per_step: int | None) -> int | None:
    """Samples in a closed step: the override, else its model inputs' leading dimensions."""
    if samples_per_step is not None:
        return samples_per_step
    seen = [e.samples for e in closed.events if e.samples is not None]
    return sum(seen) if seen else None


class StepBudgets:
    """Decides at each step end whether a step budget ends the run, and why.

    The decision on step times alone (:meth:`observe`, :meth:`note_non_finite`, :meth:`step_end`)
    is pure and takes any list of numbers; :meth:`at_step_end` feeds it from a closed step.
    """

    def __init__(
        self,
        rules: StopRules,
        world_size: int = 1,
        agree: Callable[[list[float]], list[float]] | None = None,
        on_fault: Callable[[str, BaseException], None] | None = None,
        samples_per_step: int | None = None,
        agree_every_steps: int = AGREE_EVERY_STEPS,
        ranks_per_replica: Callable[[], int] | None = None,
    ) -> None:
        self.rules = rules
        #: Ranks that train on the same samples (tensor × pipeline degree): the job's throughput is
        #: the ranks' summed over it (profilers.runtime.parallel_degrees).
        self.ranks_per_replica = ranks_per_replica
        self.world_size = world_size
        self.agree = agree if agree is not None or world_size == 1 else RankAgreement()
        self.on_fault = on_fault
        self.samples_per_step = samples_per_step
        self.agree_every_steps = agree_every_steps
        self.stats = StepTimeStats()
        self.first_non_finite_step: int | None = None
        self._samples_total = 0
        self._samples_steps = 0
        self._scan_index = 0  # records of the recorder already looked at
        self._host_observed = 0  # the last step observed by its host time (not again by its record)
        self._local_ok = True  # False once reading this rank's evidence failed: it votes "go on"
        self._early_ok = rules.early  # False once an agreement failed (or no early rule is on)

    # -- evidence -------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget the steps seen (they were renumbered: merged into a new step 1)."""
        self.stats = StepTimeStats()
        self._samples_total = self._samples_steps = 0
        self._scan_index = self._host_observed = 0

    def observe(self, step_time_ns: float, samples: int | None = None) -> None:
        """Add one measured step: its host time in ns and its samples (None when unknown)."""
        self.stats.add(step_time_ns)
        if samples is not None:
            self._samples_total += samples
            self._samples_steps += 1

    def note_non_finite(self, step: int) -> None:
        """Step ``step`` had a non-finite loss."""
        if self.first_non_finite_step is None or step < self.first_non_finite_step:
            self.first_non_finite_step = step

    def view(self) -> RankView:
        """The view of this rank now (a neutral one after its evidence failed)."""
        if not self._local_ok:
            return RankView(False, None, False)
        ready = self.stats.n >= self.rules.min_measured_steps
        rel, within = self.stats.relative_half_width(), self.rules.stable_within
        stable = ready and rel is not None and within is not None and rel <= within
        optimistic: float | None = None
        half = self.stats.half_width_ns()
        if ready and half is not None and self._samples_steps:
            low_ns = self.stats.mean_ns - half
            mean_samples = self._samples_total / self._samples_steps
            optimistic = mean_samples / (low_ns / 1e9) if low_ns > 0 else math.inf
        return RankView(stable, optimistic, self.first_non_finite_step is not None)

    # -- decision -------------------------------------------------------------------------------
    def step_end(self, step: int) -> tuple[str | None, bool]:
        """(why the run stops after step ``step``, or None; whether deciding was slow)."""
        reason: str | None = None
        slow = False
        if self._early_ok and self.world_size == 1:
            try:
                reason = decide(self.view().values(), 1, self.rules)
            except Exception as exc:
                self._early_ok = False
                self._fault("step budgets", exc)
        elif self._early_ok and step % self.agree_every_steps == 0 and self.agree is not None:
            slow = True  # a host-side wait for the other ranks: the next step starts after it
            try:
                sums = self.agree(self.view().values())
                per_replica = self.ranks_per_replica() if self.ranks_per_replica is not None else 1
                sums[1] /= per_replica  # the job's samples/s: each replica's samples once
                reason = decide(sums, self.world_size, self.rules)
            except Exception as exc:
                self._early_ok = False
                self._fault("step budgets (rank agreement)", exc)
        budget = self.rules.max_steps
        if reason is None and budget is not None and step >= budget:
            reason = "max_steps"
        return reason, slow

    def at_step_end(
        self, closed: ClosedStep, kind: str, records: Sequence[StepRecord]
    ) -> tuple[str | None, bool]:
        """:meth:`step_end` for a live closed step of ``kind``; ``records`` are the built ones.

        A step timed on the host is observed now. A step timed with CUDA events is observed once
        its record is built (a step or two later, when its end event completed), with its GPU
        time: while the host runs ahead, its own times say how fast kernels are queued, not run.
        """
        if self._early_ok and self._local_ok:
            try:
                gpu_timed = closed.end.gpu is not None
                if kind == "measured" and not gpu_timed:
                    samples = step_samples(closed, self.samples_per_step)
                    self.observe(closed.end.t_ns - closed.start.t_ns, samples)
                    self._host_observed = closed.number
                if self.rules.stop_on_non_finite_loss:
                    self._watch_cpu_losses(closed)
                self._scan(records, observe=gpu_timed)
            except Exception as exc:
                self._local_ok = False
                self._fault("step budgets", exc)
        return self.step_end(closed.number)

    def _watch_cpu_losses(self, closed: ClosedStep) -> None:
        """CPU losses of this step now (free); any others once the recorder has read them."""
        cpu = [float(e.loss) for e in closed.events if e.loss is not None and e.loss.device.type == "cpu"]
        loss = mean_loss(cpu)
        if loss is not None and not math.isfinite(loss):
            self.note_non_finite(closed.number)

    def _scan(self, records: Sequence[StepRecord], observe: bool) -> None:
        """The records built since the last look: their losses, and with ``observe`` their times."""
        if len(records) < self._scan_index:  # the recorder dropped merged steps
            self._scan_index = 0
        fresh = records[self._scan_index :]
        self._scan_index += len(fresh)
        for record in fresh:
            if observe and record.kind == "measured" and record.step > self._host_observed:
                samples = self.samples_per_step if self.samples_per_step is not None else record.samples
                self.observe(record.duration_ns, samples)
            if (
                self.rules.stop_on_non_finite_loss
                and record.loss is not None
                and not math.isfinite(record.loss)
            ):
                self.note_non_finite(record.step)

    def _fault(self, part: str, exc: BaseException) -> None:
        if self.on_fault is not None:
            self.on_fault(part, exc)


__all__ = [
    "AGREE_EVERY_STEPS",
    "STOP_REASONS",
    "RankAgreement",
    "RankView",
    "StepBudgetReached",
    "StepBudgets",
    "StepTimeStats",
    "StopRules",
    "decide",
]
