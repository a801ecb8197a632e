"""Reading one field of a summary.json object, checked: a wrong type is one line naming the field.

Every typed record of the contract (:mod:`profilers.contract.profile_summary`,
:mod:`profilers.contract.study.summary`, :mod:`profilers.contract.figures`) parses its JSON object
through these, so a corrupt or newer file is refused where it is read with ``SummaryError``, never
deep in a report or the dashboard; :func:`record_json` writes a record as they read it.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from enum import Enum
from typing import Any, TypeAlias

from profilers.contract.lenient import READERS, FieldMeta, is_param_value, member

#: A value as JSON holds it: what :func:`json_value` makes of a record and ``json.dumps`` writes.
JsonValue: TypeAlias = "bool | int | float | str | Sequence[JsonValue] | Mapping[str, JsonValue] | None"
#: A JSON object as this project writes it (a summary, a report, a trial's record).
JsonObject: TypeAlias = "dict[str, JsonValue]"


class SummaryError(ValueError):
    """A summary.json this version cannot read; the message is one line for the user."""


def is_number(value: Any) -> bool:
    """An int or float, and not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def checked_value(entry: Mapping[str, Any], key: str, where: str, annotation: str) -> Any:
    """``entry[key]`` read as a field annotated ``annotation`` (:data:`CHECKED_READERS`).

    None when missing or null; SummaryError naming ``where`` and ``key`` for a value of another type.
    """
    value = entry.get(key)
    if value is None:
        return None
    read, what = CHECKED_READERS[annotation]
    checked = read(value)
    if checked is None:
        raise SummaryError(f"{where}: {key!r} must be {what} or null, not {value!r}"[:300])
    return checked


def optional_number(entry: Mapping[str, Any], key: str, where: str) -> float | None:
    """``entry[key]`` as a float; None when missing or null."""
    return checked_value(entry, key, where, "float | None")


def optional_int(entry: Mapping[str, Any], key: str, where: str) -> int | None:
    """``entry[key]`` as an int (a float is truncated); None when missing or null."""
    return checked_value(entry, key, where, "int | None")


