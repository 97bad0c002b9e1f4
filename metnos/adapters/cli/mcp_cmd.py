"""``metnos mcp``: serve the executors to MCP clients, and add MCP servers' tools as executors (docs/channels.md)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import orjson

from domain.errors import MetnosError
from metnos.settings import i18n


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mcp", help="serve the executors to MCP clients; add MCP servers' tools as executors")
    mcp_sub = p.add_subparsers(dest="mcp_command", required=True, metavar="SUBCOMMAND")
    serve = mcp_sub.add_parser("serve", help="speak MCP on standard input and output (for an MCP client that spawns Metnos)")
    serve.set_defaults(run=run_serve)

    add = mcp_sub.add_parser(
        "add", help="pin an MCP server, list its tools in the sandbox, and add each as an executor held for approval",
        usage="metnos mcp add NAME [--grant-read PATH] [--grant-write PATH] [--network HOST] [--yes] "
              "(-- COMMAND [ARGS...] | --url URL)")
    add.add_argument("name", help="the server's name in Metnos: lower-case letters, digits and '-'")
    add.add_argument("--url", help="a server over streamable HTTP, instead of a command")
    add.add_argument("--grant-read", action="append", default=[], metavar="PATH",
                     help="a file or folder the server may read (none by default; never your whole home); repeat for more")
    add.add_argument("--grant-write", action="append", default=[], metavar="PATH",
                     help="a file or folder the server may change (its tools with side effects keep a before-image for undo)")
    add.add_argument("--network", action="append", default=[], metavar="HOST",
                     help="a host the server may reach, through the egress proxy and [network] allow (none by default)")
    add.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                     help="a setting the stdio server reads from its environment (signed into its folders: never a secret)")
    add.add_argument("--yes", action="store_true", help="confirm the tools and grants without asking")
    # Everything after the name: its options, then `--` and the command, which may have options of its own.
    add.add_argument("command", nargs=argparse.REMAINDER, help="after --: the command that starts the server over stdio")
    add.set_defaults(run=run_add, add_parser=add)

    ls = mcp_sub.add_parser("list", help="the MCP servers added, what each is pinned to, its grants and its tools' states")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(run=run_list)

    ok = mcp_sub.add_parser("approve", help="lift the quarantine of a server's tools after checking the files and the pin")
    ok.add_argument("name")
    ok.set_defaults(run=run_approve)

    rm = mcp_sub.add_parser("remove", help="remove a server: its executors archived in the log, their folders deleted")
    rm.add_argument("name")
    rm.set_defaults(run=run_remove)


def run_serve(args: argparse.Namespace) -> int:
    # Deferred: serving MCP loads the runtime and the MCP SDK, which `metnos --help` does not need.
    from metnos.services.channels import serve_mcp_stdio

    serve_mcp_stdio()
    return 0


def _servers():  # noqa: ANN202
    # Deferred: adding a server boots the runtime, which `metnos --help` does not need.
    from metnos.services import mcp_servers

    return mcp_servers


def _path(value: str) -> str:
    # A grant is a path hint: absolute or under ~, as manifests write them.
    if value.startswith(("~", "/", "$HOME", "$WORKSPACE")):
        return value
    return os.path.abspath(value)


def _confirm(args: argparse.Namespace, plan: Any) -> bool:
    out = sys.stderr
    server = plan.server
    how = " ".join(server.command) if server.transport == "stdio" else server.url
    out.write(f"MCP server {server.name}: {how}\n")
    info = plan.server_info
    if info:
        out.write(f"  says it is {info.get('name', '?')} {info.get('version', '')}\n")
    if server.transport == "stdio":
        dist = server.pin.get("distribution")
        out.write(f"  pinned {server.pin['digest']} over {len(server.pin['files'])} file(s)"
                  + (f" of {dist}" if dist else "") + "\n")
    else:
        out.write("  pinned by its URL and its tools' definitions (no code here to hash)\n")
    grants = server.grants.to_record()
    granted = ", ".join(f"{k}: {', '.join(v)}" for k, v in grants.items() if v) or (
        "none (no files, no network)" if server.transport == "stdio" else "none (no files; no host but the server's own)")
    out.write(f"  grants: {granted}\n")
    if server.env:
        out.write(f"  environment: {', '.join(f'{k}={v}' for k, v in sorted(server.env.items()))}\n")
    for t in plan.tools:
        if not t.side_effects:
            effects = "read-only"
        elif not t.annotated:
            effects = "no annotations: treated as side-effecting, asked at every call"
        else:
            effects = "side effects, asked at every call"
        out.write(f"  {t.tool['name']} -> {t.executor} {t.version} ({effects})\n")
        description = " ".join((t.tool.get("description") or "").split())
        if description:
            out.write(f"    {description[:300]}\n")
        out.write(f"    input: {orjson.dumps(t.tool.get('inputSchema') or {}).decode()[:600]}\n")
    if plan.replaces:
        out.write(f"  replaces {len(plan.replaces)} earlier version(s) of this server's tools\n")
    out.flush()
    if args.yes:
        return True
    stdin = sys.stdin
    if stdin is None or stdin.closed or not stdin.isatty():
        out.write(i18n.said("cli.mcp_add_no_terminal"))
        return False
    try:
        return input(i18n.said("cli.mcp_add_confirm")).strip().lower() in i18n.said("ask.yes_words").split()
    except EOFError:
        return False


def _split_add(args: argparse.Namespace) -> tuple[argparse.Namespace, list[str]]:
    """The options written after NAME (argparse leaves them with the command) and the command after ``--``."""
    rest = list(args.command)
    before, command = (rest[:rest.index("--")], rest[rest.index("--") + 1:]) if "--" in rest else (rest, [])
    if not before:
        return args, command
    again = args.add_parser.parse_args([*before, args.name])
    for key in ("url", "yes"):
        setattr(args, key, getattr(args, key) or getattr(again, key))
    for key in ("grant_read", "grant_write", "network", "env"):
        setattr(args, key, [*getattr(args, key), *getattr(again, key)])
    if again.command:
        raise MetnosError(f"unexpected {' '.join(again.command)!r} before `--`: the server's command goes after `--`")
    return args, command


def run_add(args: argparse.Namespace) -> int:
    args, command = _split_add(args)
    if args.url and command:
        raise MetnosError("give either `-- COMMAND ARGS...` or `--url URL`, not both")
    if not args.url and not command:
        raise MetnosError("no server: write `metnos mcp add NAME -- COMMAND ARGS...` or `metnos mcp add NAME --url URL`")
    env = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise MetnosError(f"--env {item!r}: write NAME=VALUE, e.g. GIT_AUTHOR_NAME=Ada")
        env[key] = value
    installed = _servers().add(args.name, command=command or None, url=args.url, env=env,
                               read=[_path(p) for p in args.grant_read], write=[_path(p) for p in args.grant_write],
                               network=list(args.network), confirm=lambda plan: _confirm(args, plan))
    if installed is None:
        return 3
    for name, version in installed:
        print(f"{name} {version}: added, quarantined until `metnos mcp approve {args.name}`")
    return 0


def run_list(args: argparse.Namespace) -> int:
    rows = _servers().listed()
    if args.json:
        print(orjson.dumps(rows).decode())
        return 0
    for r in rows:
        how = " ".join(r["command"]) if r["transport"] == "stdio" else r["url"]
        grants = ", ".join(f"{k}: {', '.join(v)}" for k, v in r["grants"].items() if v) or "none"
        print(f"{r['server']} ({r['transport']}): {how}")
        print(f"  pinned {r['digest'] or 'by URL and tool definitions'}; grants {grants}")
        for t in r["tools"]:
            print(f"  {t['tool']:<24} {t['executor']:<28} {t['version']:<8} {t['state']}"
                  + (f" ({t['reason']})" if t["state"] != "active" and t["reason"] else ""))
    return 0


def run_approve(args: argparse.Namespace) -> int:
    # Approved is not yet born: the boot that follows runs each tool's birth test.
    tools = _servers().approve(args.name)
    for t in tools:
        print(f"{t['executor']} {t['version']}: {t['state']}" + (f" ({t['reason']})" if t["state"] != "active" and t["reason"] else ""))
    return 0 if tools and all(t["state"] == "active" for t in tools) else 1


def run_remove(args: argparse.Namespace) -> int:
    for name in _servers().remove(args.name):
        print(f"{name}: removed (archived in the log)")
    return 0
