"""The house's layers hold: the import-linter contracts of pyproject.toml, no import circle, and
imports inside functions only where one says why (docs/architecture.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("metnos", "domain", "projections", "replay")


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every set of modules that import each other round, directly or not (Tarjan's components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph.modules):
        if start in index:
            continue
        # Iterative, so a deep chain of imports cannot exhaust the recursion limit.
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            advanced = False
            for target in targets:
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.find_modules_directly_imported_by(target)))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_import_contracts_hold() -> None:
    # The interpreter running the tests runs import-linter too: a venv that is not on PATH still checks.
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={str(ROOT / 'pyproject.toml')!r}, no_cache=True))")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]


def test_no_module_imports_itself_round_a_circle() -> None:
    found = circles(_graph())
    assert found == [], "\n".join(" <-> ".join(c) for c in found)


def test_the_circle_finder_sees_a_circle() -> None:
    graph = grimp.ImportGraph()
    for a, b in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        graph.add_import(importer=a, imported=b)
    assert circles(graph) == [["p.a", "p.b", "p.c"]]


def _optional(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """An import in a ``try`` that catches ImportError: an optional dependency, imported where it is needed."""
    parent = parents.get(node)
    return isinstance(parent, ast.Try) and any(
        "ImportError" in ast.unparse(h.type) for h in parent.handlers if h.type is not None)


def _inner_imports(path: Path) -> list[tuple[int, bool]]:
    """Imports inside a function, and whether they say why: a comment on their line or just above
    their group of imports, or a ``try`` that catches ImportError."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    above = inner.lineno - 2
                    while above >= 0 and lines[above].strip().startswith(("import ", "from ")):
                        above -= 1
                    said = "#" in lines[inner.lineno - 1] or (above >= 0 and lines[above].strip().startswith("#"))
                    found.append((inner.lineno, said or _optional(inner, parents)))
    return found


def test_an_import_inside_a_function_says_why() -> None:
    """Only a deferred heavy module (start-up time) or an optional one may be imported late, and the line says so."""
    unexplained = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for line, said in _inner_imports(path):
                if not said:
                    unexplained.append(f"{path.relative_to(ROOT)}:{line}")
    assert unexplained == [], f"{len(unexplained)} imports inside functions without a comment saying why:\n" + "\n".join(unexplained)
