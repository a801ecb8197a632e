"""Reading a stored JSON object into a dataclass leniently: a value of the wrong type reads as missing.

For records written by this project into its own stores (a run's metadata, a study's trial facts),
where an older version may lack a key or have stored another type: the record keeps its default
instead of refusing the whole file. Summaries, which users and CI read, are checked strictly
instead (:mod:`profilers.contract.json_checks`).

>>> from dataclasses import dataclass
>>> @dataclass
... class Facts:
...     name: str | None = None
...     ranks: int = 1
>>> read_fields(Facts, {"name": "train", "ranks": "two"})
{'name': 'train'}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, TypedDict, TypeVar

T = TypeVar("T")
E = TypeVar("E", bound=StrEnum)


def number(value: Any) -> float | None:
    """``value`` as a float when it is a number (not a bool), else None."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def integer(value: Any) -> int | None:
    """``value`` as an int (a float truncated) when it is a number, else None."""
    as_float = number(value)
    return None if as_float is None else int(as_float)


def text(value: Any) -> str | None:
    """``value`` when it is a string, else None."""
    return value if isinstance(value, str) else None


def pair(value: Any) -> tuple[float | None, float | None] | None:
    """``[low, high]`` (an end a measurement left open is None), else None."""
    two = isinstance(value, list | tuple) and len(value) == 2
    if two and all(v is None or number(v) is not None for v in value):
        return (number(value[0]), number(value[1]))
    return None


def _closed_pair(value: Any) -> tuple[float, float] | None:
    ends = pair(value)
    return None if ends is None or ends[0] is None or ends[1] is None else (ends[0], ends[1])


def _numbers(value: Any) -> tuple[float | None, ...] | None:
    return tuple(number(v) for v in value) if isinstance(value, list | tuple) else None


def _texts(value: Any) -> tuple[str, ...] | None:
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else None


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _mapping(value: Any) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, Mapping) else None


def is_param_value(value: Any) -> bool:
    """Whether ``value`` can be a configuration's value (``schema.ParamValue``): a number, string or bool."""
    return isinstance(value, int | float | str | bool)


def _params(value: Any) -> dict[str, Any] | None:
    """A configuration (``schema.Params``): its entries of numbers, strings and booleans (others left out)."""
    if not isinstance(value, Mapping):
        return None
    return {str(k): v for k, v in value.items() if is_param_value(v)}


#: How a field's stored value is read, by the field's annotation.
READERS: dict[str, Callable[[Any], Any]] = {
    "str": text,
    "str | None": text,
    "int": integer,
    "int | None": integer,
    "float": number,
    "float | None": number,
    "bool": _flag,
    "bool | None": _flag,
    "dict[str, Any]": _mapping,
    "JsonObject": _mapping,
    "Params": _params,
    "tuple[str, ...]": _texts,
    "tuple[float | None, ...] | None": _numbers,
    "tuple[float | None, float | None] | None": pair,
    "tuple[float, float] | None": _closed_pair,
    "int | str": lambda value: value if isinstance(value, str) else integer(value),
}


class FieldMeta(TypedDict, total=False):
    """What a record field's metadata may say about how its value is read, written and documented.

    Read here (:func:`read_fields`) and by ``json_checks.checked_fields``/``record_json``, the study
    store's trial mapping (``study.summary``) and the reference tables (``fields``).
    """

    key: str | None  # where the JSON object holds it, when not under the field's name
    parse: Callable[[Any, str], Any]  # reads its JSON value (value, where)
    member_of: type[StrEnum]  # a member of this string enum, stored as its string
    record: type  # one object read as this record
    records: type  # a list of objects read as this record
    written: bool  # False: kept by the record for itself, never written
    omit_default: bool  # its key is left out while it holds its default
    default_as_null: bool  # its default is written as null
    stored: tuple[str, str]  # where a study store's trial record holds it: (part, key)
    meaning: str  # what its key means (the reference tables)
    always: bool  # every document writes it
    with_above: bool  # documented in the row of the field before it


def member_of(kind: type[StrEnum]) -> FieldMeta:
    """A field's metadata: it holds a member of the string enum ``kind``, stored as its string.

    :func:`read_fields` leaves out a value that is no member (the field keeps its default);
    ``json_checks.checked_fields`` refuses it, naming the members.
    """
    return {"member_of": kind}


def member(kind: type[E], raw: Any) -> E | None:
    """``raw`` as a member of the string enum ``kind``, or None when it is none of its strings."""
    return kind(raw) if isinstance(raw, str) and raw in kind._value2member_map_ else None


def records_of(record: type, key: str | None = None) -> FieldMeta:
    """A field's metadata for :func:`read_fields`: it holds a list of ``record`` (under ``key``)."""
    return {"records": record, "key": key}


def record_of(record: type, key: str | None = None) -> FieldMeta:
    """A field's metadata for :func:`read_fields`: it holds one object read as ``record``."""
    return {"record": record, "key": key}


def read_fields(record: type, stored: Mapping[str, Any], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The fields of the dataclass ``record`` found in ``stored``, each read by :data:`READERS`.

    A value of the wrong type, or None, is left out, so the field keeps its default. A field whose
    metadata is :func:`records_of` holds a list of records of that type, read by
    :func:`read_records`; :func:`record_of`, one record; metadata with a ``key`` names where
    ``stored`` holds the field.
    """
    out = {}
    for f in dataclasses.fields(record):
        if f.name in skip:
            continue
        raw = stored.get(f.metadata.get("key") or f.name)
        inner = f.metadata.get("records")
        if "record" in f.metadata:
            one = f.metadata["record"]
            value = one(**read_fields(one, raw)) if isinstance(raw, Mapping) else None
        elif "member_of" in f.metadata:
            value = member(f.metadata["member_of"], raw)
        else:
            value = READERS[str(f.type)](raw) if inner is None else read_records(inner, raw)
        if value is not None:
            out[f.name] = value
    return out


def read_records(record: type[T], stored: Any) -> tuple[T, ...]:
    """Each JSON object of the list ``stored`` read as the dataclass ``record`` (by :func:`read_fields`).

    An item that is not an object, or lacks a field the record requires, is left out; so is the
    whole of ``stored`` when it is not a list.

    >>> @dataclasses.dataclass
    ... class Rule:
    ...     rule: str
    ...     value: float = 0.0
    >>> read_records(Rule, [{"rule": "input_bound", "value": 5}, {"value": 3}, "junk"])
    (Rule(rule='input_bound', value=5.0),)
    """
    if not isinstance(stored, list | tuple):
        return ()
    out = []
    for item in stored:
        if isinstance(item, Mapping):
            try:
                out.append(record(**read_fields(record, item)))
            except TypeError:  # a required field is missing
                continue
    return tuple(out)


__all__ = [
    "READERS",
    "integer",
    "member",
    "member_of",
    "number",
    "pair",
    "read_fields",
    "read_records",
    "record_of",
    "records_of",
    "text",
]
