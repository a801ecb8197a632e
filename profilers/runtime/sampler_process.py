"""The sampler process: device and host sampling, and their rows in the run store, off the training.

Sampling NVML and ``/proc`` ten times a second and writing the rows to SQLite takes the interpreter
lock; on a host-bound CUDA loop every microsecond of it is GPU time lost (the convoy effect,
python/cpython#90204). So the recorder hands its backends to a process of its own, as DCGM and
Zeus's ``PowerMonitor`` sample outside the job. Spawned (a new interpreter, never forked from a
process that may hold CUDA; at a lower priority), it builds each backend again from its spec for
the training process's pid (:func:`~profilers.runtime.backends.backend_for_process`), takes over
those whose devices match the training process's own exactly, and writes their samples to run.db
itself. A backend it cannot build the same (a GPU it does not see) stays sampled in the training
process.

The protocol is JSON lines: the parent passes its configuration as the one argument; the child
answers ``{"ready": {"took": [...], "left": {spec: why}}}`` and waits for ``{"go": true, "keep":
[...]}`` (the parent stops sampling those backends first: no reading is taken twice; ``keep``: the
job's GPUs); then says ``{"wrote": n}`` at each write. ``{"keep": [...]}`` narrows the GPUs
sampled, and ``{"stop": true}`` (or the parent's end: its stdin closes) takes a last sample, writes
everything and exits. A child that cannot start, dies, or falls silent is the recorder's to notice:
it samples in the training process again and the summary says from when.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TypedDict, cast

from profilers.contract.records import DeviceSample
from profilers.runtime.backends import backend_for_process
from profilers.runtime.backends.base import Backend
from profilers.runtime.store import RunStore

#: ``AUTOTUNE_SAMPLER=thread`` keeps sampling in the training process (the recorder thread).
ENV_VAR = "AUTOTUNE_SAMPLER"
#: Seconds the child may take to answer ``ready`` before the parent gives up on it.
READY_TIMEOUT_S = 30.0
#: Seconds the parent waits at ``stop`` for the child's last rows.
STOP_TIMEOUT_S = 10.0
#: Seconds between the child's writes to the run store (each one said to the parent).
FLUSH_INTERVAL_S = 1.0
#: Seconds without a word from the sampling child after which the parent takes sampling back.
SILENCE_TIMEOUT_S = 30.0
#: The child's scheduling niceness above the training process's.
NICENESS = 10


#: The child's first lines: below the training in the scheduler's eyes before its imports, so that
#: on a machine with no core to spare (a 2-core VM, every core a trial's) its start-up and its
#: readings wait for idle time rather than stall the training's steps.
_CHILD_START = f"""
import contextlib, os, sys
with contextlib.suppress(OSError):
    os.nice({NICENESS})
sys.path[0] = sys.argv[2]  # this project's root, not the working directory's packages
from profilers.runtime.sampler_process import main
sys.exit(main(sys.argv))
"""


class SamplerConfig(TypedDict):
    """What the child is started with (its first argument, as JSON)."""

    store: str  # the run store it writes its rows to
    rank: int
    hz: float
    pid: int  # the training process
    backends: dict[str, list[dict[str, object]]]  # backend spec -> its devices as the parent sees them


class ReadyNews(TypedDict):
    """The child's first line: the backends it took over, and why it left each other one."""

    took: list[str]
    left: dict[str, str]


class Message(TypedDict, total=False):
    """One JSON line between the two processes; each holds one of these keys.

    To the child: ``go`` (start sampling, only GPUs ``keep``: None for all), ``keep`` alone (the
    job's GPUs changed), ``stop``. From the child: ``ready``, ``wrote`` (rows so far: it goes on),
    ``stopped`` (its last rows are written), ``error`` (it failed; the parent samples again).
    """

    go: bool
    keep: list[int] | None
    stop: bool
    ready: ReadyNews
    wrote: int
    stopped: dict[str, int]
    error: str


