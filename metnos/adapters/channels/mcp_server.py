"""Metnos as an MCP server: the active executors as tools (docs/channels.md).

Built on the official ``mcp`` SDK's low-level ``Server``. ``tools/list``
offers each active executor with its manifest's name, English description
and input schema (references inlined). ``tools/call`` goes through
:class:`~metnos.services.gated_call.GatedCaller`, the same schema, policy,
vaglio and sandbox a turn's step passes, recorded with the caller
``{"kind": "mcp", "transport": ..., "client": ...}``.

Where the vaglio asks for approval (an executor with side effects that is
not idempotent), the user is asked through the client as an elicitation: a
form with one boolean, ``approve``. A client on the 2026-07-28 protocol gets
it as an ``InputRequiredResult`` and retries the call with the answer (the
retry is checked again from scratch, and its ``request_state`` is one-shot and
bound to the exact tool and arguments); an older client gets an
``elicitation/create`` request on its channel. A client that declared no
elicitation capability cannot answer: the call is refused with an error
that says so, and nothing runs. Every refusal is a tool result with
``isError`` and a structured ``{"ok": false, "error_class", "error"}``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
import orjson
from mcp.server.lowlevel import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

import metnos
from domain.canonical import canonical_hash
from metnos.services.gated_call import CallResult, Checked, GatedCaller, Tool

APPROVAL_KEY = "approval"
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve", "description": "run it (true) or not (false)"}},
    "required": ["approve"],
}
# How long an elicited approval may take, and a pending one stay redeemable.
APPROVAL_TIMEOUT_S = 300.0
NO_ELICITATION = "mcp:no-elicitation"


class PendingApprovals:
    """The ``request_state`` of approvals asked but not yet answered (2026-07-28 flow).

    A state is a random token bound to the exact tool and arguments; it can
    be redeemed once, before it expires. A client cannot forge an approval
    for other arguments by echoing a state it got for harmless ones.
    """

    def __init__(self, ttl_s: float = APPROVAL_TIMEOUT_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self._pending: dict[str, tuple[str, float]] = {}

    def issue(self, name: str, args: dict[str, Any]) -> str:
        self._expire()
        token = secrets.token_urlsafe(24)
        self._pending[token] = (canonical_hash({"name": name, "args": args}), self.clock() + self.ttl_s)
        return token

    def redeem(self, token: str | None, name: str, args: dict[str, Any]) -> bool:
        self._expire()
        found = self._pending.pop(token, None) if token else None
        return found is not None and found[0] == canonical_hash({"name": name, "args": args})

    def _expire(self) -> None:
        now = self.clock()
        for token in [t for t, (_, until) in self._pending.items() if until < now]:
            del self._pending[token]


def approval_message(checked: Checked) -> str:
    shown = orjson.dumps(checked.args, option=orjson.OPT_SORT_KEYS).decode()
    reason = checked.verdict.reason if checked.verdict else "it needs your approval"
    return f"Metnos: run {checked.name} {shown[:500]}?\n{reason}"


def annotations(tool: Tool) -> types.ToolAnnotations:
    """The manifest's contract as MCP's hints: a client may then confirm only what can do harm."""
    return types.ToolAnnotations(read_only_hint=not tool.side_effects, destructive_hint=tool.destructive,
                                 idempotent_hint=tool.idempotent)


def tool_result(result: CallResult) -> types.CallToolResult:
    text = orjson.dumps(result.observation, option=orjson.OPT_SORT_KEYS).decode()
    # The turn the call ran as, for `metnos turns show`, `metnos replay` and `metnos undo`.
    meta = {"metnos/turn_id": result.extra["turn_id"]} if result.extra.get("turn_id") else None
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structured_content=result.observation, is_error=not result.ok, meta=meta)


def _elicitation_answer(answer: Any) -> bool:
    return isinstance(answer, types.ElicitResult) and answer.action == "accept" and bool((answer.content or {}).get("approve") is True)


def _client_name(ctx: ServerRequestContext) -> str:
    params = ctx.session.client_params
    info = getattr(params, "client_info", None) if params is not None else None
    return str(getattr(info, "name", "") or "unknown")


def _can_elicit(ctx: ServerRequestContext) -> bool:
    caps = ctx.session.client_capabilities
    return caps is not None and caps.elicitation is not None


def build_server(gate: GatedCaller, *, transport: str, approval_timeout_s: float = APPROVAL_TIMEOUT_S) -> Server:
    pending = PendingApprovals(ttl_s=approval_timeout_s)

    async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        tools = await anyio.to_thread.run_sync(gate.tools)
        return types.ListToolsResult(tools=[types.Tool(name=t.name, description=t.description, input_schema=t.input_schema,
                                                       annotations=annotations(t)) for t in tools])

    async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult | types.InputRequiredResult:
        args = dict(params.arguments or {})
        caller = {"transport": transport, "client": _client_name(ctx)}
        checked = await anyio.to_thread.run_sync(lambda: gate.check(params.name, args, caller=caller))
        if checked.refusal is not None:
            return tool_result(gate.refused(checked))
        approved_by: str | None = None
        if checked.needs_approval:
            if not _can_elicit(ctx) and gate.has_inbox():
                # The client cannot ask the user: the daemon's one inbox does (the dashboard, Telegram, the CLI).
                approved, by = await anyio.to_thread.run_sync(lambda: gate.ask_inbox(checked))
                if not approved:
                    return tool_result(await anyio.to_thread.run_sync(lambda: gate.decline(checked, by)))
                result = await anyio.to_thread.run_sync(lambda: gate.run_turn(checked, approved_by=by))
                return tool_result(result)
            if not _can_elicit(ctx):
                return tool_result(await anyio.to_thread.run_sync(lambda: gate.decline(checked, NO_ELICITATION)))
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                if params.request_state is None:
                    request = types.ElicitRequest(params=types.ElicitRequestFormParams(message=approval_message(checked), requested_schema=APPROVAL_SCHEMA))
                    return types.InputRequiredResult(input_requests={APPROVAL_KEY: request}, request_state=pending.issue(params.name, args))
                if not pending.redeem(params.request_state, params.name, args):
                    return tool_result(await anyio.to_thread.run_sync(lambda: gate.decline(checked, "mcp:stale-approval")))
                answer = (params.input_responses or {}).get(APPROVAL_KEY)
            else:
                try:
                    with anyio.fail_after(approval_timeout_s):
                        answer = await ctx.session.elicit_form(approval_message(checked), APPROVAL_SCHEMA, related_request_id=ctx.request_id)
                except TimeoutError:
                    return tool_result(await anyio.to_thread.run_sync(lambda: gate.decline(checked, "mcp:timeout")))
                except MCPError:
                    # The client could not show the question (or failed to): no answer is no.
                    return tool_result(await anyio.to_thread.run_sync(lambda: gate.decline(checked, "mcp:elicitation-failed")))
            if not _elicitation_answer(answer):
                return tool_result(await anyio.to_thread.run_sync(lambda: gate.decline(checked, "mcp:elicitation")))
            approved_by = "mcp:elicitation"
        # A turn of its own: listed in `metnos turns list`, replayable, undoable with `metnos undo`.
        result = await anyio.to_thread.run_sync(lambda: gate.run_turn(checked, approved_by=approved_by))
        return tool_result(result)

    return Server("metnos", version=metnos.__version__,
                  instructions="Metnos executors: signed, sandboxed, recorded. Calls with side effects ask for approval.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(gate: GatedCaller) -> None:
    """The hook of ``metnos mcp serve`` (metnos/services/extensions.py)."""
    server = build_server(gate, transport="stdio")
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
