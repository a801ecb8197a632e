"""One profiling region opened and closed by a framework's callbacks, with the framework's steps."""

from __future__ import annotations

import atexit
import sys
from typing import Any

from autotune.api import Profile, profile, step
from profilers.contract.json_checks import JsonObject


class CallbackRegion:
    """A profile from the framework's "training begins" to its "training ends", a step per global step.

    It also ends at exit, when the framework never says "training ends" after an error. A pickle or
    a copy of the callback travels without the open profile.
    """

    def __init__(self, default_name: str, options: dict[str, Any]) -> None:
        options.setdefault("name", default_name)
        self.options = options
        self.profile: Profile | None = None
        self.last_global_step: int | None = None
        self.run_dir: Any = None
        self.summary: JsonObject | None = None

    def begin(self, global_step: int) -> None:
        """Start the profile (once); ``global_step`` is where the framework starts counting."""
        if self.profile is not None:
            return
        self.profile = profile(**self.options)  # bad options raise here, before training starts
        self.profile.__enter__()
        self.last_global_step = global_step
        atexit.register(self.end)

    def at_global_step(self, global_step: int) -> None:
        """The framework's step counter now reads ``global_step``: a step ended if it moved."""
        if self.profile is None or self.last_global_step is None or global_step == self.last_global_step:
            return
        self.last_global_step = global_step
        step()

    def end(self) -> None:
        """Stop the profile and save the run (once)."""
        if self.profile is None:
            return
        prof, self.profile = self.profile, None
        atexit.unregister(self.end)
        prof.__exit__(None, None, None)
        self.run_dir, self.summary = prof.run_dir, prof.summary
        if self.run_dir is not None and not self.options.get("quiet"):
            where = self.run_dir
            print(f"autotune: profile saved to {where} (autotune report {where})", file=sys.stderr)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "profile": None}


class RegionResult:
    """What a profiling callback shows once training has ended."""

    region: CallbackRegion

    @property
    def run_dir(self) -> Any:
        """The run directory once training has ended (None before, or if it could not be written)."""
        return self.region.run_dir

    @property
    def summary(self) -> JsonObject | None:
        """The run's summary.json once training has ended."""
        return self.region.summary
