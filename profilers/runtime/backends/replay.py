"""Recordings of a live backend, and a backend that plays them back (CPU-only tests, demos).

Recording format (gzip JSON Lines; plain JSON Lines is read too):

- line 1: ``{"format": "autotune-recording", "version": 1, "backend": "nvml" | "host",
  "devices": [DeviceInfo dicts], "meta": {...}}``
- then one :class:`~profilers.contract.records.DeviceSample` dict per line (all ``SAMPLE_FIELDS``), in the
  order they were taken. A reader ignores fields it does not know and fills missing ones with
  ``None``, so later versions may add fields.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import platform
import time
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from profilers.contract.json_checks import JsonObject
from profilers.contract.lenient import read_fields
from profilers.contract.records import SAMPLE_FIELDS, DeviceInfo, DeviceSample
from profilers.runtime.backends.base import Backend

FORMAT = "autotune-recording"
VERSION = 1

_DEVICE_FIELDS = tuple(f.name for f in dataclasses.fields(DeviceInfo))
_DEFAULT_PERIOD_NS = 100_000_000  # spacing assumed for a one-sample recording without meta["hz"]


def write_recording(
    path: str | os.PathLike[str],
    backend_name: str,
    devices: Iterable[DeviceInfo],
    samples: Iterable[DeviceSample],
    meta: Mapping[str, Any] | None = None,
) -> Path:
    """Write a recording (gzip JSON Lines) atomically and return its path.

    The gzip header carries no timestamp, so the same samples give the same bytes.
    """
    path = Path(path)
    header = {
        "format": FORMAT,
        "version": VERSION,
        "backend": backend_name,
        "devices": [dataclasses.asdict(d) for d in devices],
        "meta": dict(meta or {}),
    }
    lines = [json.dumps(header, separators=(",", ":"))]
    lines += [json.dumps(s.to_dict(), separators=(",", ":")) for s in samples]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        gz.write(data)
    tmp.replace(path)
    return path


def record(
    backend: Backend,
    seconds: float,
    hz: float,
    path: str | os.PathLike[str],
    meta: Mapping[str, Any] | None = None,
) -> Path:
    """Sample ``backend`` at ``hz`` for ``seconds`` (on a fixed schedule) and write a recording.

    ``meta`` is stored in the header next to ``hz``, ``seconds``, the platform and the time.
    """
    if seconds <= 0 or hz <= 0:
        raise ValueError(f"record() needs seconds > 0 and hz > 0, got seconds={seconds}, hz={hz}")
    period = 1.0 / hz
    n = max(1, round(seconds * hz))
    samples: list[DeviceSample] = []
    start = time.monotonic()
    for i in range(n):
        delay = start + i * period - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        samples.extend(backend.sample())
    full_meta: JsonObject = {
        "hz": hz,
        "seconds": seconds,
        "created_unix_s": int(time.time()),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    full_meta.update(meta or {})
    return write_recording(path, backend.name, backend.devices(), samples, full_meta)


def _read_lines(path: Path) -> list[str]:
    """The text lines of a recording, gzip or plain; one-line errors that name the file."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"replay recording not found: {path}") from None
    except IsADirectoryError:
        raise ValueError(f"replay recording is a directory, not a file: {path}") from None
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise ValueError(f"corrupt replay recording {path}: {type(exc).__name__}: {exc}") from None
    return [line for line in text.splitlines() if line.strip()]


@dataclasses.dataclass(frozen=True)
class RecordingHeader:
    """A recording's first line: what it is, the backend that sampled it, and its notes (``meta``)."""

    format: str | None = None  # FORMAT
    version: int | None = None  # VERSION
    backend: str = "unknown"  # the sampled backend's name
    meta: JsonObject = dataclasses.field(default_factory=dict)  # hz, seconds, platform, time…


