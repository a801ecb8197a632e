"""The JSON report: the same sections as the HTML and Markdown ones, for a CI pipeline."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from autotune.report.sections import SECTION_TITLES, Report
from profilers.contract.json_checks import JsonObject
from profilers.contract.plan_doc import PlanDocument

#: Version of the JSON report's layout. Later versions add keys, never rename them.
REPORT_SCHEMA = 1


def clean_json(value: Any) -> Any:
    """JSON has no NaN or infinity: they become null; tuples become lists; keys become strings."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    return value


def plan_json(plan: PlanDocument) -> JsonObject:
    """The report's ``plan`` section: the plan's record, and what this section has always held beside it.

    ``suggestion_text``, ``calibration_note``, ``cpu`` and ``cpu_memory`` (this CPU's calibration
    checked: ``held_out`` rows of ``predicted`` and ``measured``) keep their keys: a later version
    adds keys, never renames them.
    """
    out = dataclasses.asdict(plan)
    out["suggestion_text"] = plan.suggestion_text
    out["calibration_note"] = plan.calibration_note
    out["cpu"] = None if plan.cpu is None else dataclasses.asdict(plan.cpu)
    out["cpu_memory"] = None if plan.cpu_memory is None else dataclasses.asdict(plan.cpu_memory)
    return out


def report_dict(report: Report) -> JsonObject:
    """The report as plain JSON-ready data: ``schema``, ``title``, then every section (or null)."""
    out: JsonObject = {"schema": REPORT_SCHEMA, "kind": "report", "title": report.title}
    out["generated_at"] = report.generated_at
    for key in SECTION_TITLES:
        section = getattr(report, key)
        if isinstance(section, PlanDocument):
            out[key] = plan_json(section)
        else:
            out[key] = None if section is None else dataclasses.asdict(section)
    out["missing"] = dict(report.missing)
    cleaned: JsonObject = clean_json(out)
    return cleaned


def render_json(report: Report) -> str:
    """The report as a JSON document (strict: no NaN)."""
    return json.dumps(report_dict(report), indent=2, allow_nan=False) + "\n"
