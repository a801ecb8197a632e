"""The background recorder thread: flushes queued steps to the run store; samples what it must.

The training thread only appends to deques; all SQLite and driver calls happen off it, so the
hooks never wait on disk or on NVML. Sampling goes to the sampler process
(``profilers.runtime.sampler_process``) once it has started and taken the backends over; until
then, and for a backend it cannot take, this thread samples. Queued steps are built into records
at every wake-up (each sample here, at most ``flush_interval_s`` apart, and each queued step when
``prompt_steps`` is set) and written at each flush; building a record reads its loss, which on
CUDA waits (this thread only) for the value.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

from profilers.contract.json_checks import JsonObject
from profilers.contract.records import DeviceInfo, DeviceSample, OpRecord, StepRecord
from profilers.runtime.backends.base import Backend
from profilers.runtime.sampler_process import READY_TIMEOUT_S, SILENCE_TIMEOUT_S, SamplerProcess
from profilers.runtime.store import RunStore

RETRACT = "retract"  # queued marker: delete this rank's steps written so far

#: Samples kept in memory for the summary (about 5.5 h of one device at 10 Hz).
MAX_SAMPLES_IN_MEMORY = 200_000


class Recorder:
    """Owns the store connection and the sampling loop."""

    def __init__(
        self,
        store: RunStore | None,
        backends: list[Backend],
        sample_hz: float,
        on_fault: Callable[[str, BaseException], None],
        flush_interval_s: float = 1.0,
    ) -> None:
        self.store = store
        self.backends = backends
        self.period_s = 1.0 / sample_hz if sample_hz > 0 else None
        self.flush_interval_s = flush_interval_s
        self.on_fault = on_fault
        self.samples: collections.deque[DeviceSample] = collections.deque(maxlen=MAX_SAMPLES_IN_MEMORY)
        self.steps: list[StepRecord] = []  # every step built so far, in order
        self._pending_steps: collections.deque[Callable[[], StepRecord] | str] = collections.deque()
        self._unwritten: list[StepRecord | str] = []  # built, not yet in the store
        self._pending_samples: collections.deque[DeviceSample] = collections.deque()
        self._stop = threading.Event()
        self._wake = threading.Event()
        #: Build each step's record as soon as it is queued (a non-finite loss on CUDA must be seen
        #: within a step or two), instead of at the next sample or flush.
        self.prompt_steps = False
        self._thread: threading.Thread | None = None
        self._keep_gpus: frozenset[int] | None = None  # NVML indexes sampled (None: all)
        self._devices_update: list[DeviceInfo] | None = None  # for the store, at the next flush
        self._meta_update: JsonObject = {}  # meta values for the store, at the next flush
        #: The sampler process, while it is starting or sampling (None: everything is sampled here).
        self.child: SamplerProcess | None = None
        self._in_child: set[str] = set()  # specs of the backends the child samples
        self._child_lock = threading.Lock()  # the handover against a change of the GPUs sampled
        self._child_heard_ns = 0  # when the sampler process last said something
        #: Why a backend was sampled in the training process (the child could not take it).
        self.sampling_notes: list[str] = []
        #: The sampler process's failures (it could not start, died, or did not end cleanly).
        self.sampling_faults: list[str] = []

    def start(self, child: SamplerProcess | None = None) -> None:
        """Take a first sample now and start the thread; ``child``: a sampler process to hand over to."""
        self._sample_once()
        if child is not None and self.period_s is not None and self.store is not None:
            try:
                child.start()
                self.child = child
                for backend in self.backends:  # its CPU is ours, not the training's
                    backend.exclude_process(child.pid or 0)
            except OSError as exc:
                self.sampling_faults.append(f"the sampler process could not start ({exc})")
        self._thread = threading.Thread(target=self._run, name="autotune-recorder", daemon=True)
        self._thread.start()

    def sampling_where(self) -> dict[str, str]:
        """Each backend's name and where it was sampled at the end: the sampler or the training process."""
        child = self._in_child
        return {b.name: "sampler process" if b.spec in child else "training process" for b in self.backends}

    def _tend_child(self) -> None:
        """Read the sampler process's news: hand over what it took; take back what it dropped."""
        child = self.child
        if child is None:
            return
        ready_seen = child.go_ns is not None
        messages = child.messages()
        if messages:
            self._child_heard_ns = time.time_ns()
        for message in messages:
            if "ready" in message:
                ready = message["ready"]
                took = set(ready.get("took") or [])
                for spec, why in (ready.get("left") or {}).items():
                    self.sampling_notes.append(f"{spec} sampled in the training process: {why}")
                if not took:
                    self.child = None
                    child.stop()
                    return
                with self._child_lock:  # a keep_gpus from the training thread comes before or after
                    self._in_child = took  # from now on only the child samples them
                    keep = self._keep_gpus
                    child.go(None if keep is None else sorted(keep))
                ready_seen = True
            elif "error" in message:
                self.sampling_faults.append(f"the sampler process failed ({message['error']})")
        code = child.exit_code()
        waited_s = (time.time_ns() - child.started_ns) / 1e9
        silent_s = (time.time_ns() - self._child_heard_ns) / 1e9
        if code is None and self._in_child and silent_s > SILENCE_TIMEOUT_S:  # hung: no write said
            child.kill()
            self.sampling_faults.append(
                f"the sampler process stopped answering ({silent_s:.0f} s without a write) "
                f"{waited_s:.1f} s into the run; sampling went on in the training process from then"
            )
        elif code is None and (self._in_child or waited_s < READY_TIMEOUT_S):
            return
        elif code is None:  # never answered
            child.stop()
            self.sampling_faults.append(f"the sampler process did not start within {READY_TIMEOUT_S:.0f} s")
        elif not self._in_child and not ready_seen:
            self.sampling_faults.append(
                f"the sampler process exited (exit code {code}) before taking over; sampling stayed "
                "in the training process"
            )
        elif self._in_child:
            self.sampling_faults.append(
                f"the sampler process ended (exit code {code}) {waited_s:.1f} s into the run; "
                "sampling went on in the training process from then (readings it had not yet "
                "written, up to a second's, are lost)"
            )
        self.child = None
        self._in_child = set()

    def keep_gpus(self, indexes: list[int] | None, device_infos: list[DeviceInfo] | None) -> None:
        """Sample only GPUs ``indexes`` (NVML's) from now on; None keeps every GPU.

        With ``device_infos`` the store's device list becomes those, and its samples of other GPUs
        are deleted (at the next flush, on this thread).
        """
        with self._child_lock:
            self._keep_gpus = None if indexes is None else frozenset(indexes)
            child = self.child  # read once: the recorder thread may drop it meanwhile
            if child is not None and self._in_child:
                child.send({"keep": None if indexes is None else sorted(indexes)})
        if device_infos is not None:
            self._devices_update = device_infos

    def set_meta(self, values: JsonObject) -> None:
        """Store ``values`` in the run's meta table at the next flush (on this thread)."""
        self._meta_update = {**self._meta_update, **values}

    def add_step(self, build: Callable[[], StepRecord]) -> None:
        """Queue a closed step as the call that builds its record (training thread; never blocks).

        The record is built here, on the recorder thread, so the phase arithmetic stays off the
        training thread.
        """
        self._pending_steps.append(build)
        if self.prompt_steps:
            self._wake.set()

    def retract_steps(self) -> None:
        """Queue the removal of every step recorded so far (they were merged into a new step 1)."""
        self._pending_steps.append(RETRACT)

    def _build_queued(self) -> None:
        """Build the queued steps' records (recorder thread, or the caller after ``stop``)."""
        out = self._unwritten
        for _ in range(len(self._pending_steps)):
            item = self._pending_steps.popleft()
            if isinstance(item, str):
                self.steps.clear()
                out.append(item)
                continue
            try:
                record = item()
            except Exception as exc:
                self.on_fault("step accounting", exc)
                continue
            self.steps.append(record)
            out.append(record)

    def _sample_once(self) -> None:
        for backend in list(self.backends):
            if backend.spec in self._in_child:
                continue
            try:
                readings = backend.sample()
            except Exception as exc:
                self.backends.remove(backend)
                self.on_fault(f"{backend.name} sampling", exc)
                continue
            keep = self._keep_gpus
            if keep is not None:
                readings = [r for r in readings if r.kind != "gpu" or r.device_index in keep]
            self.samples.extend(readings)
            if self.store is not None:
                self._pending_samples.extend(readings)

    def flush(self) -> None:
        """Write queued rows to the store (recorder thread, or the caller after ``stop``)."""
        self._build_queued()
        queued, self._unwritten = self._unwritten, []
        if self.store is None:
            self._pending_samples.clear()
            return
        samples = [self._pending_samples.popleft() for _ in range(len(self._pending_samples))]
        try:
            meta, self._meta_update = self._meta_update, {}
            if meta:
                self.store.set_meta(meta)
            devices, self._devices_update = self._devices_update, None
            if devices is not None:
                keep = sorted(d.index for d in devices if d.kind == "gpu")
                self.store.replace_devices(devices)
                self.store.delete_gpu_samples(keep)
                samples = [s for s in samples if s.kind != "gpu" or s.device_index in keep]
            batch: list[StepRecord] = []
            for item in queued:
                if isinstance(item, StepRecord):
                    batch.append(item)
                else:
                    self.store.add_steps(batch)
                    batch = []
                    self.store.delete_steps()
            self.store.add_steps(batch)
            self.store.add_samples(samples)
        except Exception as exc:
            self.store = None
            self.on_fault("run store", exc)

    def _run(self) -> None:
        next_sample = time.monotonic()
        next_flush = time.monotonic() + self.flush_interval_s
        try:
            while not self._stop.is_set():
                self._wake.clear()
                self._tend_child()
                now = time.monotonic()
                sampling_here = self.period_s is not None and self._samples_here()
                if sampling_here and now >= next_sample:
                    self._sample_once()
                    assert self.period_s is not None
                    next_sample += self.period_s
                    if next_sample < now:  # fell behind (a stalled GIL): do not burst
                        next_sample = now + self.period_s
                if now >= next_flush:
                    self.flush()
                    next_flush = now + self.flush_interval_s
                else:
                    self._build_queued()
                # Sampling here (or waiting for the child's answer): at the sampling rate
                wake = min(next_flush, next_sample) if sampling_here else next_flush
                self._wake.wait(max(0.0, wake - time.monotonic()))
        except Exception as exc:
            self.on_fault("recorder thread", exc)

    def _samples_here(self) -> bool:
        """Whether this thread samples a backend, or waits for the sampler process's answer."""
        if self.child is not None and not self._in_child:
            return True
        return any(b.spec not in self._in_child for b in self.backends)

    def stop(self) -> None:
        """Take a last sample, stop the thread (and the sampler process) and flush what is queued."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        child, self.child = self.child, None
        if child is not None and self._in_child and not child.stop():
            self.sampling_faults.append(
                f"the sampler process did not end cleanly (exit code {child.exit_code()}): its last "
                "readings may be missing"
            )
        elif child is not None:
            child.stop()
        if self.period_s is not None:
            self._sample_once()
        self.flush()

    def write_ops(self, ops: list[OpRecord]) -> None:
        """Store the deep-profile window's top operators (after ``stop``)."""
        if self.store is not None:
            try:
                self.store.set_ops(ops)
            except Exception as exc:
                self.store = None
                self.on_fault("run store", exc)
