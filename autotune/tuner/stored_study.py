"""What a study keeps in its run.db to be resumed, typed: its trial settings and how it searched.

:meth:`autotune.tuner.tune.TuneConfig.info` writes it; ``autotune tune --resume`` reads it back
through :meth:`StoredStudy.of`, so a resumed study runs the same script the same way. A study stored
by an older version lacks the later keys: each reads as the default that version had.

>>> stored = StoredStudy.of({"searcher": "bayes", "seed": 3, "info": {
...     "settings": {"script": "train.py", "script_args": ["--lr", "0.1"]}, "n_trials": 8}})
>>> stored.settings.script_args, stored.searcher, stored.n_trials, stored.objective, stored.plan_prior
(('--lr', '0.1'), 'bayes', 8, 'throughput', False)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autotune.search.records import StudyRecord
from autotune.tuner.trials import TrialSettings
from profilers.contract.lenient import read_fields


@dataclass(frozen=True, slots=True)
class StoredStudy:
    """A stored study's settings (see the module's doc)."""

    settings: TrialSettings
    searcher: str | None = None
    seed: int = 0
    objective: str = "throughput"
    n_trials: int | None = None  # None: the CLI's default
    price_per_gpu_hour: float | None = None
    multi_objective: bool = False
    early_stop_ratio: float = 0.5
    loss_tolerance: float = 0.1
    confirm_rounds: int = 3
    plan_prior: bool = False  # studies from before the prior had none
    parallel: int = 0  # 0: one at a time, or what a Ray cluster holds
    executor: str = "local"
    ray_address: str | None = None
    ray_resource: str | None = None
    ray_storage: str = "shipped"
    anchor_every: int = 4  # studies from before the anchors run them from their resume on
    usage_hours_per_day: float | None = None

    @classmethod
    def of(cls, meta: Mapping[str, Any]) -> StoredStudy:
        """The study in a run.db's metadata (ValueError, one line, when its settings are unreadable)."""
        study = StudyRecord.from_dict(meta)
        searched = {"searcher": study.searcher, "seed": study.seed}
        fields = read_fields(cls, {**study.info, **searched}, skip=("settings",))
        return cls(settings_from_info(study.info), **fields)


def settings_from_info(info: Mapping[str, Any]) -> TrialSettings:
    """The trial settings stored with a study (``TuneConfig.info``'s ``settings``)."""
    stored = info.get("settings")
    fields = dict(stored) if isinstance(stored, Mapping) else {}
    fields["script_args"] = tuple(fields.get("script_args") or ())
    try:
        return TrialSettings(**fields)
    except TypeError as exc:
        raise ValueError(f"the stored study's settings are unreadable ({exc})") from None


__all__ = ["StoredStudy", "settings_from_info"]
