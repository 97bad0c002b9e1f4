"""What a drafted executor may import, and what its imports say it needs.

A synthesised executor is standard library only, and within the standard
library it may import what its capabilities allow: a pure computation gets
the modules that compute; reading files adds ``os`` and ``pathlib``; a
network grant adds ``urllib`` and ``http``; running a binary adds
``subprocess``. An import outside that list is refused with the capability
that would allow it, so the profile the user approved is the one the code
can use (the sandbox enforces it anyway; this keeps the signed code honest
about it). The forbidden constructs themselves (eval, exec, compile,
``__import__``, importlib) are metnos.mechanisms.executors.code_check's.
"""

from __future__ import annotations

import ast
import builtins
import symtable
from collections.abc import Iterator, Mapping
from typing import Any

from metnos.mechanisms.executors.code_check import CodeProblem, problems_in_source

# Modules any executor may import: they compute, they reach nothing.
PURE = frozenset({
    "__future__", "array", "base64", "binascii", "bisect", "calendar", "cmath", "collections", "copy", "csv",
    "dataclasses", "datetime", "decimal", "difflib", "enum", "fractions", "functools", "hashlib", "heapq", "hmac",
    "html", "io", "itertools", "json", "math", "numbers", "operator", "random", "re", "statistics", "string",
    "struct", "textwrap", "typing", "unicodedata", "uuid",
})
# Capability (as the manifest spells it) -> the modules it adds.
BY_CAPABILITY: dict[str, frozenset[str]] = {
    "fs:read": frozenset({"os", "pathlib", "glob", "fnmatch", "stat", "mimetypes"}),
    "fs:write": frozenset({"os", "pathlib", "glob", "fnmatch", "stat", "mimetypes", "shutil", "tempfile"}),
    "network": frozenset({"urllib", "http", "socket", "ssl", "ipaddress", "email"}),
    "code:exec": frozenset({"subprocess", "shlex"}),
    "time:read": frozenset({"time", "zoneinfo"}),
}
# Birth tests lay out fixtures in their scratch dir, whatever the executor may touch.
TEST_EXTRA = frozenset({"os", "pathlib", "tempfile", "time"})


def granted(capabilities: Mapping[str, Any]) -> list[str]:
    """The capability keys that grant something (a non-empty list, or true)."""
    return [k for k in BY_CAPABILITY if capabilities.get(k)]


def allowed_modules(capabilities: Mapping[str, Any]) -> frozenset[str]:
    allowed = set(PURE)
    for key in granted(capabilities):
        allowed |= BY_CAPABILITY[key]
    return frozenset(allowed)


def imported_roots(source: str) -> Iterator[tuple[str, int]]:
    """(top-level module, line) for every absolute import in ``source``; nothing when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".", 1)[0], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".", 1)[0], node.lineno


def capability_for(module: str) -> str | None:
    """The narrowest capability whose modules include ``module``."""
    for key in ("time:read", "fs:read", "fs:write", "network", "code:exec"):
        if module in BY_CAPABILITY[key]:
            return key
    return None


def needed_capabilities(files: Mapping[str, str]) -> set[str]:
    """The capabilities main.py's imports need (its tests may import more for their fixtures)."""
    needed = set()
    for module, _line in imported_roots(files.get("main.py", "")):
        key = capability_for(module)
        if key is not None:
            needed.add(key)
    return needed


_MODULE_NAMES = frozenset({"__name__", "__file__", "__doc__", "__spec__", "__loader__", "__package__", "__builtins__"})


def _scopes(table: symtable.SymbolTable) -> Iterator[symtable.SymbolTable]:
    yield table
    for child in table.get_children():
        yield from _scopes(child)


def undefined_names(source: str, path: str) -> list[CodeProblem]:
    """Names the code reads that nothing defines: not a builtin, not imported,
    not assigned at module level. Python finds them only when the line runs
    (a drafted ``raise InvalidInputError(...)`` on a path the birth tests
    never take); here they are found before anything runs. Nothing is said
    of code that does not parse (its own problem) or that imports ``*``."""
    try:
        tree = ast.parse(source)
        top = symtable.symtable(source, path, "exec")
    except (SyntaxError, ValueError):
        return []
    if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree)):
        return []
    defined = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    for scope in _scopes(top):
        defined |= {s.get_name() for s in scope.get_symbols() if s.is_declared_global() and s.is_assigned()}
    known = defined | set(dir(builtins)) | _MODULE_NAMES
    wanted: set[str] = set()
    for scope in _scopes(top):
        for sym in scope.get_symbols():
            at_module = scope is top and not sym.is_assigned() and not sym.is_imported()
            if sym.is_referenced() and (at_module or sym.is_global()) and sym.get_name() not in known:
                wanted.add(sym.get_name())
    first_line = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in wanted:
            first_line[node.id] = min(first_line.get(node.id, node.lineno), node.lineno)
    return [CodeProblem(path, first_line.get(name, 1), f"{name} is used but never defined (not a builtin, not imported, not assigned)")
            for name in sorted(wanted, key=lambda n: (first_line.get(n, 1), n))]


def check_draft(files: Mapping[str, str], capabilities: Mapping[str, Any]) -> list[CodeProblem]:
    """Every problem of the drafted files: forbidden constructs, imports beyond the capabilities, undefined names."""
    problems: list[CodeProblem] = []
    allowed = allowed_modules(capabilities)
    for path, source in sorted(files.items()):
        if not path.endswith(".py"):
            continue
        problems.extend(problems_in_source(source.encode(), path))
        extra = TEST_EXTRA if path.startswith("tests/") else frozenset()
        for module, line in imported_roots(source):
            if module in allowed or module in extra:
                continue
            key = capability_for(module)
            why = (f"it needs {key}, which the approved specification does not grant" if key
                   else "it is not among the modules an executor may import")
            problems.append(CodeProblem(path, line, f"import {module}: {why}"))
        problems.extend(undefined_names(source, path))
    return problems
