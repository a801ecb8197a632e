"""What a study keeps in its run.db to be resumed, typed: its trial settings and how it searched.

:meth:`autotune.tuner.tune.TuneConfig.info` writes it; ``autotune tune --resume`` reads it back
through :meth:`StoredStudy.of`, so a resumed study runs the same script the same way. A study stored
by an older version lacks the later keys: each reads as the default that version had.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autotune.tuner.trials import TrialSettings


def _number(value: Any, default: float) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True, slots=True)
class StoredStudy:
    """A stored study's settings (see the module's doc)."""

    settings: TrialSettings
    searcher: str | None
    seed: int
    objective: str
    n_trials: int | None
    price_per_gpu_hour: float | None
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

    @classmethod
    def of(cls, meta: Mapping[str, Any]) -> StoredStudy:
        """The study in a run.db's metadata (ValueError, one line, when its settings are unreadable)."""
        info = meta.get("info")
        info = info if isinstance(info, Mapping) else {}
        price = info.get("price_per_gpu_hour")
        trials = info.get("n_trials")
        return cls(
            settings=settings_from_info(info),
            searcher=_text(meta.get("searcher")),
            seed=int(_number(meta.get("seed"), 0)),
            objective=_text(info.get("objective")) or "throughput",
            n_trials=int(trials) if isinstance(trials, int) and trials > 0 else None,
            price_per_gpu_hour=_number(price, 0.0) if price is not None else None,
            multi_objective=info.get("multi_objective") is True,
            early_stop_ratio=_number(info.get("early_stop_ratio"), 0.5),
            loss_tolerance=_number(info.get("loss_tolerance"), 0.1),
            confirm_rounds=int(_number(info.get("confirm_rounds"), 3)),
            plan_prior=info.get("plan_prior") is True,
            parallel=int(_number(info.get("parallel"), 0)),
            executor=_text(info.get("executor")) or "local",
            ray_address=_text(info.get("ray_address")),
            ray_resource=_text(info.get("ray_resource")),
            ray_storage=_text(info.get("ray_storage")) or "shipped",
        )


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
