"""``metnos skills``: import an agentskills.io skill as executors, list them, approve them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from domain.errors import MetnosError
from metnos.settings import i18n

# --allow KEY=VALUE: the capabilities a user may grant an imported executor.
_LIST_KEYS = ("fs:read", "fs:write", "network", "env")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("skills", help="import agentskills.io skills as executors, list and approve them")
    inner = p.add_subparsers(dest="skills_command", required=True, metavar="SUBCOMMAND")

    imp = inner.add_parser("import", help="translate a skill folder into executors, quarantined until approved")
    imp.add_argument("path", type=Path)
    imp.add_argument("--allow", action="append", default=[], metavar="CAPABILITY=VALUE",
                     help="grant a capability: fs:read=PATH, fs:write=PATH, network=HOST, env=NAME (a credential), "
                          "time:read=true; none by default; repeat for more")
    imp.add_argument("--yes", action="store_true", help="confirm the import and its capabilities without asking")
    imp.set_defaults(run=run_import)

    ls = inner.add_parser("list", help="the imported executors, their skill and state")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(run=run_list)

    ok = inner.add_parser("approve", help="lift the quarantine of an imported executor after checking it")
    ok.add_argument("name")
    ok.set_defaults(run=run_approve)


def _skills():  # noqa: ANN202
    # Deferred: the importer boots the runtime, which `metnos --help` does not need.
    from metnos.services import skills

    return skills


def parse_grants(items: list[str]) -> dict[str, Any]:
    grants: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise MetnosError(f"--allow {item!r}: write CAPABILITY=VALUE, e.g. network=api.example.org")
        if key in _LIST_KEYS:
            grants.setdefault(key, [])
            if value not in grants[key]:
                grants[key].append(value)
        elif key == "time:read":
            grants[key] = value.lower() in ("1", "true", "yes")
        else:
            raise MetnosError(f"--allow {item!r}: {key!r} is not a capability ({', '.join((*_LIST_KEYS, 'time:read'))})")
    return grants


def _confirm(args: argparse.Namespace, plan: Any) -> bool:
    out = sys.stderr
    out.write(f"skill {plan.skill.name}: {plan.skill.description}\n")
    for t in plan.translations:
        out.write(f"  {t.script} -> {t.name}\n")
        hints = {k: [v for v in vs if v not in plan.grants.get(k, ())] for k, vs in t.hints.items()}
        hints = {k: vs for k, vs in hints.items() if vs}
        if hints:
            flags = " ".join(f"--allow {'network' if k == 'network' else 'env'}={v}" for k, vs in hints.items() for v in vs)
            out.write(f"    the script mentions {', '.join(f'{k}: {v}' for k, v in hints.items())} (granted only with {flags})\n")
    granted = ", ".join(f"{k}={v}" for k, v in sorted(plan.grants.items())) or "none"
    out.write(f"  capabilities granted: {granted} (running the script: code:exec python3)\n")
    out.flush()
    if args.yes:
        return True
    stdin = sys.stdin
    if stdin is None or stdin.closed or not stdin.isatty():
        out.write(i18n.said("cli.skill_import_no_terminal"))
        return False
    try:
        return input(i18n.said("cli.skill_import_confirm")).strip().lower() in i18n.said("ask.yes_words").split()
    except EOFError:
        return False


def run_import(args: argparse.Namespace) -> int:
    grants = parse_grants(args.allow)
    installed = _skills().import_skill(args.path, grants, lambda plan: _confirm(args, plan))
    if installed is None:
        return 3
    for folder in installed:
        print(f"{folder.parent.name} {folder.name}: imported, quarantined until `metnos skills approve {folder.parent.name}`")
    return 0


def run_list(args: argparse.Namespace) -> int:
    rows = _skills().listed()
    if args.json:
        print(orjson.dumps(rows).decode())
        return 0
    print(i18n.said("list.skills"))
    for r in rows:
        print(f"{r['name']:<24} {r['version']:<8} {r['skill'] or '?':<20} {r['state']:<12} {r['reason'] or ''}")
    return 0


def run_approve(args: argparse.Namespace) -> int:
    # Approved is not yet born: the boot that follows runs its birth test like any executor's.
    state = _skills().approve(args.name)
    print(f"{args.name} 1.0.0: {state['state']}" + (f" ({state['reason']})" if state.get("reason") else ""))
    return 0 if state["state"] == "active" else 1
