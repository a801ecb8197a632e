"""The code's shape: no import cycles between autotune's packages, nor between any two modules.

Measured by scripts/structure.py from the source (module-level and function-local imports alike, so
a cycle hidden behind a function-local import counts).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

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


@pytest.mark.slow
def test_every_function_local_import_has_a_reason():
    # local only to keep a start-up light, to keep a third-party package (torch, plotly...) out of a
    # module that does not need it at import, or to break a cycle; any other belongs at the top
    s = structure()
    reasons = s.local_import_reasons(s.modules(), s.start_up_modules())
    assert [r for r in reasons if r[0] == "none"] == []
    assert len(reasons) > 50  # the walk saw them (138 when written)


def test_a_local_import_with_no_reason_is_found(tmp_path):
    s = structure()
    (tmp_path / "light.py").write_text("def f():\n    import heavy\n\ndef g():\n    import plain\n")
    (tmp_path / "heavy.py").write_text("import torch\n")
    (tmp_path / "plain.py").write_text("import json\n")
    mods = {name: tmp_path / f"{name}.py" for name in ("light", "heavy", "plain")}
    reasons = {r[3]: r[0] for r in s.local_import_reasons(mods, {"start": {"light"}})}
    assert reasons == {"import heavy": "third-party: torch", "import plain": "start-up: start"}
    reasons = {r[3]: r[0] for r in s.local_import_reasons(mods, {"start": {"light", "plain", "json"}})}
    assert reasons["import plain"] == "none"


def test_tui_imports_of_autotune_only_its_declared_light_part_at_module_level():
    # the formatting helpers and the records it shows, at the top; the report builders where a
    # report is built (function-local, each with its reason as every other)
    s = structure()
    found = s.tui_imports_of_autotune(s.modules())
    at_top = {target for _, _, target, top in found if top}
    assert at_top == set(s.TUI_IMPORTS_OF_AUTOTUNE)
    local = [(m, line, target) for m, line, target, top in found if not top]
    assert [x for x in local if x[2] in s.TUI_IMPORTS_OF_AUTOTUNE] == []  # those belong at the top
    assert {target.rsplit(".", 1)[0] for _, _, target in local} <= {"autotune.report"}, local


def test_the_report_and_the_advice_read_studies_without_the_tuners_internals():
    # they read what a study wrote (profilers.contract) and the search's public records, never the
    # tuner's modules: the tuner may change how it decides without changing what they show
    s = structure()
    all_modules = s.modules()
    reaching = sorted(
        (name, target)
        for name, path in all_modules.items()
        if name.startswith(("autotune.report", "autotune.advice"))
        for target, _, _ in s.imports(path, name)
        if target.startswith("autotune.tuner")
    )
    assert reaching == []
