"""``metnos mcp serve``: the active executors as MCP tools, over stdio (docs/channels.md)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mcp", help="serve the executors to MCP clients")
    mcp_sub = p.add_subparsers(dest="mcp_command", required=True, metavar="SUBCOMMAND")
    serve = mcp_sub.add_parser("serve", help="speak MCP on standard input and output (for an MCP client that spawns Metnos)")
    serve.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    # Deferred: serving MCP loads the runtime and the MCP SDK, which `metnos --help` does not need.
    from metnos.services.channels import serve_mcp_stdio

    serve_mcp_stdio()
    return 0
