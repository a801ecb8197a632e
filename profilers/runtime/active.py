"""The profiling session running in this process, if any.

Torch-free, so that the knobs (which the tuner's own process reads) can ask without importing the
session, and torch with it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from profilers.runtime.session import Session

_ACTIVE: Session | None = None
_ACTIVE_LOCK = threading.Lock()


def active_session() -> Session | None:
    """The session running in this process, if any."""
    return _ACTIVE


def claim(session: Session) -> None:
    """Make ``session`` the active one; RuntimeError when another is active already."""
    global _ACTIVE
    with _ACTIVE_LOCK:
        if _ACTIVE is not None:
            raise RuntimeError("an autotune profile is already active in this process")
        _ACTIVE = session


def release() -> None:
    """No session is active any more."""
    global _ACTIVE
    with _ACTIVE_LOCK:
        _ACTIVE = None
