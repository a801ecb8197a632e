"""A study's bill worked out from its summary: what it cost and when its best configuration pays it back.

The figures and their definitions are :mod:`profilers.contract.study.bill`'s (the record every view reads);
the saving is the verdict's (:mod:`profilers.contract.study.verdict`). Pure Python.
"""

from __future__ import annotations

from profilers.contract.schema import TrialStatus
from profilers.contract.study.bill import DAYS_PER_MONTH, FULL_DAY_HOURS, StudyBill, device_hours
from profilers.contract.study.summary import TuningSummary
from profilers.contract.study.verdict import StudyVerdict, verdict_of


def saving_share(study: TuningSummary, verdict: StudyVerdict | None = None) -> float | None:
    """Share of the baseline's device-time per sample the best saves, when the verdict applies it.

    ``verdict``: the study's, when the caller already has it (else read or derived from ``study``).
    """
    verdict = verdict if verdict is not None else verdict_of(study)
    best, base = study.best, study.baseline
    if verdict.action != "apply" or best is None or base is None or not verdict.speedup:
        return None
    return 1.0 - (max(1, best.world_size) / max(1, base.world_size)) / verdict.speedup


def study_bill(
    study: TuningSummary,
    price_per_gpu_hour: float | None = None,
    price_source: str | None = None,
    usage_hours_per_day: float | None = None,
    verdict: StudyVerdict | None = None,
) -> StudyBill:
    """The bill of ``study`` at a price per device-hour (None: hours only) and the team's usage.

    ``verdict``: the study's, when the caller already has it (else read or derived from ``study``).
    """
    ran = [t for t in study.trials if t.status != TrialStatus.SKIPPED]
    trial_times = [device_hours(t.duration_s, t.world_size) for t in ran]
    base_devices = study.baseline.world_size if study.baseline is not None else 1
    again = [*study.anchors, *study.confirmations]
    best_devices = study.best.world_size if study.best is not None else base_devices
    again_times = [
        device_hours(c.duration_s, best_devices if c.role == "best" else base_devices) for c in again
    ]
    trial_hours = sum(h for h in trial_times if h is not None)
    again_hours = sum(h for h in again_times if h is not None)
    total = trial_hours + again_hours
    missing = sum(h is None for h in [*trial_times, *again_times])
    usd = total * price_per_gpu_hour if price_per_gpu_hour is not None else None
    share = saving_share(study, verdict)
    per_hour = share * base_devices if share is not None and share > 0 else None
    day = usage_hours_per_day or FULL_DAY_HOURS
    saving_day = per_hour * day * price_per_gpu_hour if per_hour and price_per_gpu_hour is not None else None
    payback_h = total / per_hour if per_hour else None
    payback_days = payback_h / usage_hours_per_day if payback_h is not None and usage_hours_per_day else None
    in_month = payback_h is not None and payback_h <= day * DAYS_PER_MONTH
    return StudyBill(
        device_hours=total,
        trials_device_hours=trial_hours,
        remeasure_device_hours=again_hours,
        processes=len(trial_times) + len(again_times),
        processes_without_time=missing,
        price_per_gpu_hour=price_per_gpu_hour,
        price_source=price_source if price_per_gpu_hour is not None else None,
        usd=usd,
        saving_share=share,
        saving_device_hours_per_hour=per_hour,
        usage_hours_per_day=usage_hours_per_day,
        saving_usd_per_day=saving_day,
        payback_training_hours=payback_h,
        payback_days=payback_days,
        pays_back_in_month=in_month,
    )
