"""The raise sites of Metnos's own errors, read from the source (not imported): each site's class and
the shape of its message, the literal parts with a ``{field}`` for each value put in it.

tests/unit/test_error_catalogue.py holds every user-facing shape against the catalogue's ``error.*``
templates (metnos/settings/i18n/en.json): an error a person can read at the command line is said in
their language only when a template makes its message.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The packages lint-imports knows (pyproject.toml); executors/ run sandboxed and speak to the model, not to a person.
PACKAGES = ("metnos", "domain", "projections", "replay")
# Bases from outside the project that make a class an exception: the log's own (eventsourcing).
FOREIGN_EXCEPTIONS = {"DataError", "OperationalError", "PersistenceError", "IntegrityError", "ProgrammingError"}


@dataclass(frozen=True)
class Site:
    path: str  # relative to the repository
    line: int
    cls: str
    shape: str  # a template: literal braces doubled, each value a {field}

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def skeleton(template: str) -> str:
    """A template with its field names dropped: two templates that make the same messages have the same skeleton."""
    from string import Formatter

    return "".join(literal.replace("{", "{{").replace("}", "}}") + ("{}" if name is not None else "")
                   for literal, name, _, _ in Formatter().parse(template))


def has_words(template: str) -> bool:
    """A shape with a word of its own to translate (not only values and punctuation, like ``{a}: {b}``)."""
    from string import Formatter

    return any(re.search(r"[A-Za-z]{2}", literal) for literal, _, _, _ in Formatter().parse(template))


def _files() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def _base_names(node: ast.ClassDef) -> list[str]:
    names = []
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.append(base.id)
        elif isinstance(base, ast.Attribute):
            names.append(base.attr)
    return names


def exception_classes(trees: dict[Path, ast.Module]) -> dict[str, set[str]]:
    """Each exception class the project defines, by name, with the names of its bases."""
    defined: dict[str, set[str]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                defined.setdefault(node.name, set()).update(_base_names(node))
    builtin = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type) and issubclass(getattr(builtins, n), BaseException)}
    known = builtin | FOREIGN_EXCEPTIONS
    own: set[str] = set()
    while True:
        more = {name for name, bases in defined.items() if name not in own and bases & (known | own)}
        if not more:
            return {name: defined[name] for name in own}
        own |= more


def descends(cls: str, root: str, classes: dict[str, set[str]]) -> bool:
    seen, todo = set(), [cls]
    while todo:
        name = todo.pop()
        if name == root:
            return True
        if name not in seen:
            seen.add(name)
            todo.extend(classes.get(name, ()))
    return False


class _Shape:
    """The template of one message expression: fields named after the values they show."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def of(self, node: ast.expr) -> list[str]:
        """The templates ``node`` can make (one per branch of a conditional), none when it is not text."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value.replace("{", "{{").replace("}", "}}")]
        if isinstance(node, ast.JoinedStr):
            parts = [""]
            for value in node.values:
                if isinstance(value, ast.Constant):
                    parts = [p + str(value.value).replace("{", "{{").replace("}", "}}") for p in parts]
                elif isinstance(value, ast.FormattedValue):
                    parts = [p + "{" + self._field(value) + "}" for p in parts]
            return parts
        if isinstance(node, ast.IfExp):
            return self.of(node.body) + self.of(node.orelse)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.of(node.left), self.of(node.right)
            return [a + b for a in left for b in right]
        return []

    def _field(self, value: ast.FormattedValue) -> str:
        identity = ast.dump(value)
        if identity not in self.names:
            name = _name_of(value.value)
            taken = set(self.names.values())
            candidate, n = name, 2
            while candidate in taken:
                candidate, n = f"{name}{n}", n + 1
            self.names[identity] = candidate
        return self.names[identity]


def _name_of(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id.strip("_") or "value"
    if isinstance(node, ast.Attribute):
        return node.attr.strip("_") or "value"
    if isinstance(node, ast.Subscript):
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            return node.slice.value
        return _name_of(node.value)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "join" and node.args:
            return _name_of(node.args[0])
        if isinstance(func, ast.Name) and func.id in ("len",) and node.args:
            return "count"
        if isinstance(func, ast.Name) and func.id in ("str", "repr", "sorted", "list", "int", "float", "type") and node.args:
            return _name_of(node.args[0])
        if isinstance(func, ast.Attribute):
            # self.state_of(version) shows a state; key.hex() shows the key.
            if isinstance(func.value, ast.Name) and func.value.id == "self":
                return func.attr.removesuffix("_of").removeprefix("get_").strip("_") or "value"
            return _name_of(func.value)
        if isinstance(func, ast.Name):
            return func.id.strip("_")
    if isinstance(node, (ast.GeneratorExp, ast.ListComp)):
        return _name_of(node.elt)
    return "value"


def _message_args(call: ast.Call, message_at: int | str | tuple[int, ...]) -> list[ast.expr]:
    if isinstance(message_at, tuple):
        return [arg for at in message_at for arg in _message_args(call, at)]
    if isinstance(message_at, str):
        for kw in call.keywords:
            if kw.arg == message_at:
                return [kw.value]
        return []
    return [call.args[message_at]] if len(call.args) > message_at else []


def _assignment(node: ast.AST, name: str) -> ast.expr | None:
    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
        return node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
        return node.value
    return None


def _assigned(function: ast.AST | None, before: ast.stmt | None, raised_at: int, name: str) -> list[ast.expr]:
    """The values a function assigns to a local ``name`` before raising it: the statement just before the raise
    when it is one (``msg = f"..."; raise X(msg)``), else every assignment above it (a message chosen by branches)."""
    if function is None:
        return []
    just_before = _assignment(before, name) if before is not None else None
    if just_before is not None:
        return [just_before]
    found = []
    for node in ast.walk(function):
        value = _assignment(node, name)
        if value is not None and getattr(node, "lineno", 0) < raised_at:
            found.append(value)
    return found


def _callee(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def scan(message_argument: dict[str, int | str | tuple[int, ...]] | None = None) -> tuple[list[Site], dict[str, set[str]]]:
    """Every raise site of the project's own exception classes whose message is text written there (a literal,
    an f-string, or a local assigned one), and the classes. ``message_argument`` names, for a class whose
    constructor does not take its message first, which argument is the message (a position or a keyword).
    The message an exception builds in its own ``__init__`` (``super().__init__(f"...")``) is a site too."""
    message_argument = message_argument or {}
    trees = {path: ast.parse(path.read_text(encoding="utf-8"), filename=str(path)) for path in _files()}
    classes = exception_classes(trees)
    sites: list[Site] = []
    for path, tree in trees.items():
        rel = str(path.relative_to(ROOT))
        for owner, function, before, call, cls in _calls(tree, classes):
            at = message_argument.get(cls, 0)
            if owner is not None and owner.name == cls and _callee(call) == "__init__":
                # super().__init__ takes what the base's constructor takes.
                at = next((message_argument[b] for b in _base_names(owner) if b in message_argument), 0)
            shape = _Shape()
            for arg in _message_args(call, at):
                values = [arg] if not isinstance(arg, ast.Name) else _assigned(function, before, call.lineno, arg.id)
                for value in values:
                    for template in shape.of(value):
                        sites.append(Site(rel, call.lineno, cls, template))
    return sorted(set(sites), key=lambda s: (s.path, s.line, s.shape)), classes


def _calls(tree: ast.Module, classes: dict[str, set[str]]) -> Iterator[tuple[ast.ClassDef | None, ast.AST | None, ast.stmt | None, ast.Call, str]]:
    """(class, function, the statement before, call, exception class) for each ``raise Own(...)`` and each
    ``super().__init__(...)`` in an own exception's ``__init__``."""

    def children(node: ast.AST) -> Iterator[tuple[ast.AST, ast.stmt | None]]:
        for _, value in ast.iter_fields(node):
            if isinstance(value, list):
                previous = None
                for item in value:
                    if isinstance(item, ast.AST):
                        yield item, previous
                        previous = item if isinstance(item, ast.stmt) else None
            elif isinstance(value, ast.AST):
                yield value, None

    def visit(node: ast.AST, owner: ast.ClassDef | None, function: ast.AST | None, made: bool = False) -> Iterator:
        for child, before in children(node):
            if isinstance(child, ast.ClassDef):
                yield from visit(child, child, None)
                continue
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from visit(child, owner, child)
                continue
            if isinstance(child, ast.Raise) and isinstance(child.exc, ast.Call):
                name = _callee(child.exc)
                if name in classes:
                    yield owner, function, before, child.exc, name
                # Its arguments are looked into below: an error built there is not one more site.
                yield from visit(child.exc, owner, function, made=True)
                continue
            if isinstance(child, ast.Call) and not made and _callee(child) in classes:
                # An error made to be raised elsewhere (``return SettingsError(...)``, ``error = Refused(...)``).
                yield owner, function, before, child, _callee(child)
            if (isinstance(child, ast.Call) and owner is not None and owner.name in classes
                    and isinstance(function, ast.FunctionDef) and function.name == "__init__"
                    and isinstance(child.func, ast.Attribute) and child.func.attr == "__init__"
                    and isinstance(child.func.value, ast.Call) and _callee(child.func.value) == "super"):
                yield owner, function, None, child, owner.name
            yield from visit(child, owner, function, made)

    yield from visit(tree, None, None)
