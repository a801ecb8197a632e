"""What a study keeps of each trial: the ``Trial`` record, its statuses, and ``Infeasible``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from autotune.search.searchers import Observation
from autotune.search.space import Value
from profilers.contract.json_checks import JsonObject
from profilers.contract.lenient import read_fields
from profilers.contract.schema import STATUSES, TrialStatus

#: Statuses an ``Infeasible`` exception may carry.
INFEASIBLE_STATUSES = tuple(s for s in TrialStatus if s != TrialStatus.OK)


class Infeasible(Exception):
    """Raised by an objective for a configuration that cannot run (e.g. it runs out of memory).

    The trial is recorded with ``status`` ("infeasible" by default; the trial runner says "oom",
    "timeout", "diverged", "crashed", "skipped" or "busy") and ``reason`` as its error, the searcher learns
    to avoid the region (not from a "busy" one: the machine, not the configuration, failed it), and the
    study goes on. ``attrs`` (JSON values) are kept with the trial.
    """

    def __init__(
        self,
        reason: str,
        status: TrialStatus = TrialStatus.INFEASIBLE,
        attrs: Mapping[str, Any] | None = None,
        duration_s: float | None = None,
    ) -> None:
        if status not in INFEASIBLE_STATUSES:
            known = ", ".join(s.value for s in INFEASIBLE_STATUSES)
            raise ValueError(f"status must be one of {known}, got {status!r}")
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.attrs = dict(attrs or {})
        self.duration_s = duration_s  # the trial's own run, when the call did more (else its time)


@dataclass(frozen=True)
class Measured:
    """An objective's result with facts beside its metrics.

    ``metrics`` hold the objective (as a plain dict result would); ``attrs`` are JSON facts kept
    with the trial (its run directory, why it stopped...).
    """

    metrics: Mapping[str, float | None]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    #: The trial's own run in seconds, when the objective did more than run it (else the call's time).
    duration_s: float | None = None


@dataclass(frozen=True)
class Trial:
    """One finished trial.

    ``params`` are the configuration tried (empty for a baseline run with the user's own
    defaults); ``value`` is the objective (None unless ``status`` is "ok"); ``metrics`` everything
    numeric the objective returned (non-finite numbers stored as None); ``duration_s`` the
    wall-clock seconds of the call; ``error`` why a trial was not "ok"; ``attrs`` other JSON facts
    (the trial's run directory, the knob values the script really used, why it stopped).
    ``point``: where the searcher places the trial when ``params`` is not a point of the space
    (the baseline's values as the script reported them), or None.
    """

    id: int
    params: dict[str, Value]
    status: TrialStatus
    value: float | None
    metrics: dict[str, float | None]
    duration_s: float
    error: str | None = None
    attrs: JsonObject = field(default_factory=dict)
    point: dict[str, Value] | None = None

    @property
    def ok(self) -> bool:
        """Whether the trial produced an objective value."""
        return self.status == TrialStatus.OK

    @property
    def baseline(self) -> bool:
        """Whether this is a run with the user's own defaults (no parameter set)."""
        return not self.params

    def observation(self) -> Observation | None:
        """The trial as its searcher sees it (every status but "ok" counts as infeasible).

        A "skipped" trial whose ``attrs`` say ``impossible`` (a configuration that cannot exist,
        such as a batch split that does not divide) is told as impossible: no model learns from it.
        Nor from a "busy" one: its figures measured the machine's other processes, not the
        configuration (told as impossible too, so it is not proposed again in this study).

        None when the trial has no place in the space (a baseline whose values are unknown).
        """
        params = self.params or self.point
        if not params:
            return None
        impossible = self.status == TrialStatus.BUSY or (
            self.status == TrialStatus.SKIPPED and bool(self.attrs.get("impossible"))
        )
        return Observation(dict(params), self.value, self.ok, impossible)

    def to_dict(self) -> JsonObject:
        """A JSON-ready dict (``from_dict`` reads it back)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trial:
        """A trial from ``to_dict()`` output; ValueError if a field is missing or malformed."""
        try:
            trial = cls(
                id=int(data["id"]),
                params=dict(data["params"]),
                status=TrialStatus(data["status"]),
                value=None if data["value"] is None else float(data["value"]),
                metrics=dict(data["metrics"]),
                duration_s=float(data["duration_s"]),
                error=data.get("error"),
                attrs=dict(data.get("attrs") or {}),
                point=None if data.get("point") is None else dict(data["point"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed trial record ({type(exc).__name__}: {exc})") from None
        if trial.status not in STATUSES or (trial.ok and trial.value is None):
            raise ValueError(f"malformed trial record (status {trial.status!r}, value {trial.value!r})")
        return trial


@dataclass(frozen=True)
class StudyRecord:
    """A store's study line: what the study searched, and the caller's notes (``info``).

    Read leniently (a value of the wrong type keeps its default), so a study written by an older
    version still resumes or is shown; what the study compares is checked by ``Study`` itself.

    >>> StudyRecord.from_dict({"direction": "maximize", "seed": 7, "info": None}).seed
    7
    """

    space: JsonObject = field(default_factory=dict)  # Space.to_dict()
    direction: str | None = None
    objective: str | None = None
    searcher: str | None = None
    seed: int | None = None
    info: JsonObject = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StudyRecord:
        """The record in a store's study line (``TrialStorage.read``'s ``meta``)."""
        return cls(**read_fields(cls, data))
