"""The code's shape: no import cycles between autotune's packages, nor between any two modules.

Measured by scripts/structure.py from the source (module-level and function-local imports alike, so
a cycle hidden behind a function-local import counts).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def structure() -> ModuleType:
    spec = importlib.util.spec_from_file_location("structure", ROOT / "scripts" / "structure.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_autotunes_packages_depend_one_way():
    s = structure()
    assert s.package_cycles(s.modules()) == []


def test_no_two_modules_import_each_other_even_inside_functions():
    s = structure()
    assert s.cycles(s.graph(s.modules(), module_level_only=False)) == []


def test_the_cycle_finder_finds_a_cycle():
    s = structure()
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert s.cycles(edges) == [["a", "b", "c"]]
