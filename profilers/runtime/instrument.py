"""Per-step instrumentation: FLOP counting on one step, then the deep-profile window.

Schedule after the warm-up steps: one step under ``FlopCounterMode``, then ``profile_steps``
steps under torch.profiler, one "settle" step, then nothing. Each is started at a step boundary
(in a hook, on the training thread) and stopped at the next one; those steps are marked so the
statistics leave them out.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from profilers.contract.figures import ProfileWindow
from profilers.contract.records import OpRecord
from profilers.runtime import deep
from profilers.runtime.flops import FlopCounter, warm_up_flop_counter


class StepInstruments:
    """Starts and stops the FLOP counter and the torch.profiler window at step boundaries."""

    def __init__(
        self,
        warmup_steps: int,
        count_flops: bool,
        deep_profile: bool,
        profile_steps: int,
        trace_cap_bytes: int,
        on_fault: Callable[[str, BaseException], None],
    ) -> None:
        self.warmup_steps = warmup_steps
        self.count_flops = count_flops
        self.deep_profile = deep_profile
        self.profile_steps = profile_steps
        self.trace_cap_bytes = trace_cap_bytes
        self.on_fault = on_fault
        self.flops_per_step: int | None = None
        self.top_ops: list[OpRecord] = []
        #: :func:`profilers.runtime.deep.window_stats` of the window, or None when no window ran.
        self.window_stats: ProfileWindow | None = None
        self.trace_files: list[str] = []
        self._kinds: dict[int, str] = {}
        self._flop_counter: Any = None
        self._flops_step: int | None = None
        self._deep: Any = None
        self._trace_steps_done = 0
        #: Wall-clock span (time.time_ns) of the torch.profiler window, export and trim included.
        self.window_ns: tuple[int, int] | None = None
        #: Wall-clock span of the FLOP-counting step (its decompositions allocate more than the step).
        self.flops_ns: tuple[int, int] | None = None
        #: (time.time_ns, bytes): resident memory the profiler's own first uses of FlopCounterMode and
        #: torch.profiler left behind (the modules they import), cumulative, each from that time on.
        self.tool_rss: list[tuple[int, int]] = []
        #: Called right before the torch.profiler window starts (on CUDA: a synchronize of the
        #: model's GPU, so work queued before the window does not run inside its wall time
        #: without its kernels being captured, which would read as an idle, host-bound GPU).
        self.before_window: Callable[[], Any] | None = None
        #: Called once the window is closed and exported (the memory snapshot is dumped there).
        self.after_window: Callable[[], Any] | None = None

    def kind(self, step: int) -> str:
        """What ran during ``step``: "warmup", "flops", "trace", "settle" or plain "measured".

        "settle" is the step right after the torch.profiler window: it still pays for the trace's
        teardown (and, under DDP, waits in all-reduce for ranks still exporting theirs).
        """
        kind = self._kinds.get(step)
        if kind is not None:
            return kind
        if self._kinds.get(step - 1) == "trace" and self._trace_steps_done >= self.profile_steps:
            return "settle"
        return "warmup" if step <= self.warmup_steps else "measured"

    def renumber(self, dropped: int) -> None:
        """Steps 1..``dropped`` were merged into the current step: shift what is keyed by number."""
        self._kinds = {k - dropped: v for k, v in self._kinds.items() if k > dropped}
        if self._flops_step is not None and self._flops_step > dropped:
            self._flops_step -= dropped
        elif self._flops_step is not None and 0 < self._flops_step <= dropped and self._flop_counter is None:
            # FLOPs were counted over a step that is now part of step 1: a part of a real step.
            # Count them again over a whole step.
            self.flops_per_step, self._flops_step = None, None

    def begin(self, step: int, cuda: bool) -> bool:
        """Start what is due for ``step``; True when that was slow (the profiler's start)."""
        if step <= self.warmup_steps:
            return False
        if self.count_flops and self.flops_per_step is None and self._flops_step is None:
            try:
                self._warm_up("flops")
                counter = FlopCounter()
                counter.start()
                self.flops_ns = (time.time_ns(), time.time_ns())
                self._flop_counter, self._flops_step = counter, step
                self._kinds[step] = "flops"
                return True  # FlopCounterMode's first use imports a lot (about 1 s)
            except Exception as exc:
                self._flops_step = -1
                self.on_fault("FLOP counting", exc)
        if self.deep_profile and self._trace_steps_done < self.profile_steps:
            try:
                if self._deep is None:
                    self._warm_up("profiler", cuda)
                    self._deep = deep.DeepProfiler(cuda=cuda)
                    if self.before_window is not None:
                        self.before_window()
                    self.window_ns = (time.time_ns(), time.time_ns())
                    self._deep.start(step)
                self._kinds[step] = "trace"
                return True
            except Exception as exc:
                self._trace_steps_done = self.profile_steps
                self._deep = None
                self.on_fault("deep-profile window", exc)
        return False

    def _warm_up(self, what: str, cuda: bool = False) -> None:
        """First use of FlopCounterMode or torch.profiler on a tiny op: its imports, measured.

        Both import hundreds of modules on first use (80 MB of resident memory each, seen on torch
        2.13). Done here, outside the user's step, that memory is counted as the profiler's
        (``tool_rss``) instead of showing up in the training's peak and growth.
        """
        before = _rss_bytes()
        if what == "flops":  # its backward would reach the hooks on this thread: on a helper thread
            thread = threading.Thread(target=_quietly, args=(warm_up_flop_counter,), name="autotune-warm-up")
            thread.start()
            thread.join()
        else:  # Kineto must be initialized on the thread that profiles; no op here reaches the hooks
            _quietly(functools.partial(deep.warm_up_profiler, cuda))
        after = _rss_bytes()
        if before is not None and after is not None and after > before:
            total = (self.tool_rss[-1][1] if self.tool_rss else 0) + after - before
            self.tool_rss.append((time.time_ns(), total))

    def tool_rss_at(self, t_ns: int) -> int:
        """Resident bytes the profiler's own imports held at ``t_ns``."""
        held = 0
        for when, total in self.tool_rss:
            if when <= t_ns:
                held = total
        return held

    def end(self, step: int, run_dir: Path | None, rank: int, cuda: bool) -> bool:
        """Stop what ran during ``step``; True when that was slow (the trace's export)."""
        kind = self._kinds.get(step)
        if kind == "flops" and self._flop_counter is not None:
            counter, self._flop_counter = self._flop_counter, None
            total = counter.stop()
            if self.flops_ns is not None:
                self.flops_ns = (self.flops_ns[0], time.time_ns())
            if total is None:
                self.on_fault("FLOP counting", RuntimeError("FlopCounterMode counted nothing"))
            else:
                self.flops_per_step = int(total)
            return False
        if kind == "trace" and self._deep is not None:
            self._trace_steps_done += 1
            if self._trace_steps_done >= self.profile_steps:
                self.finish_trace(step, run_dir, rank, cuda)
                return True
            try:
                self._deep.next_step()
            except Exception as exc:
                self.on_fault("deep-profile window", exc)
        return False

    def abandon(self, last_step: int, run_dir: Path | None, rank: int, cuda: bool) -> None:
        """The region ended mid-instrumentation: drop a partial FLOP count, keep a partial trace."""
        if self._flop_counter is not None:
            counter, self._flop_counter = self._flop_counter, None
            counter.stop()
        if self._deep is not None:
            self.finish_trace(last_step, run_dir, rank, cuda)

    def finish_trace(self, last_step: int, run_dir: Path | None, rank: int, cuda: bool) -> None:
        """Stop torch.profiler, keep its top operators and window statistics, export its trace."""
        window, self._deep = self._deep, None
        if window is None:
            return
        try:
            prof = window.stop()
        except Exception as exc:
            self.on_fault("deep-profile window", exc)
            return
        try:
            self.top_ops = deep.top_ops(prof, cuda=cuda)
        except Exception as exc:
            self.on_fault("top operators", exc)
        try:
            first = window.first_step if window.first_step is not None else last_step
            self.window_stats = deep.window_stats(prof.events(), max(1, last_step - first + 1), cuda)
        except Exception as exc:
            self.on_fault("window statistics", exc)
        if run_dir is not None:
            try:
                stem = f"rank{rank}-steps{window.first_step}-{last_step}"
                out = deep.export_trace(prof, run_dir / "traces", stem, self.trace_cap_bytes)
                self.trace_files.append(str(out.relative_to(run_dir)))
            except Exception as exc:
                self.on_fault("trace export", exc)
        del prof
        # torch.profiler's events hold each other (parents and children): freed only by a full
        # collection, which would otherwise come in the middle of the measured steps, where the
        # window's megabytes read as a fall of the training's live memory
        gc.collect()
        release_freed_memory()
        if self.window_ns is not None:
            self.window_ns = (self.window_ns[0], time.time_ns())
        if self.after_window is not None:
            self.after_window()


def _rss_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:
        return None


def _quietly(work: Callable[[], Any]) -> None:
    """A warm-up that fails changes nothing: the real first use reports its own fault."""
    with contextlib.suppress(Exception):
        work()


def release_freed_memory() -> None:
    """Give memory freed by the profiler back to the OS (glibc ``malloc_trim``), so RSS shows training."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
