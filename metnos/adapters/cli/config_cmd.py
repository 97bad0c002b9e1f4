"""``metnos config show|check``: config.toml as Metnos reads it, every section checked."""

from __future__ import annotations

import argparse
import os

import orjson

from metnos.settings.config_file import check_config
from metnos.settings.workspace import Workspace


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="config.toml: what is in force, and whether it is valid")
    inner = p.add_subparsers(dest="config_command", required=True, metavar="SUBCOMMAND")
    show = inner.add_parser("show", help="every section as Metnos reads it (defaults, config.toml, the environment)")
    show.add_argument("--json", action="store_true")
    show.set_defaults(run=run_show)
    check = inner.add_parser("check", help="check every section of config.toml; exit 2 naming the first wrong key")
    check.set_defaults(run=run_check)


def run_check(args: argparse.Namespace) -> int:
    config_file = Workspace.from_env().config_file
    sections = check_config(config_file, os.environ)
    where = str(config_file) if config_file.is_file() else f"{config_file} (absent: every default)"
    print(f"{where}: valid ({len(sections)} sections: {', '.join(sections)})")
    return 0


def run_show(args: argparse.Namespace) -> int:
    config_file = Workspace.from_env().config_file
    sections = check_config(config_file, os.environ)
    if args.json:
        print(orjson.dumps({"file": str(config_file), "sections": sections}, option=orjson.OPT_INDENT_2).decode())
        return 0
    print(f"# {config_file}{'' if config_file.is_file() else ' (absent: every default)'}")
    for name, values in sections.items():
        print(f"\n[{name}]")
        for key, value in values.items():
            print(f"{key} = {orjson.dumps(value).decode()}")
    return 0
