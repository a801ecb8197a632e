"""A study's configuration: what ``autotune tune`` was asked, stored in its run.db and read back.

:meth:`TuneConfig.to_info` writes what a resumed study needs; ``autotune tune --resume`` reads it
back through :meth:`TuneConfig.from_stored`, so a resumed study runs the same script the same way,
with the same search. A study stored by an older version lacks the later keys: each reads as what
that version did.

>>> stored = TuneConfig.from_stored({"searcher": "bayes", "seed": 3, "info": {
...     "settings": {"script": "train.py", "script_args": ["--lr", "0.1"]}, "n_trials": 8}})
>>> stored.settings.script_args, stored.searcher, stored.n_trials, stored.scoring.objective, stored.plan_prior
(('--lr', '0.1'), 'bayes', 8, 'throughput', False)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from autotune.search.records import StudyRecord
from autotune.search.registry import DEFAULT_SEARCHER
from autotune.search.space import Space
from autotune.search.storage import SqliteStorage
from autotune.tuner.objectives import Scoring
from autotune.tuner.trials import TrialSettings
from profilers.contract.json_checks import JsonObject, is_number
from profilers.contract.lenient import read_fields
from profilers.contract.schema import STORE_NAME


@dataclass(frozen=True)
class TuneConfig:
    """Everything a study needs besides its run directory.

    ``space`` None: built from the knobs the baseline reads, for the device kind it ran on
    (``device_kind`` is the fallback when its summary does not say). ``early_stop_ratio``: a trial whose
    throughput estimate falls below this share of the best (cost: above best / ratio) stops early
    (0 turns it off). ``loss_tolerance``: relative drift of the loss from the fp32 baseline's that
    makes a lower-precision trial "diverged" (0 turns the check off; NaN/inf always does).
    """

    settings: TrialSettings
    space: Space | None = None
    n_trials: int = 12
    searcher: str = DEFAULT_SEARCHER
    seed: int = 0
    scoring: Scoring = field(default_factory=Scoring)
    multi_objective: bool = False
    early_stop_ratio: float = 0.5
    loss_tolerance: float = 0.1
    device_kind: str = "cpu"
    layouts: bool = False  # a derived space tries ddp/fsdp over settings.distributed_world_size
    #: Rounds of re-measuring the best configuration against the baseline (autotune.tuner.confirm).
    confirm_rounds: int = 3
    #: The plan's predictions as the Bayesian search's prior mean (autotune.tuner.plan_prior).
    plan_prior: bool = True
    #: Trials of the search that run at once, each on devices of its own (autotune.tuner.running);
    #: 0: one, or as many as the Ray cluster holds with ``executor`` "ray".
    parallel: int = 1
    #: "local", or "ray": each trial a Ray task on the cluster at ``ray_address``
    #: (autotune.tuner.ray_executor).
    executor: str = "local"
    ray_address: str | None = None
    ray_resource: str | None = None
    ray_storage: str = "shipped"
    #: The baseline's configuration runs again before the first search trial and then before every
    #: ``anchor_every``-th one, in that trial's slot: the anchors each search ratio is taken against, and
    #: the between-process spread its interval carries (profilers.contract.study.spread); 0 turns it off.
    anchor_every: int = 4
    #: Hours a day the team trains, for the study's bill: when its saving pays it back (contract.study.bill).
    usage_hours_per_day: float | None = None

    def to_info(self) -> JsonObject:
        """What is stored with the study, so ``resume`` rebuilds it (:meth:`from_stored` reads it).

        Every field but those :data:`_NOT_IN_INFO` names, under its name, with the settings and the
        scoring's objective and price: a field added here is stored and read back with no more code.
        """
        stored = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NOT_IN_INFO}
        return {
            "settings": {**asdict(self.settings), "extra_env": dict(self.settings.extra_env)},
            "objective": self.scoring.objective,
            "price_per_gpu_hour": self.scoring.price_per_gpu_hour,
            **stored,
        }

    @classmethod
    def from_stored(
        cls, meta: Mapping[str, Any], objective: str | None = None, price_per_gpu_hour: float | None = None
    ) -> TuneConfig:
        """The study in a run.db's metadata, as :meth:`to_info` stored it.

        ``objective`` and ``price_per_gpu_hour``, when given, replace the stored ones (what
        ``autotune tune --resume`` was told now). ValueError (one line) when its settings are
        unreadable, or its scoring cannot be made. Read leniently: a key an older
        version did not store reads as what that version did (:data:`_BEFORE_STORED`), else as the
        default; a value of the wrong type as missing. What is not stored is the resumed run's: the
        space (the study record holds it), the device kind and the layouts.
        """
        study = StudyRecord.from_dict(meta)
        info = {**study.info, "searcher": study.searcher, "seed": study.seed}
        skip = tuple(name for name in _NOT_IN_INFO if name not in ("searcher", "seed"))
        read = {**_BEFORE_STORED, **read_fields(cls, info, skip=skip)}  # missing: as the older version did
        if read.get("n_trials", 1) < 1:
            del read["n_trials"]  # none asked for (a study made through the API): the default
        stored_objective = info.get("objective") if isinstance(info.get("objective"), str) else "throughput"
        stored_price = info.get("price_per_gpu_hour") if is_number(info.get("price_per_gpu_hour")) else None
        chosen = objective or stored_objective
        scoring = Scoring(chosen, price_per_gpu_hour or stored_price)  # type: ignore[arg-type]
        return cls(settings_from_info(study.info), scoring=scoring, **read)


#: The fields of a TuneConfig its stored info does not hold under their names: the settings and the
#: scoring (stored apart), the search and its seed (the study record's own), and what the resumed
#: run works out again (the space from the study record, the device kind, the layouts).
_NOT_IN_INFO = ("settings", "space", "scoring", "searcher", "seed", "device_kind", "layouts")

#: What a study stored before a setting was kept behaved as: no plan prior (studies before it had
#: none), trials one at a time (0: one, or what a Ray cluster holds).
_BEFORE_STORED: dict[str, bool | int] = {"plan_prior": False, "parallel": 0}


def settings_from_info(info: Mapping[str, Any]) -> TrialSettings:
    """The trial settings stored with a study (:meth:`TuneConfig.to_info`'s ``settings``)."""
    stored = info.get("settings")
    fields = dict(stored) if isinstance(stored, Mapping) else {}
    fields["script_args"] = tuple(fields.get("script_args") or ())
    try:
        return TrialSettings(**fields)
    except TypeError as exc:
        raise ValueError(f"the stored study's settings are unreadable ({exc})") from None


def stored_config(
    run_dir: Path, objective: str | None = None, price_per_gpu_hour: float | None = None
) -> TuneConfig | None:
    """The study stored in ``run_dir`` (None when it holds none; ValueError when unreadable).

    ``objective`` and ``price_per_gpu_hour``: as given now, in place of the stored ones.
    """
    store = run_dir / STORE_NAME
    if not store.exists():
        return None
    meta, _ = SqliteStorage(store).read()
    return None if meta is None else TuneConfig.from_stored(meta, objective, price_per_gpu_hour)


__all__ = ["TuneConfig", "settings_from_info", "stored_config"]
