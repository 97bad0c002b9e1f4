"""`metnos mcp serve` over stdio, driven by the official `mcp` SDK's client (issue 21 item 4).

The client spawns `python -m metnos mcp serve` against a test home, in both
layouts: it lists the tools, calls get_now, is refused a path outside a
grant with a structured error, and an action that asks for approval runs
only when the client's elicitation says yes. The log shows each call with
the mcp caller.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import orjson
import pytest
from mcp import Client, StdioServerParameters

from tests.support.cli_process import metnos_env
from tests.support.layouts import layout_env
from tests.support.workspace_template import initialise

pytestmark = pytest.mark.bwrap


def _env(tmp_path: Path, layout: str) -> dict[str, str]:
    env = metnos_env(layout_env(layout, tmp_path, os.environ))
    env.pop("METNOS_SANDBOX", None)
    return env


def _metnos(env: dict[str, str], *args: str) -> str:
    import subprocess

    done = subprocess.run([sys.executable, "-m", "metnos", *args], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _invocations(env: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """Each invocation's events (topic tail and state), by aggregate id."""
    out: dict[str, list[dict[str, Any]]] = {}
    for line in _metnos(env, "events", "--json", "--topic", "Invocation.", "--limit", "0").splitlines():
        event = orjson.loads(line)
        out.setdefault(event["aggregate_id"], []).append({"type": event["topic"].rsplit(".", 1)[-1], **event["state"]})
    return out


def _server(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "metnos", "mcp", "serve"], env=env, cwd=env["HOME"])


def _outbox(env: dict[str, str]) -> list[Path]:
    from metnos.settings.workspace import Workspace

    folder = Workspace.from_env(env).outbox_dir
    return sorted(folder.glob("*.json")) if folder.exists() else []


