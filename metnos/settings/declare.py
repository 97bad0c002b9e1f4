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
