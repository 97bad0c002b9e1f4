"""Provenance in a turn: what each step's output holds, where each argument of a step came from,
and which arguments of a side effect are its targets (domain/provenance.py holds the matching).

A step's *source* is read from what it ran: a page (get_urls, any other executor with network), a
mail, a calendar, the contacts, an MCP server's tool, a file (one the request named, named as
instructions, or another), a folder's listing (one the request named, or another), the user's
answer; a step fed from earlier steps holds what the least trusted of them held.
A side effect's *targets* are read from its signed schema: a path it writes (``x-access:
write``), a URL (``format: uri``), the program it runs (``x-program``) and that program's
arguments, and a recipient (``to_user``, ``to``, ``recipients``, ``cc``, ``bcc``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from domain import provenance as prov
from domain.provenance import Provenance, Seen
from metnos.runtime.step.dialog_tools import DIALOG_TOOLS, USER_ANSWER
from metnos.runtime.step.intent import named_targets

_OWN_SOURCES = {
    "get_urls": prov.WEB, "read_urls_html": prov.WEB, "find_urls": prov.WEB, "read_messages": prov.MAIL,
    "read_events": prov.CALENDAR, "read_contacts": prov.CONTACTS,
}


def own_source(name: str) -> str | None:
    """What an executor's output holds whatever its arguments (a page, a mail, the calendar), or None."""
    return _OWN_SOURCES.get(name)


RECIPIENT_KEYS = frozenset({"to_user", "to", "recipient", "recipients", "cc", "bcc"})


def _paths_in(args: Mapping[str, Any], *keys: str) -> list[str]:
    found: list[str] = []
    for key in keys:
        value = args.get(key)
        found += [value] if isinstance(value, str) else [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
    return found


def _expanded(path: str, home: str) -> str:
    return posixpath.normpath(home + path[1:] if home and (path == "~" or path.startswith("~/")) else path)


def _named(path: str, named: tuple[str, ...], home: str, *, inside: bool) -> bool:
    mine = _expanded(path, home)
    for target in named:
        theirs = _expanded(target, home)
        if mine == theirs or inside and mine.startswith(theirs.rstrip("/") + "/"):
            return True
    return False


def step_source(name: str, *, origin: str, capabilities: set[str], args: Mapping[str, Any], request: str, home: str,
                fed_by: list[str]) -> str:
    """What the output of the step ``name`` ran with ``args`` holds (module docstring)."""
    named = named_targets(request)
    if name in DIALOG_TOOLS:
        own = prov.ANSWER
    elif name in _OWN_SOURCES:
        own = _OWN_SOURCES[name]
    elif origin == "mcp":
        own = prov.MCP
    elif name == "read_files":
        paths = _paths_in(args, "paths", "path")
        if paths and all(_named(p, named.files, home, inside=False) for p in paths):
            own = prov.INSTRUCTIONS if prov.names_as_instructions(request) else prov.NAMED_FILE
        else:
            own = prov.FILE
    elif name == "find_files":
        bases = _paths_in(args, "base_path", "root")
        own = prov.NAMED_FOLDER if bases and all(_named(b, named.folders, home, inside=True) for b in bases) else prov.FOLDER
    elif "code:exec" in capabilities:
        # What a program prints about the user's own disk (du, git log) reads like a listing.
        own = prov.FOLDER
    elif "network" in capabilities:
        own = prov.WEB
    else:
        own = prov.LOCAL
    return prov.least_trusted([own, *fed_by]) or own


def target_roles(schema: Any, name: str, capabilities: set[str]) -> dict[str, str]:
    """The target arguments of an executor, by their dotted path without list indices (``messages.to_user``)."""
    roles: dict[str, str] = {}
    root = schema if isinstance(schema, Mapping) else {}

    def resolved(node: Any, depth: int = 0) -> Any:
        # A signed schema's input is a "$ref" into its own definitions.
        while isinstance(node, Mapping) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/") and depth < 16:
            target: Any = root
            for part in node["$ref"][2:].split("/"):
                target = target.get(part) if isinstance(target, Mapping) else None
            node, depth = target, depth + 1
        return node

    def walk(node: Any, path: str) -> None:
        node = resolved(node)
        if not isinstance(node, Mapping):
            return
        key = path.rsplit(".", 1)[-1]
        if node.get("x-access") == "write":
            roles[path] = prov.PATH
        elif node.get("format") == "uri":
            roles[path] = prov.URL
        elif node.get("x-program"):
            roles[path] = prov.COMMAND
        elif key in RECIPIENT_KEYS:
            roles[path] = prov.RECIPIENT
        for sub, child in (node.get("properties") or {}).items():
            walk(child, f"{path}.{sub}" if path else str(sub))
        if isinstance(node.get("items"), Mapping):
            walk(node["items"], path)

    walk(schema, "")
    top = resolved(schema)
    if "code:exec" in capabilities and isinstance(top, Mapping) and "args" in (top.get("properties") or {}):
        # What a program is told to do is as much the command as its name.
        roles["args"] = prov.COMMAND
    return roles


def role_of(arg_path: str, roles: Mapping[str, str]) -> str | None:
    bare = ".".join(p for p in arg_path.split(".") if not p.isdigit())
    return roles.get(bare)


def settings_of(config: Mapping[str, Any]) -> dict[str, str]:
    """The strings of the executors' configuration, by their dotted key: values a setting supplies."""
    return {k: v for k, v in prov.leaves(config).items() if isinstance(v, str) and v.strip()}


def trace_step(*, args: Mapping[str, Any], pipings: Any, completed: Mapping[str, Any], request: str,
               settings: Mapping[str, str], seen: list[Seen], home: str) -> dict[str, Provenance]:
    """Each argument's provenance: piped ones from their step, completed ones from the request or the user's answer."""
    sources = {s.step: s.source for s in seen}
    piped = {p.dst_arg: Provenance(prov.STEP, step=p.src_step, field=p.src_field, source=sources.get(p.src_step, prov.LOCAL))
             for p in pipings}
    answered = {k: Provenance(prov.DIALOG) if v == USER_ANSWER else Provenance(prov.REQUEST)
                for k, v in completed.items() if k not in ("dropped", "kept_name", "unasked", "appended_only_new")}
    return prov.trace(args, request=request, settings=settings, seen=seen, piped=piped, answered=answered, home=home)


def provenance_json(traced: Mapping[str, Provenance]) -> dict[str, Any]:
    return {path: p.to_json() for path, p in traced.items()}