def test_an_mcp_client_lists_calls_and_is_refused_outside_a_grant(tmp_path: Path, layout: str) -> None:
    env = _env(tmp_path, layout)
    initialise(env)

    async def session() -> tuple[Any, Any, Any]:
        async with Client(_server(env)) as client:
            tools = await client.list_tools()
            now = await client.call_tool("get_now", {})
            outside = await client.call_tool("read_files", {"paths": ["/opt/not-granted/secret.txt"]})
            return tools, now, outside

    tools, now, outside = asyncio.run(session())

    by_name = {t.name: t for t in tools.tools}
    assert {"get_now", "read_files", "send_messages", "write_files"} <= set(by_name)
    # The input schema is the manifest's, references inlined.
    read_schema = by_name["read_files"].input_schema
    assert read_schema["type"] == "object" and "paths" in read_schema["properties"]
    assert "$ref" not in orjson.dumps(read_schema).decode()
    assert by_name["get_now"].description
    # Each tool's hints are its manifest's contract: reading, an additive send, an overwrite.
    hints = {name: (t.annotations.read_only_hint, t.annotations.destructive_hint, t.annotations.idempotent_hint)
             for name, t in by_name.items() if name in ("read_files", "send_messages", "write_files")}
    assert hints == {"read_files": (True, False, True), "send_messages": (False, False, False),
                     "write_files": (False, True, False)}

    assert now.is_error is False
    assert now.structured_content["ok"] is True
    assert now.structured_content["content"][:4].isdigit()

    assert outside.is_error is True
    error = outside.structured_content
    assert error["ok"] is False and error["error_class"] == "PolicyViolation"
    assert error["error"]["rule"] == "outside-grant" and error["error"]["argument"] == "/paths/0"

    calls = {events[0]["executor"]: events for events in _invocations(env).values() if events[0]["caller"].get("kind") == "mcp"}
    assert set(calls) == {"get_now", "read_files"}
    # A call that runs is a turn of its own (step 1 of a turn on the mcp channel); one refused before is not.
    assert calls["get_now"][0]["caller"] == {"kind": "mcp", "transport": "stdio", "client": "mcp", "channel": "mcp",
                                             "actor": "mcp:mcp", "step": 1}
    assert calls["get_now"][0]["turn_id"]
    assert [e["type"] for e in calls["get_now"]] == ["InvocationRequested", "InvocationCompleted"]
    assert calls["get_now"][1]["ok"] is True and calls["get_now"][1]["sandbox"] == "bwrap"
    # Refused before any spawn, and recorded as such.
    assert [e["type"] for e in calls["read_files"]] == ["InvocationRequested", "InvocationRefused"]
    assert calls["read_files"][1]["kind"] == "PolicyViolation"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_an_action_runs_only_when_the_elicitation_approves_it(tmp_path: Path, mode: str) -> None:
    """2026-07-28 clients answer through InputRequiredResult, older ones through elicitation/create."""
    env = _env(tmp_path, "metnos_home")
    initialise(env)
    asked: list[str] = []
    answers = iter([True, False])

    async def elicit(ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": next(answers)})

    message = {"messages": [{"to_user": "lucia", "body": "back at seven"}]}

    async def session() -> tuple[Any, Any, Any]:
        async with Client(_server(env), mode=mode, elicitation_callback=elicit) as client:
            yes = await client.call_tool("send_messages", message)
            no = await client.call_tool("send_messages", message)
        async with Client(_server(env), mode=mode) as mute:
            # This client cannot answer an elicitation: refused, and it says why.
            cannot = await mute.call_tool("send_messages", message)
        return yes, no, cannot

    yes, no, cannot = asyncio.run(session())

    assert len(asked) == 2 and "send_messages" in asked[0]
    assert yes.is_error is False and yes.structured_content["entries"][0]["channel"] == "outbox"
    assert no.is_error is True and no.structured_content["error_class"] == "NotApproved"
    assert cannot.is_error is True and cannot.structured_content["error_class"] == "NotApproved"
    assert cannot.structured_content["error"]["by"] == "mcp:no-elicitation"
    assert len(_outbox(env)) == 1  # only the approved one was sent

    sends = [events for events in _invocations(env).values() if events[0]["executor"] == "send_messages"]
    ran = [events for events in sends if events[-1]["type"] == "InvocationCompleted"]
    refused = [events for events in sends if events[-1]["type"] == "InvocationRefused"]
    assert len(ran) == 1 and ran[0][0]["caller"]["approved_by"] == "mcp:elicitation"
    assert sorted(e[-1]["error"]["by"] for e in refused) == ["mcp:elicitation", "mcp:no-elicitation"]


def test_a_client_cannot_forge_or_reuse_an_approval(tmp_path: Path) -> None:
    """The hostile client of the 2026-07-28 flow: it drives the retries itself, with answers it made up."""
    env = _env(tmp_path, "metnos_home")
    initialise(env)
    harmless = {"messages": [{"to_user": "me", "body": "hello"}]}
    other = {"messages": [{"to_user": "boss", "body": "I quit"}]}
    yes = {"approval": types.ElicitResult(action="accept", content={"approve": True})}

    async def never_asked(ctx: Any, params: Any) -> types.ElicitResult:
        raise AssertionError("the client drives the rounds itself here")

    async def session() -> list[Any]:
        async with Client(_server(env), elicitation_callback=never_asked) as client:
            s = client.session
            first = await s.call_tool("send_messages", harmless, allow_input_required=True)
            # The state issued for the harmless message, echoed with another one.
            swapped = await s.call_tool("send_messages", other, input_responses=yes, request_state=first.request_state,
                                        allow_input_required=True)
            # Spent by that attempt: not redeemable for the harmless one either.
            reused = await s.call_tool("send_messages", harmless, input_responses=yes, request_state=first.request_state,
                                       allow_input_required=True)
            # An answer with no state is no answer: the question is asked again.
            unasked = await s.call_tool("send_messages", other, input_responses=yes, allow_input_required=True)
            return [first, swapped, reused, unasked]

    first, swapped, reused, unasked = asyncio.run(session())
    assert isinstance(first, types.InputRequiredResult) and first.request_state
    for refused in (swapped, reused):
        assert isinstance(refused, types.CallToolResult) and refused.is_error is True
        assert refused.structured_content["error_class"] == "NotApproved"
        assert refused.structured_content["error"]["by"] == "mcp:stale-approval"
    assert isinstance(unasked, types.InputRequiredResult)
    assert _outbox(env) == []
    assert not [e for e in _invocations(env).values() if e[-1]["type"] == "InvocationCompleted" and e[0]["executor"] == "send_messages"]


def test_an_mcp_write_is_a_turn_listed_replayed_and_undone(tmp_path: Path) -> None:
    """Issue 35 item 3: a tool call from an MCP client is a turn like any other, on the mcp channel."""
    env = _env(tmp_path, "metnos_home")
    initialise(env)
    target = Path(env["HOME"]) / "from-mcp.txt"
    target.write_text("before\n")
    args = {"files": [{"path": str(target), "content": "after\n", "mode": "overwrite"}]}

    async def elicit(ctx: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    async def session() -> Any:
        async with Client(_server(env), mode="legacy", elicitation_callback=elicit) as client:
            return await client.call_tool("write_files", args)

    wrote = asyncio.run(session())
    assert wrote.is_error is False, wrote.structured_content
    assert target.read_text() == "after\n"
    turn_id = wrote.meta["metnos/turn_id"]
    listed = orjson.loads(_metnos(env, "turns", "list", "--json"))
    [row] = [t for t in listed if t["id"] == turn_id]
    assert (row["channel"], row["status"], row["text"]) == ("mcp", "answered", f"call write_files {orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode()}")
    shown = _metnos(env, "turns", "show", turn_id[:8])
    assert "ApprovalAnswered" in shown and "mcp:elicitation" in shown and "StepInvoked" in shown, shown
    replayed = orjson.loads(_metnos(env, "replay", turn_id, "--json"))
    [again] = replayed["results"]
    assert (again["turn_id"], again["same_path"], replayed["diverged"]) == (turn_id, True, 0), replayed
    undone = orjson.loads(_metnos(env, "undo", "--json"))
    assert undone["status"] == "undone" and undone["turn_id"] == turn_id, undone
    assert target.read_text() == "before\n"
