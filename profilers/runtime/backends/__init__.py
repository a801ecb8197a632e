"""Sampling backends, and :func:`get_backend`, the one place where a backend is picked.

Backend specs (argument of :func:`get_backend` or the ``AUTOTUNE_BACKEND`` environment variable):

- ``"nvml"``: every GPU NVML sees; ``"nvml:0,2"``: those NVML indices only.
- ``"host"``: this machine's CPU and RAM.
- ``"replay:/path/to/recording.jsonl.gz"``: play a recording (see ``profilers.runtime.backends.replay``).

With no spec: NVML when it initialises and sees a GPU, else host. An explicit spec that cannot
be honoured raises (``NvmlUnavailable``, ``FileNotFoundError``, ``ValueError``) rather than
falling back silently.

Importing this package is cheap: ``pynvml`` is imported by ``libnvml`` on first use, the
backends when first picked.
"""

from __future__ import annotations

import os
import threading

from profilers.runtime.backends.base import Backend

__all__ = [
    "ENV_VAR",
    "Backend",
    "backend_for_process",
    "describe_unavailable",
    "get_backend",
    "reset_backend",
]

#: Environment variable holding a backend spec, used when get_backend() gets none.
ENV_VAR = "AUTOTUNE_BACKEND"
_AUTO = "auto"

_lock = threading.RLock()
_cache: dict[str, Backend] = {}
_unavailable: str | None = None  # why auto-selection did not pick NVML
_auto_done = False


def _make(spec: str, pid: int | None = None, exclude: frozenset[int] = frozenset()) -> Backend:
    """Build the backend a spec names (no fallback), reading process ``pid`` (None: this one)."""
    kind, _, arg = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "host" and not arg:
        from profilers.runtime.backends.host import HostBackend

        return HostBackend(pid, exclude)
    if kind == "nvml":
        from profilers.runtime.backends.nvml import NvmlBackend

        if not arg.strip():
            return NvmlBackend(pid=pid)
        try:
            indices = [int(x) for x in arg.split(",")]
        except ValueError:
            raise ValueError(f"bad backend spec {spec!r}: want nvml:INDEX[,INDEX...]") from None
        return NvmlBackend(device_indices=indices, pid=pid)
    if kind == "replay":
        if not arg.strip():
            raise ValueError(f"bad backend spec {spec!r}: want replay:/path/to/recording.jsonl.gz")
        from profilers.runtime.backends.replay import ReplayBackend

        return ReplayBackend(arg.strip())
    raise ValueError(
        f"unknown backend {spec!r}: use nvml, nvml:0,1, host or replay:/path/to/recording.jsonl.gz"
    )


def _auto() -> Backend:
    """NVML when it initialises and sees at least one GPU, else the host backend."""
    global _unavailable, _auto_done
    from profilers.runtime.backends import libnvml

    try:
        from profilers.runtime.backends.nvml import NvmlBackend

        backend: Backend = NvmlBackend()
        _unavailable = None
    except libnvml.NvmlUnavailable as exc:
        from profilers.runtime.backends.host import HostBackend

        _unavailable = str(exc)
        backend = HostBackend()
    _auto_done = True
    return backend


def get_backend(name: str | None = None) -> Backend:
    """The backend for ``name`` (a spec, see the module docstring), created once and cached.

    ``None`` uses ``$AUTOTUNE_BACKEND`` when set, else picks automatically (NVML, else host).
    Thread-safe; every caller asking for the same spec gets the same object.
    """
    spec = name if name is not None else os.environ.get(ENV_VAR, "").strip() or _AUTO
    spec = spec.strip()
    with _lock:
        backend = _cache.get(spec)
        if backend is None:
            backend = _auto() if spec == _AUTO else _make(spec)
            backend.spec = backend.name if spec == _AUTO else spec  # auto: "nvml" or "host"
            _cache[spec] = backend
        return backend


def backend_for_process(spec: str, pid: int, exclude_children: frozenset[int] = frozenset()) -> Backend:
    """A new backend for ``spec`` reading process ``pid``'s share from another process.

    ``spec`` is as :func:`get_backend` takes it, not "auto"; the share is ``pid``'s CPU, RSS and GPU
    memory; ``exclude_children`` are children of ``pid`` left out of its CPU time (the sampler
    process reading it).
    """
    backend = _make(spec, pid, exclude_children)
    backend.spec = spec
    return backend


def describe_unavailable() -> str | None:
    """The one-line reason NVML was not picked automatically, or ``None``.

    ``None`` when NVML was picked, or when a spec (argument or ``$AUTOTUNE_BACKEND``) chose the
    backend so NVML was never tried. Runs the automatic choice first if nothing was picked yet.
    """
    with _lock:
        if not _cache and not _auto_done:
            try:
                get_backend()
            except (ValueError, OSError, RuntimeError):
                return None  # a bad $AUTOTUNE_BACKEND: get_backend() reports that itself
        return _unavailable


def reset_backend() -> None:
    """Close and forget every cached backend, and shut NVML down (for tests).

    The next :func:`get_backend` picks again and re-imports ``pynvml`` (so a test can inject a
    fake one into ``sys.modules``).
    """
    global _unavailable, _auto_done
    from profilers.runtime.backends import libnvml

    with _lock:
        backends = list(_cache.values())
        _cache.clear()
        _unavailable = None
        _auto_done = False
        for backend in backends:
            backend.close()
        libnvml.reset()
