"""NVTX ranges for steps and phases, so Nsight Systems shows them. The only import of ``nvtx``.

Without the ``nvtx`` package, or when it fails, every call is a no-op. Ranges are start/end
ranges (not push/pop), since a step begins in one hook and ends in another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from profilers.runtime.timeline import (
    BWD_B,
    BWD_E,
    DATA_B,
    DATA_E,
    EVAL_B,
    EVAL_E,
    FWD_B,
    FWD_E,
    OPT_B,
    OPT_E,
)

_PHASE_OF = {DATA_B: "data", FWD_B: "forward", BWD_B: "backward", OPT_B: "optimizer", EVAL_B: "eval"}
_END_OF = {DATA_E: DATA_B, FWD_E: FWD_B, BWD_E: BWD_B, OPT_E: OPT_B, EVAL_E: EVAL_B}
_COLORS = {"data": "yellow", "forward": "green", "backward": "blue", "optimizer": "purple", "eval": "cyan"}
DOMAIN = "autotune"


def nvtx_available() -> bool:
    """Whether the nvtx package imports."""
    try:
        import nvtx  # noqa: F401
    except Exception:
        return False
    return True


class NvtxRanges:
    """Start/end NVTX ranges in the "autotune" domain. Faults go to ``on_fault`` once."""

    def __init__(self, on_fault: Callable[[str, BaseException], None]) -> None:
        import nvtx

        self._nvtx = nvtx
        self._domain = nvtx.get_domain(DOMAIN)
        self._on_fault = on_fault
        self._step_range: Any = None
        self._open: dict[int, Any] = {}
        self._attrs: dict[str, Any] = {
            name: self._domain.get_event_attributes(message=name, color=color)
            for name, color in _COLORS.items()
        }
        self.enabled = True

    def _fail(self, exc: BaseException) -> None:
        self.enabled = False
        self._on_fault("NVTX ranges", exc)

    def step_begin(self, index: int) -> None:
        """End the previous step's range and start step ``index``'s."""
        if not self.enabled:
            return
        try:
            if self._step_range is not None:
                self._domain.end_range(self._step_range)
            attrs = self._domain.get_event_attributes(message=f"step {index}", color="red")
            self._step_range = self._domain.start_range(attrs)
        except Exception as exc:
            self._fail(exc)

    def phase_begin(self, code: int) -> None:
        """Start the range of the phase that ``code`` begins."""
        if not self.enabled or code not in _PHASE_OF:
            return
        try:
            self._open[code] = self._domain.start_range(self._attrs[_PHASE_OF[code]])
        except Exception as exc:
            self._fail(exc)

    def phase_end(self, code: int) -> None:
        """End the range of the phase that ``code`` ends."""
        if not self.enabled:
            return
        try:
            handle = self._open.pop(_END_OF.get(code, -1), None)
            if handle is not None:
                self._domain.end_range(handle)
        except Exception as exc:
            self._fail(exc)

    def close(self) -> None:
        """End every open range."""
        if not self.enabled:
            return
        try:
            for handle in self._open.values():
                self._domain.end_range(handle)
            self._open.clear()
            if self._step_range is not None:
                self._domain.end_range(self._step_range)
                self._step_range = None
        except Exception as exc:
            self._fail(exc)