def child_sampling_wanted() -> bool:
    """Whether sampling may move to a child process (``AUTOTUNE_SAMPLER`` is not ``thread``)."""
    return os.environ.get(ENV_VAR, "").strip().lower() != "thread"


def json_lines(buffer: bytes) -> tuple[list[Message], bytes]:
    """The whole lines of ``buffer`` that are JSON objects (messages), and what follows the last newline."""
    *lines, rest = buffer.split(b"\n")
    out: list[Message] = []
    for line in lines:
        with contextlib.suppress(ValueError):
            message = json.loads(line)
            if isinstance(message, dict):
                out.append(cast(Message, message))  # the other side is this module: the same keys
    return out, rest


class SamplerProcess:
    """The training process's handle on its sampler process (every call is non-blocking but ``stop``)."""

    def __init__(self, store_path: Path, rank: int, sample_hz: float, backends: Sequence[Backend]) -> None:
        self.config: SamplerConfig = {
            "store": str(store_path),
            "rank": rank,
            "hz": sample_hz,
            "pid": os.getpid(),
            "backends": {b.spec: [asdict(d) for d in b.devices()] for b in backends if b.spec},
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self.started_ns = 0
        self.go_ns: int | None = None  # when the child took over

    def start(self) -> None:
        """Spawn the child (raises OSError when it cannot be)."""
        root = str(Path(__file__).resolve().parents[2])  # where the profilers package lives
        self.started_ns = time.time_ns()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD_START, json.dumps(self.config), root],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # the terminal's Ctrl-C and torchrun's group signals are the parent's
        )
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), False)

    @property
    def pid(self) -> int | None:
        """The child's pid once spawned."""
        return self.proc.pid if self.proc is not None else None

    def exit_code(self) -> int | None:
        """The child's exit code once it has ended, else None."""
        return self.proc.poll() if self.proc is not None else None

    def messages(self) -> list[Message]:
        """The child's messages that arrived since the last call."""
        if self.proc is None or self.proc.stdout is None:
            return []
        with contextlib.suppress(BlockingIOError, OSError, ValueError):
            while chunk := os.read(self.proc.stdout.fileno(), 65536):
                self._buffer += chunk
        out, self._buffer = json_lines(self._buffer)
        return out

    def send(self, message: Message) -> bool:
        """Send a message; False when the child cannot take it (it has ended)."""
        if self.proc is None or self.proc.stdin is None:
            return False
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):
            return False
        return True

    def kill(self) -> None:
        """End the child now and reap it (it stopped answering, or has nothing to write)."""
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            self.proc.wait()

    def go(self, keep: list[int] | None) -> bool:
        """Tell the ready child to start sampling what it took, only GPUs ``keep`` (None: all)."""
        self.go_ns = time.time_ns()
        return self.send({"go": True, "keep": keep})

    def stop(self) -> bool:
        """Ask for a last sample and the last rows; wait for the child to end. True if it ended well.

        A child that never took over is ended at once: it has nothing to write.
        """
        proc = self.proc
        if proc is None:
            return False
        if self.go_ns is None:
            self.kill()
            return False
        self.send({"stop": True})
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            return proc.wait(timeout=STOP_TIMEOUT_S) == 0
        except subprocess.TimeoutExpired:
            self.kill()
            return False


# -- the child --------------------------------------------------------------------------------------
def _say(message: Message) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _build(config: SamplerConfig) -> tuple[dict[str, Backend], dict[str, str]]:
    """The backends whose devices match the parent's, by spec, and why each other one was left."""
    took: dict[str, Backend] = {}
    left: dict[str, str] = {}
    for spec, devices in config["backends"].items():
        try:
            backend = backend_for_process(spec, config["pid"], frozenset({os.getpid()}))
        except Exception as exc:
            left[spec] = f"{type(exc).__name__}: {exc}"
            continue
        mine = [asdict(d) for d in backend.devices()]
        if mine != devices:
            backend.close()
            left[spec] = "it sees other devices than the training process"
            continue
        took[spec] = backend
    return took, left


