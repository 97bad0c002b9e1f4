"""A handler that declares the fields it reads (``reads``) reads exactly those.

A rebuild decodes only the declared fields, so a handler reading one more
would fail on the records of a rebuild; one declaring a field it never reads
makes every rebuild decode it for nothing. Checked on the handlers' code, as
Temporal checks workflow code for determinism: following the helpers a handler
hands its record to.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

import pytest

from projections.audit import AuditFold
from projections.base import Fold, fields_read, reads
from projections.catalog import CatalogueFold
from projections.mnestome import MnestomeFold
from projections.schedules import SchedulesFold
from projections.turns import TurnIndexFold, TurnLinesFold

ALWAYS = {"originator_id", "originator_version", "timestamp"}
FOLDS = [AuditFold(), CatalogueFold(), MnestomeFold(), SchedulesFold(), TurnIndexFold(), TurnLinesFold()]


def keys_read(fn: Callable[..., Any], position: int = 1) -> set[str]:
    """The keys ``fn`` reads of the record it takes as its ``position``-th argument."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    func = next(node for node in tree.body if isinstance(node, ast.FunctionDef))
    record = func.args.args[position].arg
    scope = {**fn.__globals__, **inspect.getclosurevars(fn).nonlocals}
    keys: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == record:
            key = node.slice
            keys.add(key.value if isinstance(key, ast.Constant) else scope[key.id])  # type: ignore[attr-defined]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == record:
            pytest.fail(f"{fn.__qualname__} reads its record by .{node.attr}; use record[...]")
        elif isinstance(node, ast.Call):
            for index, arg in enumerate(node.args):
                if isinstance(arg, ast.Name) and arg.id == record:
                    keys |= keys_read(scope[node.func.id], index)  # type: ignore[attr-defined]
    return keys


def declared_handlers() -> list[tuple[str, str, Callable[..., Any]]]:
    return [
        (fold.name, topic.rsplit(":", 1)[-1], handler)
        for fold in FOLDS for topic, handler in fold.by_topic.items() if fields_read(handler) is not None
    ]


@pytest.mark.parametrize(("fold", "event", "handler"), declared_handlers(), ids=lambda x: x if isinstance(x, str) else "")
def test_a_handler_reads_what_it_declares_and_nothing_more(fold: str, event: str, handler: Callable[..., Any]) -> None:
    assert keys_read(handler) - ALWAYS == fields_read(handler)


def test_the_turn_and_audit_folds_declare_every_handler() -> None:
    # The folds a turn's events go through: the bulk of every rebuild.
    for fold in (AuditFold(), TurnIndexFold(), TurnLinesFold()):
        assert all(fields_read(h) is not None for h in fold.by_topic.values()), fold.name


def test_the_check_sees_a_field_read_past_the_declaration() -> None:
    @reads("text")
    def handler(state: dict[str, Any], record: dict[str, Any], position: int) -> None:
        state["x"] = (record["text"], _helper(record))

    assert keys_read(handler) == {"text", "actor"}


def _helper(record: dict[str, Any]) -> Any:
    return record["actor"]


def test_merged_fields_are_the_union_and_all_wins() -> None:
    from projections.base import fields_of

    class A(Fold):
        name = "a"

        def initial(self) -> dict[str, Any]:
            return {}

        def handlers(self) -> dict[type, Any]:
            return {int: reads("x")(lambda s, r, p: None), str: reads("y")(lambda s, r, p: None)}

    class B(A):
        def handlers(self) -> dict[type, Any]:
            return {int: reads("z")(lambda s, r, p: None), str: lambda s, r, p: None}

    assert fields_of([A(), B()]) == {"builtins:int": frozenset({"x", "z"}), "builtins:str": None}
