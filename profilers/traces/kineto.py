"""torch.profiler (Kineto) traces: the error every trace reader raises.

The trace is streamed by :mod:`profilers.traces.stream` and analysed by :mod:`profilers.traces.gpu_time`
(one rank) and :mod:`profilers.traces.analysis` (a file or a folder of ranks).
"""

from __future__ import annotations


class TraceError(ValueError):
    """A file that is not a readable torch.profiler trace (the message is one line)."""


__all__ = ["TraceError"]
