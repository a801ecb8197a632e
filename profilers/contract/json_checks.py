"""Reading one field of a summary.json object, checked: a wrong type is one line naming the field.

Every typed record of the contract (:mod:`profilers.contract.summaries`,
:mod:`profilers.contract.figures`) parses its JSON object through these, so a corrupt or newer file
is refused where it is read with ``SummaryError``, never deep in a report or the dashboard.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class SummaryError(ValueError):
    """A summary.json this version cannot read; the message is one line for the user."""


def is_number(value: Any) -> bool:
    """An int or float, and not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def optional_number(entry: Mapping[str, Any], key: str, where: str) -> float | None:
    """``entry[key]`` as a float; None when missing or null."""
    value = entry.get(key)
    if value is None:
        return None
    if not is_number(value):
        raise SummaryError(f"{where}: {key!r} must be a number or null, not {value!r}"[:300])
    return float(value)


def optional_int(entry: Mapping[str, Any], key: str, where: str) -> int | None:
    """``entry[key]`` as an int (a float is truncated); None when missing or null."""
    value = optional_number(entry, key, where)
    return None if value is None else int(value)


def optional_dict(entry: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    """``entry[key]``, an object; {} when missing or null."""
    value = entry.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SummaryError(f"{where}: {key!r} must be an object, not {type(value).__name__}")
    return value


def optional_str(entry: Mapping[str, Any], key: str, where: str) -> str | None:
    """``entry[key]``, a string; None when missing or null."""
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise SummaryError(f"{where}: {key!r} must be a string or null, not {value!r}"[:300])
    return value


def optional_list(entry: Mapping[str, Any], key: str, where: str) -> list[Any]:
    """``entry[key]``, a list; [] when missing or null."""
    value = entry.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise SummaryError(f"{where}: {key!r} must be a list, not {type(value).__name__}")
    return value


def str_list(entry: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    """``entry[key]``, a list of strings; () when missing or null."""
    return tuple(str(v) for v in optional_list(entry, key, where))


__all__ = [
    "SummaryError",
    "is_number",
    "optional_dict",
    "optional_int",
    "optional_list",
    "optional_number",
    "optional_str",
    "str_list",
]