class _Commands:
    """The parent's JSON lines on a file descriptor, read without blocking past a timeout."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = b""
        self.closed = False

    def wait(self, timeout_s: float) -> list[Message]:
        """The messages that arrive within ``timeout_s`` ([] for none; ``closed`` once the pipe is)."""
        if self.closed:
            return []
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout_s))
        if ready:
            chunk = os.read(self.fd, 65536)
            if not chunk:
                self.closed = True
            self._buffer += chunk
        out, self._buffer = json_lines(self._buffer)
        return out


def child_main(config: SamplerConfig) -> int:
    """Sample the backends taken over until told to stop; write their rows to the run store."""
    commands = _Commands(sys.stdin.fileno())
    took, left = _build(config)
    backends = list(took.values())
    _say({"ready": {"took": list(took), "left": left}})
    if not backends:
        return 0
    parent = int(config["pid"])
    keep: frozenset[int] | None = None
    later: list[Message] = []  # what came after "go" in its read: for the sampling loop
    while True:  # wait for the parent to stop sampling them itself
        messages = commands.wait(1.0)
        if commands.closed or os.getppid() != parent or any(m.get("stop") for m in messages):
            return 0
        at = next((i for i, m in enumerate(messages) if m.get("go")), None)
        if at is not None:
            go, later = messages[at], messages[at + 1 :]
            break
    first_keep = go.get("keep")
    if first_keep is not None:  # the job's GPUs, as the parent knows them at the handover
        keep = frozenset(int(i) for i in first_keep)
    store = RunStore(Path(config["store"]), rank=int(config["rank"]))
    period_s = 1.0 / float(config["hz"])
    pending: list[DeviceSample] = []
    written = 0

    def sample() -> None:
        for backend in backends:
            readings = backend.sample()
            if keep is not None:
                readings = [r for r in readings if r.kind != "gpu" or r.device_index in keep]
            pending.extend(readings)

    def flush() -> None:
        nonlocal written
        store.add_samples(pending)
        written += len(pending)
        pending.clear()
        _say({"wrote": written})  # the parent's sign that sampling goes on

    next_sample = time.monotonic()
    next_flush = next_sample + FLUSH_INTERVAL_S
    while True:
        now = time.monotonic()
        if now >= next_sample:
            sample()
            next_sample += period_s
            if next_sample < now:  # fell behind: do not burst
                next_sample = now + period_s
        if now >= next_flush:
            flush()
            next_flush = now + FLUSH_INTERVAL_S
        messages, later = later + commands.wait(min(next_sample, next_flush) - time.monotonic()), []
        # Its pipe closes when the training process ends, unless a process it forked holds it
        if commands.closed or os.getppid() != parent or any(m.get("stop") for m in messages):
            break
        for message in messages:
            if "keep" in message:
                keep = None if message["keep"] is None else frozenset(int(i) for i in message["keep"])
                pending[:] = [r for r in pending if r.kind != "gpu" or keep is None or r.device_index in keep]
                if keep is not None:
                    store.delete_gpu_samples(sorted(keep))
    sample()
    flush()
    store.close()
    for backend in backends:
        backend.close()
    _say({"stopped": {"samples": written}})
    return 0


def main(argv: Sequence[str]) -> int:
    # The training process ends this one (its message, or its end closing the pipe); a Ctrl-C
    # meant for the training must not cut its last rows short.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return child_main(json.loads(argv[1]))
    except Exception as exc:  # the parent reads this line and samples in its own process again
        with contextlib.suppress(Exception):
            _say({"error": f"{type(exc).__name__}: {exc}"})
        return 1


__all__ = ["ENV_VAR", "SamplerProcess", "child_main", "child_sampling_wanted"]