def optional_dict(entry: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    """``entry[key]``, an object; {} when missing or null."""
    return checked_value(entry, key, where, "dict[str, Any]") or {}


def optional_str(entry: Mapping[str, Any], key: str, where: str) -> str | None:
    """``entry[key]``, a string; None when missing or null."""
    return checked_value(entry, key, where, "str | None")


def optional_list(entry: Mapping[str, Any], key: str, where: str) -> list[Any]:
    """``entry[key]``, a list; [] when missing or null."""
    return checked_value(entry, key, where, "list[Any]") or []


def checked_object(data: Any, where: str) -> Mapping[str, Any]:
    """``data``, a JSON object; {} for null; SummaryError naming ``where`` for anything else."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise SummaryError(f"{where} must be an object or null, not {type(data).__name__}")
    return data


def stored_as(key: str) -> FieldMeta:
    """A field's metadata for :func:`checked_fields`: the JSON object holds it under ``key``."""
    return {"key": key}


def nested(parse: Callable[[Any, str], Any], key: str | None = None) -> FieldMeta:
    """A field's metadata for :func:`checked_fields`: ``parse(value, where)`` reads its JSON value.

    ``parse`` gets the value as stored (None when missing) and ``where`` naming it; ``key`` is where
    the object holds it when that is not the field's name.
    """
    return {"key": key, "parse": parse}


def nested_records(record: type, key: str | None = None) -> FieldMeta:
    """A field's metadata for :func:`checked_fields`: a JSON list of ``record`` objects, each checked."""
    return nested(lambda data, where: checked_records(record, data, where), key)


def _numbers_or_nulls(value: Any) -> tuple[float | None, ...] | None:
    if isinstance(value, list) and all(v is None or is_number(v) for v in value):
        return tuple(None if v is None else float(v) for v in value)
    return None


def _integers(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    return None


def _by_name(value: Any) -> dict[str, float] | None:
    if isinstance(value, Mapping) and all(is_number(v) for v in value.values()):
        return {str(k): float(v) for k, v in value.items()}
    return None


def _counts(value: Any) -> dict[str, int] | None:
    by_name = _by_name(value)
    return None if by_name is None else {k: int(v) for k, v in by_name.items()}


def _scalars(value: Any) -> dict[str, Any] | None:
    if isinstance(value, Mapping) and all(is_param_value(v) for v in value.values()):
        return {str(k): v for k, v in value.items()}
    return None


def _strings(value: Any) -> tuple[str, ...] | None:
    return tuple(str(v) for v in value) if isinstance(value, list) else None


def _texts(value: Any) -> dict[str, str] | None:
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return {str(k): v for k, v in value.items()}
    return None


#: How :func:`checked_fields` reads a field, by its annotation, and what its value must be: the
#: reader gives None for a value it refuses (the lenient readers for the scalars).
# fmt: off
CHECKED_READERS: dict[str, tuple[Callable[[Any], Any], str]] = {
    **{annotation: (READERS[annotation], what) for annotation, what in (
        ("str", "a string"), ("str | None", "a string"),
        ("int", "a number"), ("int | None", "a number"),
        ("float", "a number"), ("float | None", "a number"),
        ("bool", "true or false"), ("bool | None", "true or false"),
        ("dict[str, Any]", "an object"),
        ("JsonObject", "an object"),
        ("tuple[float | None, float | None] | None", "[low, high]"),
        ("tuple[float, float] | None", "[low, high]"),
    )},
    "tuple[str, ...]": (_strings, "a list"),
    "Params": (_scalars, "an object of numbers, strings and booleans"),
    "list[Any]": (lambda value: value if isinstance(value, list) else None, "a list"),
    "tuple[float | None, ...] | None": (_numbers_or_nulls, "a list of numbers or nulls"),
    "tuple[int, ...] | None": (_integers, "a list of integers"),
    "dict[str, float]": (_by_name, "an object of numbers"),
    "dict[str, int]": (_counts, "an object of numbers"),
    "dict[str, str]": (_texts, "an object of strings"),
}
# fmt: on


def inner_where(where: str, key: str) -> str:
    """Where a value inside the object at ``where`` is: ``summary.json: memory.heap_live_envelope``."""
    return f"{where}.{key}" if ": " in where else f"{where}: {key}"


def checked_fields(record: type, data: Any, where: str, skip: Iterable[str] = ()) -> dict[str, Any]:
    """The fields of the dataclass ``record`` read from the JSON object ``data``, each checked.

    A field is read by its annotation (:data:`CHECKED_READERS`), or by the parser its metadata names
    (:func:`nested`), under its name or the key its metadata gives (:func:`stored_as`). A value of the
    wrong type is a one-line SummaryError naming ``where`` and the key; a missing or null value leaves
    a defaulted field out (it keeps its default) and gives a required one None.

    >>> @dataclasses.dataclass
    ... class Loss:
    ...     first: float | None
    ...     steps: int = 0
    >>> Loss(**checked_fields(Loss, {"first": 2}, "summary.json: loss"))
    Loss(first=2.0, steps=0)
    >>> checked_fields(Loss, {"first": "low"}, "loss")
    Traceback (most recent call last):
    ...
    profilers.contract.json_checks.SummaryError: loss: 'first' must be a number or null, not 'low'
    """
    data, skipped, out = checked_object(data, where), set(skip), {}
    for f in dataclasses.fields(record):
        if f.name in skipped or not f.init:
            continue
        key = f.metadata.get("key") or f.name
        if "parse" in f.metadata:
            out[f.name] = f.metadata["parse"](data.get(key), inner_where(where, key))
            continue
        if "member_of" in f.metadata:
            kind, raw = f.metadata["member_of"], data.get(key)
            if raw is None:
                continue  # a missing one keeps its default
            if member(kind, raw) is None:
                known = ", ".join(m.value for m in kind)
                raise SummaryError(f"{where}: {key!r} is {raw!r}, none of {known}"[:300])
            out[f.name] = kind(raw)
            continue
        value = checked_value(data, key, where, str(f.type))
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if value is not None or required:
            out[f.name] = value
    return out


#: A field's metadata: the record keeps it for itself (a parsed document's ``raw``), never writes it.
NOT_WRITTEN: FieldMeta = {"written": False}
#: A field's metadata for :func:`record_json`: its key is written only when its value is not the
#: field's default (a key some runs write and others leave out, such as ``seen``). Combine with
#: others as ``{**nested(...), **WHEN_SET}``.
WHEN_SET: FieldMeta = {"omit_default": True}
#: A field's metadata for :func:`record_json`: its default is written as null (a part the run did
#: not measure, such as ``loss`` without losses, is null in the file and empty in the record).
DEFAULT_AS_NULL: FieldMeta = {"default_as_null": True}


def json_value(value: Any) -> JsonValue:
    """``value`` as JSON holds it (records, tuples, members, mappings and lists made plain)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return record_json(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [json_value(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    return value


def record_json(record: Any) -> JsonObject:
    """The JSON object of the dataclass ``record``, written as :func:`checked_fields` reads it back.

    Each field under the key its metadata gives (:func:`stored_as`), else its name; a field marked
    :data:`NOT_WRITTEN` is left out, one marked :data:`WHEN_SET` when it holds its default, and one
    marked :data:`DEFAULT_AS_NULL` is null then; values as :func:`json_value` writes them.

    >>> @dataclasses.dataclass
    ... class Loss:
    ...     first: float | None
    ...     phases: tuple[str, ...] = dataclasses.field(default=(), metadata=stored_as("phase_names"))
    >>> record_json(Loss(2.0, ("forward",)))
    {'first': 2.0, 'phase_names': ['forward']}
    >>> Loss(**checked_fields(Loss, record_json(Loss(2.0, ("forward",))), "loss"))
    Loss(first=2.0, phases=('forward',))
    """
    out: JsonObject = {}
    for f in dataclasses.fields(record):
        if not f.metadata.get("written", True):
            continue
        value = getattr(record, f.name)
        if (f.metadata.get("omit_default") or f.metadata.get("default_as_null")) and value == _default(f):
            if f.metadata.get("omit_default"):
                continue
            value = None
        out[f.metadata.get("key") or f.name] = json_value(value)
    return out


def _default(f: dataclasses.Field[Any]) -> Any:
    """A field's default value (a fresh one from its factory); MISSING when it has none."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def written_keys(record: type) -> tuple[str, ...]:
    """The keys :func:`record_json` may write for the dataclass ``record``, in the order written."""
    fields = dataclasses.fields(record)
    return tuple(f.metadata.get("key") or f.name for f in fields if f.metadata.get("written", True))


def document(record: Any) -> JsonObject:
    """The JSON object of a record with a ``raw``: parsed, that object; built in code, its fields.

    A parsed record gives back every key it was read from (a newer writer's too); one built in code
    has an empty ``raw`` and is written by :func:`record_json`.
    """
    raw: JsonObject = record.raw
    return dict(raw) if raw else record_json(record)


class ReadsAsItsJson(Mapping[str, Any]):
    """Read-only mapping access to a record's JSON object.

    The object it was parsed from (its ``raw``, a newer writer's keys kept), or for a record built
    in code, the one it writes.
    """

    raw: JsonObject

    @functools.cached_property
    def _json(self) -> JsonObject:
        return document(self)

    def __getitem__(self, key: str) -> Any:
        return self._json[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._json)

    def __len__(self) -> int:
        return len(self._json)

    def to_json(self) -> JsonObject:
        """The record's JSON object (see the class)."""
        return dict(self._json)


def checked_records(record: type, data: Any, where: str) -> tuple[Any, ...]:
    """Each object of the JSON list ``data`` (null: none) read as ``record`` by :func:`checked_fields`."""
    if data is None:
        return ()
    if not isinstance(data, list):
        raise SummaryError(f"{where} must be a list or null, not {type(data).__name__}")
    return tuple(record(**checked_fields(record, item, f"{where}[{i}]")) for i, item in enumerate(data))


def str_list(entry: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    """``entry[key]``, a list of strings; () when missing or null."""
    return tuple(str(v) for v in optional_list(entry, key, where))


__all__ = [
    "CHECKED_READERS",
    "DEFAULT_AS_NULL",
    "NOT_WRITTEN",
    "WHEN_SET",
    "ReadsAsItsJson",
    "SummaryError",
    "checked_fields",
    "checked_object",
    "checked_records",
    "checked_value",
    "document",
    "inner_where",
    "is_number",
    "json_value",
    "nested",
    "nested_records",
    "optional_dict",
    "optional_int",
    "optional_list",
    "optional_number",
    "optional_str",
    "record_json",
    "stored_as",
    "str_list",
    "written_keys",
]
