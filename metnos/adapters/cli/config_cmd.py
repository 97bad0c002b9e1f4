"""``metnos config show|check``: every setting as Metnos reads it, and where each value came from."""

from __future__ import annotations

import argparse

import orjson

from metnos.settings.config_file import effective, in_force_sections
from metnos.settings.declare import PRECEDENCE
from metnos.settings.model import TOML_SECTIONS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="config.toml: what is in force, and whether it is valid")
    inner = p.add_subparsers(dest="config_command", required=True, metavar="SUBCOMMAND")
    show = inner.add_parser("show", help="every setting in force and where it came from (default, config.toml, a variable, a flag)")
    show.add_argument("--json", action="store_true")
    show.set_defaults(run=run_show)
    check = inner.add_parser("check", help="check every section of config.toml; exit 2 naming the first wrong key")
    check.set_defaults(run=run_check)


def run_check(args: argparse.Namespace) -> int:
    # The command's settings were read and checked before it ran (metnos.adapters.cli.preflight).
    loaded = args.settings
    config_file = loaded.config_file
    sections = in_force_sections(loaded)
    where = str(config_file) if config_file.is_file() else f"{config_file} (absent: every default)"
    print(f"{where}: valid ({len(sections)} sections: {', '.join(sections)})")
    return 0


def run_show(args: argparse.Namespace) -> int:
    loaded = args.settings
    config_file = loaded.config_file
    rows = effective(loaded)
    if args.json:
        shown = {"file": str(config_file), "precedence": list(PRECEDENCE), "sections": in_force_sections(loaded),
                 "settings": {row["key"]: {"value": row["value"], "from": row["from"]} for row in rows}}
        print(orjson.dumps(shown, option=orjson.OPT_INDENT_2).decode())
        return 0
    print(f"# {config_file}{'' if config_file.is_file() else ' (absent: every default)'}")
    print(f"# each value's source; the first of these that sets it wins: {' > '.join(PRECEDENCE)}")
    section = None
    for row in rows:
        name, _, key = row["key"].partition(".")
        if name != section:
            section = name
            print(f"\n[{name}]" if name in TOML_SECTIONS else f"\n# {name} (environment only)")
        print(f"{key} = {orjson.dumps(row['value']).decode()}  # {row['from']}")
    print("\n# the LLM tiers in force")
    for line in loaded.llm().describe():
        print(f"# {line}")
    return 0
