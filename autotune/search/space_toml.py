"""A search space from TOML: the ``[space.NAME]`` tables of ``autotune tune --space FILE``."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from autotune.search.params import Choice, Float, Int, Param, is_int, is_number

#: Keys allowed in a [space.NAME] table, by its type.
_KEYS: dict[str, tuple[str, ...]] = {
    "int": ("type", "low", "high", "log", "power_of_two", "arg", "env"),
    "float": ("type", "low", "high", "log", "arg", "env"),
    "choice": ("type", "choices", "arg", "env"),
}


def _type_name(value: object) -> str:
    return {bool: "boolean", int: "integer", float: "float", str: "string", list: "array", dict: "table"}.get(
        type(value), type(value).__name__
    )


def space_tables(path: str | Path) -> tuple[object, str]:
    """The ``[space.NAME]`` tables of a TOML file (other top-level tables are ignored), and its name.

    ValueError naming the file for anything wrong with it.
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from None
    if "space" not in data:
        raise ValueError(f'{path}: no [space.NAME] tables (e.g. [space.batch_size] with type = "int")')
    return data["space"], str(path)


def params_from_dict(tables: object, source: str = "<dict>") -> dict[str, Param]:
    """The parameters of a space from ``{name: {"type": "int"|"float"|"choice", ...}}`` (the TOML tables).

    Keys: int: low, high, log, power_of_two; float: low, high, log; choice: choices; all: arg,
    env. ``source`` names the origin (a file path) in error messages.
    """
    if not isinstance(tables, dict) or not tables:
        raise ValueError(f"{source}: [space] must hold at least one [space.NAME] table")
    params: dict[str, Param] = {}
    for name, table in tables.items():
        where = f"{source}: [space.{name}]"
        if not name.isidentifier():
            raise ValueError(f"{where}: the name must be a Python identifier (letters, digits, '_')")
        if not isinstance(table, dict):
            raise ValueError(f"{where}: must be a table, got {_type_name(table)} {table!r}")
        params[name] = _param_from_table(table, where)
    return params


def _param_from_table(table: dict[str, Any], where: str) -> Param:
    """One parameter from its TOML table; ``where`` prefixes every error message."""
    kind = table.get("type")
    if kind not in _KEYS:
        got = "missing" if kind is None else f"got {kind!r}"
        raise ValueError(f'{where}: key \'type\' must be "int", "float" or "choice" ({got})')
    for key in table:
        if key not in _KEYS[kind]:
            allowed = ", ".join(_KEYS[kind])
            raise ValueError(f"{where}: unknown key {key!r} for type {kind!r} (allowed: {allowed})")

    def get(key: str, check: Any, what: str, required: bool = True, default: Any = None) -> Any:
        if key not in table:
            if required:
                raise ValueError(f"{where}: missing key {key!r} ({what})")
            return default
        value = table[key]
        if not check(value):
            raise ValueError(f"{where}: key {key!r} must be {what}, got {_type_name(value)} {value!r}")
        return value

    def is_bool(v: object) -> bool:
        return isinstance(v, bool)

    def is_str(v: object) -> bool:
        return isinstance(v, str)

    arg = get("arg", is_str, 'a string such as "--name={value}"', required=False)
    env = get("env", is_str, "a string (an environment variable name)", required=False)
    try:
        if kind == "int":
            return Int(
                get("low", is_int, "an integer"),
                get("high", is_int, "an integer"),
                log=get("log", is_bool, "true or false", required=False, default=False),
                power_of_two=get("power_of_two", is_bool, "true or false", required=False, default=False),
                arg=arg,
                env=env,
            )
        if kind == "float":
            return Float(
                get("low", is_number, "a number"),
                get("high", is_number, "a number"),
                log=get("log", is_bool, "true or false", required=False, default=False),
                arg=arg,
                env=env,
            )
        choices = get("choices", lambda v: isinstance(v, list) and len(v) > 0, "a non-empty array")
        return Choice(*choices, arg=arg, env=env)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
