"""What an executor's Python may not say, checked once, when it is signed.

seeds/000 ch. 3: "No dynamic import, no eval, no exec." Every ``.py`` of the
folder (main.py, tests/birth.py, helpers) is parsed and walked; a use of
``eval``, ``exec``, ``compile`` or ``__import__``, any mention of
``importlib``, and the obvious routes to them (``builtins``,
``__builtins__``, ``getattr(x, "eval")``) are refused with the file and line.
A static check cannot see every dynamic trick; the sandbox is the fence, this
keeps the code that is signed readable for what it does. Also refused: a
top-level module or package named like one of the standard library, which
would shadow it for the executor and for the host code that runs beside it.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

FORBIDDEN_NAMES = frozenset({"eval", "exec", "compile", "__import__", "importlib", "__builtins__"})
# Attributes refused on any object: nothing legitimate is called so.
# (``compile`` is not among them: ``re.compile`` is fine, ``builtins.compile`` is
# caught because ``builtins`` itself is refused.)
FORBIDDEN_ATTRIBUTES = frozenset({"eval", "exec", "__import__", "importlib", "__builtins__"})
FORBIDDEN_MODULES = frozenset({"importlib", "builtins"})


@dataclass(frozen=True)
class CodeProblem:
    file: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.what}"


def _module_root(name: str | None) -> str:
    return (name or "").split(".", 1)[0]


def problems_in_source(source: bytes, file: str) -> Iterator[CodeProblem]:
    try:
        tree = ast.parse(source, filename=file)
    except SyntaxError as e:
        yield CodeProblem(file, e.lineno or 0, f"does not parse: {e.msg}")
        return
    except ValueError as e:  # NUL bytes
        yield CodeProblem(file, 0, f"does not parse: {e}")
        return
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            yield CodeProblem(file, line, f"{node.id} is not allowed in an executor")
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES:
            yield CodeProblem(file, line, f".{node.attr} is not allowed in an executor")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _module_root(alias.name) in FORBIDDEN_MODULES:
                    yield CodeProblem(file, line, f"import {alias.name} is not allowed in an executor")
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and _module_root(node.module) in FORBIDDEN_MODULES:
                yield CodeProblem(file, line, f"from {node.module} import is not allowed in an executor")
            for alias in node.names:
                if alias.name in FORBIDDEN_NAMES:
                    yield CodeProblem(file, line, f"importing {alias.name} is not allowed in an executor")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "setattr", "hasattr", "delattr")):
            for arg in node.args[1:2]:
                if isinstance(arg, ast.Constant) and arg.value in FORBIDDEN_NAMES:
                    yield CodeProblem(file, line, f"{node.func.id}(..., {arg.value!r}) is not allowed in an executor")


def shadowing_problems(paths: Iterable[str]) -> Iterator[CodeProblem]:
    """Top-level names that would hide a standard-library module."""
    seen: set[str] = set()
    for path in paths:
        parts = PurePosixPath(path).parts
        top = parts[0]
        name = top[:-3] if len(parts) == 1 and top.endswith(".py") else (top if len(parts) > 1 else None)
        if name and name in sys.stdlib_module_names and name not in seen:
            seen.add(name)
            yield CodeProblem(top, 0, f"{top!r} has the name of the standard library's {name!r}, which it would shadow")
