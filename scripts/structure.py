"""The code's shape, measured: import cycles between packages, function-local imports, long functions.

    python scripts/structure.py            # the figures
    python scripts/structure.py --cycles   # also every module-level import cycle found
    python scripts/structure.py --local    # also every function-local import and why it is local

Imports are read from the source (``ast``), module-level and function-local alike, so a cycle
hidden behind a function-local import still counts. A function-local import must have one of three
reasons, checked here rather than written next to each (``tests/test_structure.py`` fails on one
with none): at module level it would close an import cycle; it would bring a third-party package
(torch, plotly, textual, scikit-optimize...) into a module that does not import it at module level;
or the module is loaded at a start-up (``import autotune``, every command's start-up, the
dashboard's) and the import would add modules to that start-up. A "package" is the first two parts of a
module's name under ``autotune`` (``autotune.report``, ``autotune.cli.main``...) and the first two under
``profilers`` and ``tui``; ``tests/test_structure.py`` keeps autotune's packages acyclic.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("autotune", "profilers", "tui")
#: The start-ups kept light: what each runs, in a fresh interpreter.
START_UPS: dict[str, str] = {
    "import autotune": "import autotune",
    "every command's start-up": "from autotune.cli.main import build_parser; build_parser()",
    "the dashboard's start-up": "import tui.app",
}


#: What tui/ may import of autotune at module level: the formatting helpers and the records it shows
#: (no torch, no plotly, nothing of the tuner). The report it builds on demand is imported where it
#: is built (a function-local import, with its reason).
TUI_IMPORTS_OF_AUTOTUNE = ("autotune.fmt", "autotune.advice.records")


def modules() -> dict[str, Path]:
    """Dotted module name to its file, for every module of the three packages."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imports(path: Path, name: str) -> Iterator[tuple[str, bool, int]]:
    """(imported module, whether at module level, line) of every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(node) for node in tree.body}
    guarded = _type_only(tree)
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue  # type-only: never runs
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in top, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:  # relative (banned here, but be exact)
                base = ".".join([*name.split(".")[: -node.level], node.module])
            # ``from autotune import report`` imports the module (its package's __init__ runs
            # too, but that is no dependency on what the package holds)
            for alias in node.names:
                yield f"{base}.{alias.name}", id(node) in top, node.lineno


def tui_imports_of_autotune(all_modules: dict[str, Path]) -> list[tuple[str, int, str, bool]]:
    """(tui module, line, autotune module, whether at module level) of every import of autotune in tui/."""
    out = []
    for name, path in all_modules.items():
        if name.split(".")[0] != "tui":
            continue
        for target, top, line in imports(path, name):
            project = _project_module(all_modules, target)
            if project.split(".")[0] == "autotune":
                out.append((name, line, project, top))
    return sorted(out)


def package_of(module: str) -> str:
    """``autotune.report.html`` -> ``autotune.report``; a top-level module is its own package."""
    parts = module.split(".")
    return ".".join(parts[:2])


def graph(all_modules: dict[str, Path], module_level_only: bool) -> dict[str, set[str]]:
    """Module -> the modules of the three packages it imports."""
    out: dict[str, set[str]] = {m: set() for m in all_modules}
    for name, path in all_modules.items():
        for target, at_top, _ in imports(path, name):
            if at_top or not module_level_only:
                while target and target not in all_modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    out[name].add(target)
    return out


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def package_cycles(all_modules: dict[str, Path], prefix: str = "autotune.") -> list[list[str]]:
    """Cycles between the packages under ``prefix``, function-local imports included."""
    packages: dict[str, set[str]] = {}
    for source, targets in graph(all_modules, module_level_only=False).items():
        if not source.startswith(prefix):
            continue
        for target in targets:
            a, b = package_of(source), package_of(target)
            if target.startswith(prefix) and a != b:
                packages.setdefault(a, set()).add(b)
    return cycles(packages)


def _type_only(tree: ast.Module) -> set[int]:
    """Ids of the nodes under ``if TYPE_CHECKING:`` (imports that never run)."""
    return {
        id(inner)
        for node in tree.body
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }


def local_imports(path: Path) -> int:
    """Import statements inside functions or classes (not at module level, not type-only)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = {id(node) for node in tree.body} | _type_only(tree)
    statements = [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]
    return sum(1 for node in statements if id(node) not in skip)


def start_up_modules() -> dict[str, set[str]]:
    """Each start-up of :data:`START_UPS` to the modules it loads (``sys.modules`` after it)."""
    out = {}
    for label, code in START_UPS.items():
        listing = "; import json, sys; print(json.dumps(sorted(sys.modules)))"
        done = subprocess.run(
            [sys.executable, "-c", code + listing], capture_output=True, text=True, check=True, cwd=ROOT
        )
        out[label] = set(json.loads(done.stdout.splitlines()[-1]))
    return out


