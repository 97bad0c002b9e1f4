"""``metnos mcp serve``: the active executors as MCP tools, over stdio (docs/channels.md)."""

from __future__ import annotations

import argparse
from metnos.settings.loader import in_force


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mcp", help="serve the executors to MCP clients")
    mcp_sub = p.add_subparsers(dest="mcp_command", required=True, metavar="SUBCOMMAND")
    serve = mcp_sub.add_parser("serve", help="speak MCP on standard input and output (for an MCP client that spawns Metnos)")
    serve.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    import anyio

    from metnos.adapters.channels.gated_call import GatedCaller
    from metnos.adapters.channels.host import RuntimeHost
    from metnos.adapters.channels.mcp_server import serve_stdio
    from metnos.runtime.booted import Runtime
    from metnos.mechanisms.sandbox.bwrap import require_sandbox
    
    # Where no executor may run, no tool is offered: the client is told at once.
    require_sandbox()
    with Runtime.boot(in_force().workspace) as runtime:
        anyio.run(serve_stdio, GatedCaller(RuntimeHost(runtime), caller={"kind": "mcp"}))
    return 0