def _parse(path: Path) -> tuple[RecordingHeader, list[DeviceInfo], list[DeviceSample]]:
    """Header, devices and samples of a recording; ``ValueError`` naming the file when it is bad."""
    lines = _read_lines(path)
    if not lines:
        raise ValueError(f"empty replay recording: {path}")
    try:
        header = json.loads(lines[0])
    except json.JSONDecodeError as exc:
        raise ValueError(f"not an autotune recording (line 1 is not JSON: {exc}): {path}") from None
    facts = RecordingHeader(**read_fields(RecordingHeader, header)) if isinstance(header, dict) else None
    if facts is None or facts.format != FORMAT:
        raise ValueError(f'not an autotune recording (line 1 lacks "format": "{FORMAT}"): {path}')
    if facts.version != VERSION:
        raise ValueError(f"unsupported recording version {facts.version!r} (want {VERSION}): {path}")
    try:
        devices = [
            DeviceInfo(**{k: v for k, v in d.items() if k in _DEVICE_FIELDS}) for d in header["devices"]
        ]
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"bad device list in recording header ({exc}): {path}") from None
    if not devices:
        raise ValueError(f"recording lists no devices: {path}")
    samples: list[DeviceSample] = []
    for n, line in enumerate(lines[1:], start=2):
        try:
            d = json.loads(line)
            samples.append(DeviceSample(**{k: d.get(k) for k in SAMPLE_FIELDS}))
            if not isinstance(d["t_ns"], int) or not isinstance(d["device_index"], int):
                raise TypeError("t_ns and device_index must be integers")
        except (json.JSONDecodeError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"corrupt replay recording {path}: line {n}: {exc}") from None
    return facts, devices, samples


class ReplayBackend(Backend):
    """Plays a recording made by :func:`record` as if its devices were sampled live.

    Each ``sample()`` returns the next recorded reading of every device, in ``devices()`` order.
    ``t_ns`` is rebased so that the first replayed reading is "now" (the time of the first
    ``sample()`` call) and later ones keep the recording's spacing, whatever the call rate. At the
    end it loops; each loop shifts ``t_ns`` by the recorded span plus one sampling period and
    ``energy_mj`` by the energy recorded over that span, so both keep increasing.

    ``backend_name`` and ``meta`` are the recording's header fields. Raises
    ``FileNotFoundError`` or ``ValueError`` (one line naming the file) for a missing or bad file.
    """

    name = "replay"

    def __init__(self, path: str | os.PathLike[str]):
        super().__init__()
        self.path = Path(path)
        header, devices, samples = _parse(self.path)
        self.backend_name: str = header.backend
        self.meta: JsonObject = header.meta
        self._devices = devices
        per_device: dict[int, list[DeviceSample]] = {d.index: [] for d in devices}
        kinds = {d.index: d.kind for d in devices}
        for s in samples:
            if kinds.get(s.device_index) != s.kind:
                raise ValueError(
                    f"sample of {s.kind} device {s.device_index} not in the header's devices: {self.path}"
                )
            per_device[s.device_index].append(s)
        rounds = min(len(v) for v in per_device.values())
        if rounds == 0:
            raise ValueError(f"recording has no samples for some device: {self.path}")
        # rounds[i] = the i-th reading of every device; extra readings of some device are dropped
        self._rounds = [[per_device[d.index][i] for d in devices] for i in range(rounds)]
        self._t0 = min(s.t_ns for s in self._rounds[0])
        last_t = min(s.t_ns for s in self._rounds[-1])  # a round's time is its first reading's
        hz = self.meta.get("hz")
        if rounds > 1:
            period = max(1, (last_t - self._t0) // (rounds - 1))
        else:
            period = int(1e9 / hz) if isinstance(hz, int | float) and hz > 0 else _DEFAULT_PERIOD_NS
        self._loop_ns = last_t - self._t0 + period
        self._loop_energy = [self._energy_per_loop(k) for k in range(len(devices))]
        self._pos = 0
        self._loops = 0
        self._now0: int | None = None
        self._last_t = [0] * len(devices)

    def _energy_per_loop(self, k: int) -> int:
        """Energy (mJ) one loop adds for device ``k``: first-to-last, plus one period's share."""
        energies: list[tuple[int, int]] = []
        for i, r in enumerate(self._rounds):
            e = r[k].energy_mj
            if e is not None:
                energies.append((i, e))
        if len(energies) < 2:
            return 0
        (i0, e0), (i1, e1) = energies[0], energies[-1]
        if e1 <= e0:
            return 0
        return e1 - e0 + round((e1 - e0) / (i1 - i0))

    def _read_locked(self) -> list[DeviceSample]:
        """The next recorded reading of each device, rebased to now."""
        if self._now0 is None:
            self._now0 = time.time_ns()
        shift = self._now0 - self._t0 + self._loops * self._loop_ns
        out: list[DeviceSample] = []
        for k, s in enumerate(self._rounds[self._pos]):
            t_ns = max(s.t_ns + shift, self._last_t[k] + 1)
            self._last_t[k] = t_ns
            changes: dict[str, Any] = {"t_ns": t_ns}
            if s.energy_mj is not None:
                changes["energy_mj"] = s.energy_mj + self._loops * self._loop_energy[k]
            out.append(s._replace(**changes))
        self._pos += 1
        if self._pos == len(self._rounds):
            self._pos = 0
            self._loops += 1
        return out
