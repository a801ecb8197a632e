"""Where this process sits in a torchrun job, from the environment torchrun sets.

One reader for ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE``: outside torchrun
(or with a value that is not a whole number) each falls back to a single process's value, so a
stray variable never stops the user's training or the command line. Pure Python.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple


class LaunchEnv(NamedTuple):
    """A process's place in its job: its rank, the job's size, and the same on its node.

    >>> LaunchEnv.read({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"})
    LaunchEnv(rank=3, world_size=8, local_rank=1, local_world_size=4)
    >>> LaunchEnv.read({"WORLD_SIZE": "two"})
    LaunchEnv(rank=0, world_size=1, local_rank=0, local_world_size=1)
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None) -> LaunchEnv:
        """The variables in ``environ`` (this process's environment by default)."""
        env = os.environ if environ is None else environ
        values = []
        for name, default in zip(_VARIABLES, cls._field_defaults.values(), strict=True):
            try:
                values.append(int(env[name]))
            except (KeyError, ValueError):
                values.append(default)
        return cls(*values)


_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")

__all__ = ["LaunchEnv"]
