"""MCP servers as executors: add (pinned, quarantined until approved), approve, remove, list."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metnos.runtime.mcp.derive import Grants
from metnos.runtime.mcp.servers import AddPlan, approve as approve_server, install_plan, plan_add, remove as remove_server, servers
from metnos.services import wiring


def add(name: str, *, command: list[str] | None, url: str | None, read: list[str], write: list[str],
        network: list[str], confirm: Callable[[AddPlan], bool], env: dict[str, str] | None = None) -> list[tuple[str, str]] | None:
    """Pin the server, list its tools in the sandbox, and on ``confirm(plan)`` install one executor per tool,
    each quarantined until approved. (executor, version) installed, or None when not confirmed."""
    grants = Grants(tuple(read), tuple(write), tuple(network))
    with wiring.boot(birth=False) as rt:
        plan = plan_add(rt, name, command=command, url=url, grants=grants, env=env)
        if not confirm(plan):
            return None
        return [(p.parent.name, p.name) for p in install_plan(rt, plan)]


def approve(name: str) -> list[dict[str, Any]]:
    """Lift the approval quarantine of the server's tools; their state after the boot that follows,
    which runs their birth tests (the server started in the sandbox, each tool as approved)."""
    with wiring.boot(birth=False) as rt:
        approve_server(rt, name)
    with wiring.boot() as rt:
        return next((s["tools"] for s in servers(rt) if s["server"] == name), [])


def remove(name: str) -> list[str]:
    with wiring.boot(birth=False) as rt:
        return remove_server(rt, name)


def listed() -> list[dict[str, Any]]:
    with wiring.boot(birth=False) as rt:
        return servers(rt)
