"""A run's metadata (run.db's ``meta`` table), typed: who ran what, where and when.

The profiler writes it as the run starts (:meth:`profilers.runtime.store.RunStore.set_meta`); the
report's environment, the dashboard's clock and a killed run's rebuilt summary read it through
:meth:`RunMeta.parse`, leniently (:mod:`profilers.contract.lenient`): a run from an older version
lacks some keys.

>>> meta = RunMeta.parse({"name": "train", "command": ["train.py", "--lr", "0.1"], "world_size": 2,
...                       "options": {"max_steps": 50}, "backends": ["nvml", "host"]})
>>> meta.name, meta.command_line, meta.world_size, meta.max_steps, meta.backends
('train', 'train.py --lr 0.1', 2, 50, ('nvml', 'host'))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from profilers.contract.json_checks import JsonObject
from profilers.contract.lenient import integer, read_fields
from profilers.contract.schema import Params


@dataclass(frozen=True, slots=True)
class RunMeta:
    """What the run's ``meta`` table holds (every field None or empty when it was not written)."""

    name: str | None = None
    command: tuple[str, ...] = ()  # the script and its arguments
    cwd: str | None = None
    started_ns: int | None = None  # wall clock, ns since the epoch
    host: str | None = None
    world_size: int | None = None
    python: str | None = None  # its version
    backends: tuple[str, ...] = ()  # the sampling backends that ran
    job_id: str | None = None
    options: JsonObject = field(default_factory=dict)  # the profiler's options, as given
    params_used: Params = field(default_factory=dict)  # the tuning knobs its code read
    raw: JsonObject = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> RunMeta:
        """The table's JSON values (a command given as one string is one item)."""
        fields = read_fields(cls, data, skip=("command", "raw"))
        command = data.get("command")
        if isinstance(command, str):
            command = [command]
        elif not isinstance(command, list | tuple):
            command = []  # missing, or of another type: read as none
        return cls(command=tuple(str(c) for c in command), raw=dict(data), **fields)

    def to_json(self) -> JsonObject:
        """The table's values this record was parsed from, every key kept."""
        return dict(self.raw)

    @property
    def command_line(self) -> str | None:
        """The command as one line, or None."""
        return " ".join(self.command) or None

    @property
    def max_steps(self) -> int | None:
        """The step budget the run was given (``--max-steps``), or None."""
        return integer(self.options.get("max_steps"))


__all__ = ["RunMeta"]
