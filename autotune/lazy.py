"""Module attributes imported on first use, so that importing a package stays light."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(
    namespace: dict[str, Any], table: Mapping[str, str], package: str
) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``table[name]`` (a module path) on first use of ``name``.

    The value is then kept in ``namespace`` (the module's globals), so later lookups are plain.
    """

    def __getattr__(name: str) -> Any:
        if name in table:
            value = getattr(importlib.import_module(table[name]), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
