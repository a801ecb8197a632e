"""A profiling session: installs the hooks, runs the recorder, writes the run directory.

Everything here is guarded. A fault in any part (backend, store, NVTX, FLOP counting, trace
export, an unwritable run directory) is reported once, that part stands down, and the user's
training goes on. The user's own exceptions are never caught here.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import socket
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import psutil
import torch  # before any measurement, so that its own footprint is not counted as training memory

from profilers.contract.figures import DeviceEntry, MemoryFigures, ModelFacts, RankEntry, TopOp
from profilers.contract.outcome import Ending, Exit, exit_of, interrupted_reason, outcome_fields
from profilers.contract.profile_summary import ProfileSummary, SamplesSource, SamplingFacts
from profilers.contract.reader import Snapshot
from profilers.contract.records import DeviceInfo, DeviceSample, StepRecord, mean_loss
from profilers.contract.schema import SCHEMA_VERSION, STORE_NAME, Params
from profilers.contract.summarize import rank_entry, run_statistics, steady_span_ns
from profilers.runtime import hooks
from profilers.runtime.active import active_session, claim, release
from profilers.runtime.backends import get_backend
from profilers.runtime.backends.host import HostBackend, machine_cores
from profilers.runtime.cuda_clock import (
    READ_EVERY_S,
    READ_EVERY_STEPS,
    READ_EVERY_STEPS_UNDER_BUDGETS,
    CudaClock,
    PhaseSchedule,
)
from profilers.runtime.flops import detect_precision, mfu, model_facts, peak_flops_per_s
from profilers.runtime.gpu_match import cuda_uuids, job_cuda_indexes, match_uuids, visible_nvml_indexes
from profilers.runtime.heap import StepEndHeap, heap_figures
from profilers.runtime.instrument import StepInstruments
from profilers.runtime.launch_env import LaunchEnv
from profilers.runtime.memory_history import MemoryHistory, is_out_of_memory
from profilers.runtime.nvtx_ranges import NvtxRanges, nvtx_available
from profilers.runtime.options import ProfileOptions
from profilers.runtime.parallel_degrees import ranks_per_replica
from profilers.runtime.rank_summary import device_entry, gather_ranks, host_memory, write_summary
from profilers.runtime.recorder import Recorder
from profilers.runtime.rundir import claim_run_dir, job_id, resolve_run_dir, run_dir_lock
from profilers.runtime.sampler_process import SamplerProcess, child_sampling_wanted
from profilers.runtime.stopping import StepBudgetReached, StepBudgets
from profilers.runtime.store import RunStore
from profilers.runtime.timeline import ClosedStep, step_record
from profilers.runtime.tracker import StepTracker

#: Under several ranks, steps close at the optimizer step's end after this many steps in a row had
#: one optimizer step each (see profilers.runtime.tracker): every rank then stops at the same point.
EAGER_STEP_CLOSE_AFTER = 3


class ProfilerWarning(UserWarning):
    """A part of the profiler failed; training went on without it."""


#: Under an early step budget (``--stable-within``, ``--stop-below``, ``--stop-on-non-finite-loss``),
#: the steps left unread when the host waits for the GPU, once every
#: ``READ_EVERY_STEPS_UNDER_BUDGETS`` steps (the host is then at most that many more ahead). A
#: GPU-bound loop otherwise queues steps far faster than they run, and the budget sees their times
#: that late (on an H200, a 200-step loop of large GEMMs ended before a --stop-below floor had seen
#: the 8 steps it waits for). Two queued steps keep the GPU busy; host-bound loops never wait here.
GPU_LEAD_STEPS_UNDER_BUDGETS = 2


class Session:
    """One profiled region. ``start()``, the user's code, then ``stop()``."""

    def __init__(self, options: ProfileOptions, default_name: str = "run") -> None:
        options.validate()
        self.options = options
        self.name = options.name or default_name
        self.rank, self.world_size, self.local_rank, _ = LaunchEnv.read()
        self.job_id = job_id(self.world_size)
        self.run_dir: Path | None = None
        self.summary: ProfileSummary | None = None
        self.warnings: list[str] = []
        self._inline_steps: list[StepRecord] = []
        self.precision: str | None = None
        self.model: ModelFacts | None = None  # profilers.runtime.flops.model_facts of the step's model
        self.device_kind = "cpu"
        self._reported: set[str] = set()
        self._store: Any = None
        self._recorder: Any = None
        self._hooks: Any = None
        self._tracker: StepTracker | None = None
        self._nvtx: Any = None
        self.instruments = StepInstruments(
            options.warmup_steps,
            options.count_flops,
            options.deep_profile,
            options.profile_steps,
            options.trace_cap_bytes,
            self.fault,
        )
        #: An early step budget judges GPU step times: the host may run only a few steps ahead.
        self._paced = options.stop_rules().early
        #: Steps whose GPU times are read together (a budget judges them: more often under one).
        self._read_every = READ_EVERY_STEPS_UNDER_BUDGETS if self._paced else READ_EVERY_STEPS
        self._memory_history = MemoryHistory(self.fault) if options.memory_snapshot else None
        if self._memory_history is not None:
            history = self._memory_history
            self.instruments.after_window = lambda: history.dump(self.run_dir, self.rank)
        self._narrowed = False
        self._gpu_pending: list[ClosedStep] = []
        self._clock: CudaClock | None = None  # once the model runs on CUDA
        self._unread_steps = 0  # steps closed since GPU times were last read
        self._next_read_ns = 0  # perf_counter_ns at which they are read whatever their number
        self._last_read_end: Any = None  # the end mark of the last step read
        self._wall_offset_ns = 0
        self._t0 = 0.0
        self._rss_start: int | None = None
        self._heap = StepEndHeap()
        self._cuda_device: int | None = None
        #: NVML indexes of the job's GPUs once known (None: every GPU NVML sees).
        self.job_gpus: list[int] | None = None
        #: The tuning parameters and knobs the code read, with their values (``autotune.param``).
        self.params_used: Params = {}
        self._started = False
        self._owned_backends: list[Any] = []
        self.stopped_by_budget = False
        self.stop_reason: str | None = None  # why a step budget ended the run (stopping.STOP_REASONS)
        self._exit = Exit()  # how the region ended (note_exit)
        self.exit_noted = False
        self._budgets = StepBudgets(
            options.stop_rules(),
            self.world_size,
            on_fault=self.fault,
            samples_per_step=options.samples_per_step,
            ranks_per_replica=lambda: ranks_per_replica(self.params_used, self.world_size),
        )

    # -- faults ---------------------------------------------------------------------------------
    def fault(self, part: str, exc: BaseException) -> None:
        """Report a fault of ``part`` once; the part has already stood down."""
        if part in self._reported:
            return
        self._reported.add(part)
        self._warn(f"{part} failed ({type(exc).__name__}: {exc}); training continues without it")

    def _warn(self, message: str) -> None:
        """A warning for summary.json, printed once unless quiet."""
        self.warnings.append(message)
        if not self.options.quiet:
            print(f"autotune: warning: {message}", file=sys.stderr, flush=True)

    def _guard(self, part: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            self.fault(part, exc)
            return None

    # -- start ----------------------------------------------------------------------------------
    def start(self) -> None:
        """Set everything up; never raises for a fault of ours."""
        claim(self)
        self._started = True
        self._t0 = time.time()
        self._wall_offset_ns = time.time_ns() - time.perf_counter_ns()
        self._guard("run directory", self._open_run_dir)
        self._guard("memory baseline", self._memory_baseline)
        if self._memory_history is not None:
            self._guard("memory snapshot", self._record_memory_from_cuda_init)
        self._guard("sampling backend", self._start_recorder)
        if self.options.nvtx:
            self._guard("NVTX ranges", self._start_nvtx)
        eager_after = EAGER_STEP_CLOSE_AFTER if self.world_size > 1 else None
        self._tracker = StepTracker(self._on_step, nvtx=self._nvtx, eager_after=eager_after)
        self._tracker.on_retract = self._retract
        self._guard("step hooks", self._install_hooks)

    def _open_run_dir(self) -> None:
        run_dir = resolve_run_dir(self.options, self.name, self.world_size)
        with run_dir_lock(run_dir):
            claim_run_dir(run_dir, self.job_id, self.options.overwrite)
            self._store = RunStore(run_dir / STORE_NAME, rank=self.rank)
            self._store.set_meta({"job_id": self.job_id}, only_if_missing=True)
        self.run_dir = run_dir
        self._store.set_meta(
            {
                "name": self.name,
                "command": self.options.command,
                "cwd": os.getcwd(),
                "started_ns": time.time_ns(),
                "host": socket.gethostname(),
                "world_size": self.world_size,
                "python": sys.version.split()[0],
                "options": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self.options).items()},
            },
            only_if_missing=self.rank != 0,
        )
        self._store.set_rank(self.world_size, socket.gethostname(), os.getpid(), None, None)

    def _memory_baseline(self) -> None:
        # torch is imported with this module; what else will be used is loaded now, so that its
        # footprint is not counted as training memory either
        if self.options.count_flops:
            import torch.utils.flop_counter as _flop_counter  # noqa: F401
        if self.options.deep_profile:
            import torch.profiler as _torch_profiler  # noqa: F401

        self._rss_start = psutil.Process().memory_info().rss
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.reset_peak_memory_stats()

    def _record_memory_from_cuda_init(self) -> None:
        """``--memory-snapshot``: record from CUDA's initialisation on (now, if it is done already).

        Queued with ``torch.cuda._lazy_call``, so that recording starts before the model's first
        allocation without this process initialising CUDA itself (under torchrun that would put a
        context on GPU 0 for every rank). The first CUDA input of the model, seen only at the end of
        its forward, would be too late: an out-of-memory error in the first forward (the usual one)
        would be over before it.
        """
        history = self._memory_history
        if history is not None and torch.cuda.is_available():
            torch.cuda._lazy_call(lambda: history.start(None))

    def _start_recorder(self) -> None:
        backends: list[Any] = []
        if self.local_rank == 0:
            try:
                backends.append(get_backend(self.options.backend))
            except Exception as exc:  # e.g. NVML asked for by name but unusable: host only
                self.fault("sampling backend", exc)
        if not any(d.kind == "host" for b in backends for d in b.devices()):
            own = HostBackend()
            own.spec = "host"  # the sampler process reads this process's CPU and RSS as it would
            self._owned_backends.append(own)
            backends.append(own)

        gpus = [d for b in backends for d in b.devices() if d.kind == "gpu"]
        if gpus:  # CUDA_VISIBLE_DEVICES may already say which GPUs are the job's
            self.job_gpus = visible_nvml_indexes(os.environ, gpus)
        if self._store is not None:
            self._guard("run store", self._store.set_devices, self._device_infos(backends))
            self._guard("run store", self._store.set_meta, {"backends": [b.name for b in backends]})
        self._recorder = Recorder(self._store, backends, self.options.sample_hz, self.fault)
        self._recorder.keep_gpus(self.job_gpus, None)
        child = None
        if self._store is not None and self.options.sample_hz > 0 and child_sampling_wanted():
            child = SamplerProcess(self._store.path, self.rank, self.options.sample_hz, backends)
        self._recorder.start(child)

    def _device_infos(self, backends: list[Any]) -> list[DeviceInfo]:
        """The sampled devices' static facts: the host, and the job's GPUs once they are known."""
        keep = self.job_gpus
        devices = [d for b in backends for d in b.devices()]
        return [d for d in devices if d.kind != "gpu" or keep is None or d.index in keep]

    def _select_job_gpus(self, cuda_index: int) -> None:
        """Sample only the job's GPUs from now on, matched to NVML's by UUID (``gpu_match``)."""
        if self._recorder is None:
            return
        gpus = [d for b in self._recorder.backends for d in b.devices() if d.kind == "gpu"]
        if not gpus:
            return

        wanted = job_cuda_indexes(cuda_index, LaunchEnv.read().local_world_size, torch.cuda.device_count())
        keep = None if wanted is None else match_uuids(cuda_uuids(wanted), gpus)
        if keep is None:  # the other ranks' GPUs are not visible here, or a MIG slice: keep them all
            return
        self.job_gpus = keep
        self._recorder.keep_gpus(keep, self._device_infos(self._recorder.backends))

    def _start_nvtx(self) -> None:
        if nvtx_available():
            self._nvtx = NvtxRanges(self.fault)

    def _install_hooks(self) -> None:

        assert self._tracker is not None
        self._hooks = hooks.TorchHooks(
            self._tracker,
            self.fault,
            on_first_cuda_input=self._use_cuda_clock,
        )
        self._hooks.precision_probe = self._probe_precision
        self._hooks.on_step_model = self._note_model
        self._hooks.install()

    def _use_cuda_clock(self, device: Any) -> None:
        """The model's input is on CUDA ``device``: time steps on its stream, read its memory.

        The input's device, not the current one: ``model.to(f"cuda:{local_rank}")`` without
        ``torch.cuda.set_device`` leaves the current device at 0 on every rank.
        """
        self.device_kind = "cuda"
        index = device.index if device.index is not None else torch.cuda.current_device()
        self._cuda_device = index
        self._clock = CudaClock(torch.cuda, index)
        self._next_read_ns = time.perf_counter_ns() + int(READ_EVERY_S * 1e9)
        assert self._tracker is not None
        self._tracker.gpu_mark = self._clock.mark
        self._tracker.phase_steps = PhaseSchedule(self.instruments.kind)
        self.instruments.before_window = functools.partial(torch.cuda.synchronize, index)
        if self._memory_history is not None:  # a no-op when recording since CUDA's initialisation
            self._memory_history.start(index)
        self._guard("GPU selection", self._select_job_gpus, index)
        if self.options.stop_on_non_finite_loss and self._recorder is not None:
            self._recorder.prompt_steps = True  # CUDA losses are read there: see them soon

    def _note_model(self, module: Any) -> None:
        """The step's model: its parameters and gradient bytes (what data parallelism all-reduces)."""
        try:
            self.model = model_facts(module)
        except Exception as exc:
            self.fault("model size", exc)

    def _probe_precision(self, module: Any) -> None:
        """At the first forward of the step's model: the precision in use (once)."""
        if self._hooks is not None:
            self._hooks.precision_probe = None
        try:
            self.precision = detect_precision(module)
        except Exception as exc:
            self.precision = "unknown"
            self.fault("precision detection", exc)

    def note_params_used(self, used: Params) -> None:
        """Record the tuning parameters the code has read so far, with their values.

        Kept for summary.json, and put in run.db's meta at once, so a run killed before its summary
        still says what it ran with.
        """
        if used == self.params_used:
            return
        self.params_used = dict(used)
        if self._recorder is not None:
            self._recorder.set_meta({"params_used": self.params_used})

    # -- per step -------------------------------------------------------------------------------
    def explicit_step(self) -> None:
        """``autotune.step()``: end the current step now (a no-op once the hooks stood down)."""
        if self._tracker is None or self._hooks is None or not self._hooks.active:
            return
        try:
            self._tracker.explicit_step()
        except Exception as exc:
            self.fault("step accounting", exc)

    def _on_step(self, closed: ClosedStep) -> bool:
        slow = False
        index = closed.number
        self._guard("heap readings", self._heap.at_step_end, time.time_ns())
        try:
            cuda = self.device_kind == "cuda"
            slow = self.instruments.end(index, self.run_dir, self.rank, cuda)
            if self._gpu_pending or closed.end.gpu is not None:
                # In order, once its end event completed: GPU times, and its loss computed. Read in
                # batches: nothing is queried or waited on per step.
                self._gpu_pending.append(closed)
                self._unread_steps += 1
                now_ns = time.perf_counter_ns()
                if self._unread_steps >= self._read_every or now_ns >= self._next_read_ns:
                    self._unread_steps = 0
                    self._next_read_ns = now_ns + int(READ_EVERY_S * 1e9)
                    self._resolve_gpu(block=False)
                    if self._paced:  # a budget judges GPU times: keep them coming while it can act
                        self._resolve_gpu(block=True, keep=GPU_LEAD_STEPS_UNDER_BUDGETS)
            else:
                self._emit(closed, None)
            warmup = self.options.warmup_steps
            if not self._narrowed and index >= max(1, warmup) and self._hooks is not None:
                self._narrowed = True
                self._guard("step hooks", self._hooks.narrow_to_roots)
                # The imports' and the first steps' unreachable objects, collected once now rather
                # than by a full collection in the middle of the measured steps, where their freed
                # megabytes read as a fall of the live memory (installed packages move it).
                gc.collect()
                slow = True
            if closed.live:
                slow = self.instruments.begin(index + 1, cuda) or slow
        except Exception as exc:
            self.fault("step accounting", exc)
        if self._started and closed.live:
            reason, waited = self._budgets.at_step_end(closed, self.instruments.kind(index), self.steps)
            if reason is not None:
                self.stopped_by_budget, self.stop_reason = True, reason
                raise StepBudgetReached(f"{index} steps done ({reason})")
            slow = slow or waited
        return slow

    def _retract(self, count: int) -> None:
        """Steps 1..``count`` were merged into a new step 1.

        By the first ``autotune.step()``, or by an optimizer step after many backward passes.
        """
        self._inline_steps = [s for s in self._inline_steps if s.step > count]
        self._gpu_pending = [c for c in self._gpu_pending if c.number > count]
        self.instruments.renumber(count)
        self._budgets.reset()
        if self._recorder is not None:
            self._recorder.retract_steps()

    def _emit(self, closed: ClosedStep, times: list[int] | None, phases_timed: bool = True) -> None:
        """Hand a closed step over to be turned into a StepRecord (on the recorder thread)."""
        kind = self.instruments.kind(closed.number)
        build = functools.partial(self._step_record, closed, times, kind, phases_timed=phases_timed)
        if self._recorder is not None:
            self._recorder.add_step(build)
        else:  # no recorder thread: built on the training thread, where a CUDA loss read would sync
            self._inline_steps.append(build(cuda_losses=False))

    def _step_record(
        self,
        closed: ClosedStep,
        times: list[int] | None,
        kind: str,
        cuda_losses: bool = True,
        phases_timed: bool = True,
    ) -> StepRecord:
        """The record of a closed step, its loss read now (recorder thread: never the training's)."""
        loss = None
        tensors = [
            e.loss for e in closed.events if e.loss is not None and (cuda_losses or not e.loss.is_cuda)
        ]
        if tensors and self._hooks is not None and self._hooks.capture_loss:
            try:
                loss = mean_loss(hooks.read_losses(tensors))
            except Exception as exc:
                self._hooks.capture_loss = False
                self.fault("loss capture", exc)
        return step_record(
            closed,
            times,
            kind,
            self.rank,
            self._wall_offset_ns,
            self.options.samples_per_step,
            loss,
            phases_timed,
        )

    @property
    def steps(self) -> list[StepRecord]:
        """Every step recorded so far (complete once the session has stopped)."""
        return self._recorder.steps if self._recorder is not None else self._inline_steps

    def _resolve_gpu(self, block: bool, keep: int = 0) -> None:
        """Read the GPU times of closed steps whose end event has completed, oldest first.

        With ``block``, wait for the oldest steps' end events until at most ``keep`` are pending.
        A step whose phase boundaries were not marked gets its phases from the host's times,
        scaled to its GPU duration (``phases_timed`` False). Read events go back to the pool.
        """
        clock = self._clock
        while len(self._gpu_pending) > keep:
            closed = self._gpu_pending[0]
            end = closed.end.gpu
            if end is None or clock is None:  # ended inside a CUDA graph capture: host times
                self._gpu_pending.pop(0)
                self._emit(closed, None, phases_timed=clock is None)  # on CUDA: enqueue times
                if clock is not None:
                    self._release_read(clock, closed)
                continue
            if not block and not clock.done(end):
                return
            if block:
                clock.wait(end)
            self._gpu_pending.pop(0)
            self._emit_gpu_times(clock, closed)
            self._release_read(clock, closed)

    def _emit_gpu_times(self, clock: CudaClock, closed: ClosedStep) -> None:
        """Emit a step whose end event completed, with its GPU times."""
        start, end = closed.start.gpu, closed.end.gpu
        duration = clock.elapsed_ns(start, end) if start is not None and end is not None else None
        if duration is None:  # its start was not marked (the first CUDA step): enqueue times
            self._emit(closed, None, phases_timed=False)
            return
        marks = [clock.elapsed_ns(start, e.gpu) if e.gpu is not None else None for e in closed.events]
        timed = all(t is not None for t in marks)
        if not timed:  # only the boundaries were marked: the host's split of the GPU's duration
            host_ns = closed.end.t_ns - closed.start.t_ns
            scale = duration / host_ns if host_ns > 0 else 0.0
            marks = [round((e.t_ns - closed.start.t_ns) * scale) for e in closed.events]
        self._emit(closed, [0, duration, *(t or 0 for t in marks)], phases_timed=timed)

    def _release_read(self, clock: CudaClock, closed: ClosedStep) -> None:
        """Give back the events of a step just read, but its end: the next step's start, usually.

        The previous step's end goes back too when this step did not start at it (it started
        after slow work, or inside an optimizer step that ran a closure).
        """
        previous_end, self._last_read_end = self._last_read_end, closed.end.gpu
        marks = [e.gpu for e in (closed.start, *closed.events)]
        if previous_end is not None and previous_end != closed.start.gpu:
            marks.append(previous_end)
        clock.release(m for m in marks if m is not None and m != closed.end.gpu)

    # -- stop -----------------------------------------------------------------------------------
    def note_exit(self, exc: BaseException | None) -> None:
        """The exception that is leaving the profiled region (None: it returned); before ``stop()``."""
        steps = self._tracker.steps_closed if self._tracker is not None else len(self.steps)
        self._exit = exit_of(exc, steps)
        self.exit_noted = True
        if self._memory_history is not None and is_out_of_memory(exc):
            self._memory_history.dump(self.run_dir, self.rank, oom=True)
        if self.stop_reason is None:
            self.stop_reason = interrupted_reason(self._exit)

    def _ending(self) -> Ending:
        optimizer_steps = self._tracker.steps_closed if self._tracker is not None else 0
        forward = bool(self._hooks.roots) if self._hooks is not None else self.model is not None
        return outcome_fields(self._exit, len(self.steps), self.stop_reason, optimizer_steps, forward)

    def stop(self) -> ProfileSummary | None:
        """Tear down, save everything and build the summary. Never raises for a fault of ours."""
        if not self._started:
            return None
        self._started = False
        try:
            if self._tracker is not None:
                self._guard("step accounting", self._tracker.finish)
            if self._hooks is not None:
                self._guard("step hooks", self._hooks.remove)
            last = self._tracker.steps_closed if self._tracker is not None else 0
            cuda = self.device_kind == "cuda"
            self._guard("deep-profile window", self.instruments.abandon, last, self.run_dir, self.rank, cuda)
            if self._gpu_pending:
                self._guard("GPU step timing", self._resolve_gpu, True)
            if self._memory_history is not None:
                self._end_memory_history()
            if self._nvtx is not None:
                self._guard("NVTX ranges", self._nvtx.close)
            if self._recorder is not None:
                self._guard("recorder thread", self._recorder.stop)
                for backend in self._owned_backends:
                    self._guard("sampling backend", backend.close)
                if self.instruments.top_ops:
                    self._recorder.write_ops(self.instruments.top_ops)
            self.summary = self._guard("summary", self._finish_summary)
        finally:
            release()
            if self._store is not None:
                with contextlib.suppress(Exception):  # closing must not fail the user's run
                    self._store.close()
        return self.summary

    def _end_memory_history(self) -> None:
        """The run ended: dump what is still recorded (the window did not close); say so if nothing was."""
        history = self._memory_history
        assert history is not None
        history.close(self.run_dir, self.rank)
        if not history.files and "memory snapshot" not in self._reported:
            self._reported.add("memory snapshot")
            self._warn("--memory-snapshot records CUDA memory; this run used no CUDA device, none was saved")

    def _memory(self, samples: list[DeviceSample]) -> tuple[int | None, MemoryFigures]:
        memory = MemoryFigures()
        peak: int | None = None
        try:
            memory = heap_figures(
                host_memory(samples, self.instruments, self._rss_start),
                self._heap.points,
                steady_span_ns(self.steps),
            )
            peak = memory.rss_peak_growth_bytes
        except Exception as exc:
            self.fault("host memory", exc)
        if self.device_kind == "cuda":
            try:
                dev = self._cuda_device
                peak = int(torch.cuda.max_memory_allocated(dev))
                reserved = int(torch.cuda.max_memory_reserved(dev))
                memory = replace(memory, cuda_peak_allocated_bytes=peak, cuda_peak_reserved_bytes=reserved)
            except Exception as exc:
                self.fault("CUDA memory", exc)
        return peak, memory

    def _device(self) -> DeviceEntry:
        name = None
        if self.device_kind == "cuda":
            name = torch.cuda.get_device_name(self._cuda_device)
        return device_entry(self.device_kind, name, self._cuda_device, self.world_size, self.job_gpus)

    def _mfu(self, step_time_s: float | None, device: DeviceEntry) -> tuple[float | None, float | None]:
        if self.options.peak_tflops is not None:
            peak: float | None = self.options.peak_tflops * 1e12
        elif device.kind == "cuda" and device.name is not None:
            peak = peak_flops_per_s(device.name, self.precision or "fp32")
        else:
            peak = None
        return mfu(self.instruments.flops_per_step, step_time_s, peak, 1), peak

    def _samples_from(self) -> SamplesSource | None:
        """How samples per step were found: the override, or the model input that gave them."""
        if self.options.samples_per_step is not None:
            return SamplesSource(override=self.options.samples_per_step)
        return self._hooks.samples_source if self._hooks is not None else None

    def _recorded_samples(self) -> list[DeviceSample]:
        """The device samples of this rank: every row of run.db, however long the run.

        Without a store (no run directory, or it failed), the recorder's in-memory tail
        (:data:`~profilers.runtime.recorder.MAX_SAMPLES_IN_MEMORY` rows).
        """
        recorder = self._recorder
        if recorder is None:
            return []
        if recorder.store is not None and self.run_dir is not None:
            try:
                with Snapshot(self.run_dir / STORE_NAME) as snap:
                    return snap.samples(rank=self.rank)[2]
            except Exception as exc:
                self.fault("run store", exc)
        return list(recorder.samples)

    def _statistics(self, samples: list[DeviceSample]) -> ProfileSummary:
        """:func:`run_statistics` of this rank; without the samples if their aggregates fail."""
        names: dict[int, str] = {}
        if self._recorder is not None:
            names = {d.index: d.name for b in self._recorder.backends for d in b.devices() if d.kind == "gpu"}
        args = (self.options.samples_per_step, self.job_gpus, names)
        try:
            return run_statistics(self.steps, samples, *args, machine_cores=machine_cores())
        except Exception as exc:
            self.fault("GPU aggregates", exc)
            return run_statistics(self.steps, [], *args)

    def _sampling(self) -> SamplingFacts | None:
        """Where each backend was sampled, and why not in the sampler process; its faults warned."""
        recorder = self._recorder
        if recorder is None or recorder.period_s is None:  # nothing sampled
            return None
        for fault in recorder.sampling_faults:
            self._warn(fault)
        notes = recorder.sampling_notes + recorder.sampling_faults
        return SamplingFacts(recorder.sampling_where(), tuple(notes))

    def _finish_summary(self) -> ProfileSummary:
        sampling = self._sampling()
        samples = self._recorded_samples()
        stats = self._statistics(samples)
        peak_mem, memory = self._memory(samples)
        device = self._device()
        mfu_value, peak = self._mfu(stats.step_time.median_s, device)
        mine = rank_entry(self.rank, self.steps, stats, peak_mem)
        ending = self._ending()
        summary = replace(
            stats,
            name=self.name,
            run_dir=str(self.run_dir) if self.run_dir else None,
            peak_memory_bytes=peak_mem,
            memory=memory,
            flops_per_step=self.instruments.flops_per_step,
            mfu=mfu_value,
            peak_flops_per_s=peak,
            precision=self.precision,
            device=device,
            rank=self.rank,
            top_ops=tuple(TopOp(**asdict(o)) for o in self.instruments.top_ops),
            window=self.instruments.window_stats,
            trace_files=tuple(self.instruments.trace_files),
            memory_snapshot_files=self._snapshot_files(),
            step_mode=self._tracker.mode if self._tracker else None,
            wall_time_s=time.time() - self._t0,
            stopped_by_budget=self.stopped_by_budget,
            stop_reason=self.stop_reason,
            outcome=ending.outcome,
            error=ending.error,
            seen=ending.seen,
            warnings=tuple(self.warnings),
            model=self.model or ModelFacts(),
            samples_from=self._samples_from(),
            params_used=self.params_used,
            sampling=sampling,
        )
        if self._store is not None:
            self._guard("run store", self._write_rank, summary)
            summary = replace(summary, warnings=tuple(self.warnings))  # with a fault of that write
        if self.world_size > 1:
            if self.rank != 0:
                return summary
            summary = self._gather_ranks(summary, mine)
        if self.run_dir is not None:
            self._guard("summary.json", self._write_summary, summary)
        return summary

    def _snapshot_files(self) -> tuple[str, ...]:
        return tuple(self._memory_history.files) if self._memory_history is not None else ()

    def _write_rank(self, summary: ProfileSummary) -> None:
        store: RunStore = self._store
        for w in self.warnings:
            store.add_warning(time.time_ns(), "profiler", w)
        store.set_rank(self.world_size, socket.gethostname(), os.getpid(), time.time_ns(), summary)

    def _gather_ranks(self, summary: ProfileSummary, mine: RankEntry) -> ProfileSummary:
        """Rank 0: wait for the other ranks' own summaries, then add the per-rank figures."""
        path = self.run_dir / STORE_NAME if self.run_dir is not None else None
        per_step = self.options.samples_per_step
        per_replica = ranks_per_replica(self.params_used, self.world_size)
        return gather_ranks(summary, mine, path, self.world_size, per_step, self.warnings, per_replica)

    def _write_summary(self, summary: ProfileSummary) -> None:
        assert self.run_dir is not None
        write_summary(self.run_dir, summary)


__all__ = [
    "SCHEMA_VERSION",
    "ProfileOptions",
    "ProfilerWarning",
    "Session",
    "StepBudgetReached",
    "active_session",
]
