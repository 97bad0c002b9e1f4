"""How a setting is declared: one pydantic field carrying its default, type, description and where it may come from.

``setting(default, "what it is", env="METNOS_X", flag="--x")`` marks the field; the loader
(metnos.settings.loader) reads the marks to know which variable or flag sets it, ``config show``
to say where a value came from, and the reference (metnos.settings.reference) to write docs/config.md.
The order in which they win is the same for every setting: a flag over its ``METNOS_*`` variable over
config.toml over the default.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo

PRECEDENCE = ("flag", "environment", "config.toml", "default")


def setting(default: Any = ..., description: str = "", *, env: str | None = None, toml: bool = True,
            flag: str | None = None, dest: str | None = None, secret: bool = False,
            default_factory: Any = None, **constraints: Any) -> Any:
    """A field of a settings section. ``env``: the variable that sets it; ``toml=False``: not a
    config.toml key; ``flag``/``dest``: the command-line option and its argparse name; ``secret``:
    never printed (only its name)."""
    marks: dict[str, Any] = {"toml": toml}
    if env:
        marks["env"] = env
    if flag:
        marks["flag"] = flag
        marks["dest"] = dest or flag.lstrip("-").replace("-", "_")
    if secret:
        marks["secret"] = True
    if default_factory is not None:
        return Field(default_factory=default_factory, description=description, json_schema_extra=marks, **constraints)
    return Field(default, description=description, json_schema_extra=marks, **constraints)


def fields_of(cls: Any) -> dict[str, FieldInfo]:
    """The declared fields of a section: a pydantic model's or a pydantic dataclass's."""
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        return dict(cls.model_fields)
    return dict(getattr(cls, "__pydantic_fields__", {}))


def is_section(annotation: Any) -> bool:
    return isinstance(annotation, type) and (issubclass(annotation, BaseModel) or (
        dataclasses.is_dataclass(annotation) and hasattr(annotation, "__pydantic_fields__")))


@dataclass(frozen=True)
class Leaf:
    """One setting: its dotted path (``turn.cap_steps``) and its declaration."""

    path: tuple[str, ...]
    info: FieldInfo

    @property
    def key(self) -> str:
        return ".".join(self.path)

    def mark(self, name: str, default: Any = None) -> Any:
        extra = self.info.json_schema_extra
        return extra.get(name, default) if isinstance(extra, dict) else default

    @property
    def env(self) -> str | None:
        return self.mark("env")

    @property
    def flag(self) -> str | None:
        return self.mark("flag")

    @property
    def in_toml(self) -> bool:
        return bool(self.mark("toml", True))

    @property
    def secret(self) -> bool:
        return bool(self.mark("secret", False))


def leaves(cls: Any, prefix: tuple[str, ...] = ()) -> Iterator[Leaf]:
    """Every setting under ``cls``, depth first, in declaration order; a nested section is walked into."""
    for name, info in fields_of(cls).items():
        if is_section(info.annotation):
            yield from leaves(info.annotation, (*prefix, name))
        else:
            yield Leaf((*prefix, name), info)


def reason_of(model: Any, err: Mapping[str, Any]) -> str:
    """What is wrong, in words, for one pydantic error of ``model``: an unknown key lists the known
    ones of its table and suggests the closest."""
    reason = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] not in ("extra_forbidden", "unexpected_keyword_argument"):
        return reason
    # The table the unknown key is in: a sub-table's own keys, not the section's.
    table: Any = model
    for part in err["loc"][:-1]:
        field = fields_of(table).get(str(part)) if is_section(table) else None
        table = field.annotation if field is not None else None
    known = list(fields_of(table)) if is_section(table) else []
    close = difflib.get_close_matches(str(err["loc"][-1]), known, n=1, cutoff=0.7)
    return f"unknown key (known: {', '.join(known)})" + (f"; did you mean {close[0]}?" if close else "")


def _number_type(annotation: Any) -> bool:
    """Whether ``annotation`` takes a number and not a bool (``int``, ``float``, ``float | None``)."""
    if annotation in (int, float):
        return True
    args = typing.get_args(annotation)
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and bool(args) and bool not in args and all(
        a in (int, float, type(None)) for a in args) and any(a in (int, float) for a in args)


def bools_for_numbers(cls: Any, data: Any, at: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Where ``data`` (a table of config.toml read for section ``cls``) gives true or false to a number.

    pydantic reads true as 1 for an int and a float alike, so ``cap_steps = true`` would run one step
    and ``approval_timeout_s = true`` wait one second: a mistake taken for a value. Walked into nested
    sections and into tables of sections (``[mail.accounts.x]``)."""
    if not isinstance(data, Mapping):
        return
    fields = fields_of(cls) if is_section(cls) else {}
    for key, value in data.items():
        info = fields.get(str(key))
        if info is None:
            continue
        annotation = info.annotation
        if isinstance(value, bool) and _number_type(annotation):
            yield (*at, str(key))
        elif is_section(annotation):
            yield from bools_for_numbers(annotation, value, (*at, str(key)))
        elif typing.get_origin(annotation) is dict and isinstance(value, Mapping):
            inner = typing.get_args(annotation)[-1]
            for name, item in value.items():
                if isinstance(item, bool) and _number_type(inner):
                    yield (*at, str(key), str(name))
                elif is_section(inner):
                    yield from bools_for_numbers(inner, item, (*at, str(key), str(name)))