def _closure(all_modules: dict[str, Path], module: str) -> tuple[set[str], set[str]]:
    """(project modules, third-party packages) that importing ``module`` loads at module level."""
    seen: set[str] = set()
    third: set[str] = set()
    stack = [module]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        stack.extend(p for p in (".".join(parts[:i]) for i in range(1, len(parts))) if p in all_modules)
        for target, at_top, _ in imports(all_modules[name], name):
            if not at_top:
                continue
            found = _project_module(all_modules, target)
            if found:
                stack.append(found)
            elif target.split(".")[0] not in sys.stdlib_module_names:
                third.add(target.split(".")[0])
    return seen, third


def _project_module(all_modules: dict[str, Path], target: str) -> str:
    while target and target not in all_modules:
        target = target.rpartition(".")[0]
    return target


def local_import_reasons(
    all_modules: dict[str, Path], start_ups: dict[str, set[str]]
) -> list[tuple[str, str, int, str]]:
    """(reason, module, line, statement) of every function-local import; reason "none" when it has none."""
    closures: dict[str, tuple[set[str], set[str]]] = {}

    def closure(module: str) -> tuple[set[str], set[str]]:
        if module not in closures:
            closures[module] = _closure(all_modules, module)
        return closures[module]

    out = []
    for name, path in all_modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = {id(node) for node in tree.body} | _type_only(tree)
        own_third = closure(name)[1]
        loaded_by = {label: mods for label, mods in start_ups.items() if name in mods}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom) or id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                targets = [f"{node.module}.{alias.name}" for alias in node.names]
            reason = _reason(targets, name, own_third, loaded_by, all_modules, closure)
            out.append((reason, name, node.lineno, ast.unparse(node)))
    return out


def _reason(targets, name, own_third, loaded_by, all_modules, closure) -> str:  # type: ignore[no-untyped-def]
    for target in targets:
        found = _project_module(all_modules, target)
        if found:
            seen, third = closure(found)
            if name in seen:
                return "cycle"
            if third - own_third:
                return "third-party: " + ", ".join(sorted(third - own_third))
            added = {label for label, mods in loaded_by.items() if seen - mods}
        else:
            top = target.split(".")[0]
            if top not in sys.stdlib_module_names:
                return f"third-party: {top}"
            added = {label for label, mods in loaded_by.items() if target not in mods and top not in mods}
        if added:
            return "start-up: " + ", ".join(sorted(added))
    return "none"


def longest(all_modules: dict[str, Path], kind: type[ast.AST], count: int) -> list[tuple[int, str]]:
    """The ``count`` longest definitions of ``kind`` (lines, name)."""
    sizes = []
    for name, path in all_modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, kind):
                length = (node.end_lineno or node.lineno) - node.lineno + 1  # type: ignore[attr-defined]
                sizes.append((length, f"{name}.{node.name}"))  # type: ignore[attr-defined]
    return sorted(sizes, reverse=True)[:count]


def main() -> int:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", action="store_true", help="list the module-level import cycles")
    parser.add_argument("--local", action="store_true", help="list the function-local imports and why")
    args = parser.parse_args()
    mods = modules()
    local = sum(local_imports(path) for path in mods.values())
    print(f"modules: {len(mods)}")
    print(f"package cycles in autotune/ (function-local imports included): {package_cycles(mods)}")
    module_cycles = cycles(graph(mods, module_level_only=True))
    print(f"module-level import cycles: {len(module_cycles)}")
    hidden = cycles(graph(mods, module_level_only=False))
    print(f"module cycles through function-local imports: {len(hidden)}")
    if args.cycles:
        for component in module_cycles + hidden:
            print("   ", " <-> ".join(component))
    reasons = local_import_reasons(mods, start_up_modules())
    kinds: dict[str, int] = {}
    for reason, *_ in reasons:
        kinds[reason.split(":")[0]] = kinds.get(reason.split(":")[0], 0) + 1
    by_kind = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
    print(f"function-local import statements: {local} ({by_kind})")
    if args.local:
        for reason, module, line, statement in sorted(reasons, key=lambda r: (r[1], r[2])):
            print(f"    {module}:{line}  {statement}  [{reason}]")
    print("longest classes:", ", ".join(f"{n} ({k} lines)" for k, n in longest(mods, ast.ClassDef, 5)))
    functions = longest(mods, ast.FunctionDef, 5)
    print("longest functions:", ", ".join(f"{n} ({k} lines)" for k, n in functions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
