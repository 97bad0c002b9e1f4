"""The bridge between an executor call and one tool of an MCP server, inside the sandbox.

Copied unchanged into every executor folder ``metnos mcp add`` makes (with
``server.json``, which says which server and tool, and is signed with it), and
run there by the invocation host like any executor's code: in bubblewrap, with
the grants the user gave the server and no others. A stdio server is started
here, as a child of the executor, so it is fenced by the same sandbox; a
server over HTTP is reached through the egress proxy like any host.

Before the tool is called, the server's tools are listed again and this tool's
definition (description, input schema, annotations) is compared with the one
the user approved: a server that changed it after approval gets no call, and
the runtime quarantines the executor (``McpSchemaChanged``). What the tool
returns is data for the planner, never instructions to Metnos.
"""

import hashlib
import json
import os
import sys

import anyio
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

HERE = os.path.dirname(os.path.abspath(__file__))
# Text kept of one result: the executor's output cap is the hard limit.
KEEP_CHARS = 200000
# What a stdio server inherits beyond the SDK's safe defaults: the egress proxy's address.
_PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY")


def spec():
    with open(os.path.join(HERE, "server.json"), encoding="utf-8") as f:
        return json.load(f)


def tool_digest(tool):
    """sha256 over what the user approved of a tool: its name, description, input schema and annotations."""
    approved = {k: tool.get(k) for k in ("name", "description", "inputSchema", "annotations")}
    data = json.dumps(approved, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(data.encode("utf-8")).hexdigest()


def _tool_record(tool):
    return tool.model_dump(mode="json", by_alias=True, exclude_none=True)


async def _with_session(s, work):
    if s["transport"] == "stdio":
        env = {k: os.environ[k] for k in _PROXY_VARS if k in os.environ}
        env.update(s.get("env") or {})
        params = StdioServerParameters(command=s["command"][0], args=list(s["command"][1:]), env=env, cwd="/tmp")
        transport = stdio_client(params, errlog=sys.stderr)
    else:
        transport = streamable_http_client(s["url"])
    async with transport as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            info = await session.initialize()
            return await work(session, info)


async def _all_tools(session):
    tools, cursor = [], None
    while True:
        if cursor is None:
            page = await session.list_tools()
        else:
            page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
        tools += [_tool_record(t) for t in page.tools]
        cursor = getattr(page, "next_cursor", None) or getattr(page, "nextCursor", None)
        if not cursor:
            return tools


def _run(coro_fn):
    return anyio.run(coro_fn)


def describe():
    """The server's name and version and every tool it offers, each with its digest."""
    s = spec()

    async def work(session, info):
        tools = await _all_tools(session)
        server = info.server_info if hasattr(info, "server_info") else getattr(info, "serverInfo", None)
        return {"server_info": server.model_dump(mode="json", by_alias=True, exclude_none=True) if server else {},
                "tools": [{**t, "digest": tool_digest(t)} for t in tools]}

    return _run(lambda: _with_session(s, work))


def _changed(s, tools):
    """Why the tool no longer matches what was approved, or None."""
    found = next((t for t in tools if t.get("name") == s["tool"]), None)
    if found is None:
        return ("McpToolMissing", f"the server {s['server']!r} no longer offers the tool {s['tool']!r}")
    if tool_digest(found) != s["tool_digest"]:
        return ("McpSchemaChanged", f"the server {s['server']!r} changed the tool {s['tool']!r} since it was approved "
                                    f"(approved {s['tool_digest']}, now {tool_digest(found)}); "
                                    f"approve it again with `metnos mcp add`")
    return None


def check_tool():
    """None when the server offers this executor's tool as approved; else the problem (the birth test asks)."""
    s = spec()

    async def work(session, info):
        return _changed(s, await _all_tools(session))

    problem = _run(lambda: _with_session(s, work))
    return None if problem is None else f"{problem[0]}: {problem[1]}"


def _content(block):
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block.get("text", "")[:KEEP_CHARS]}
    if kind in ("image", "audio"):
        # The bytes are not kept: the planner reads text.
        return {"type": kind, "mime_type": block.get("mimeType", ""), "bytes": len(block.get("data", "")) * 3 // 4}
    if kind == "resource":
        res = block.get("resource") or {}
        return {"type": "resource", "uri": res.get("uri", ""), "text": (res.get("text") or "")[:KEEP_CHARS]}
    if kind == "resource_link":
        return {"type": "resource_link", "uri": block.get("uri", ""), "text": block.get("name", "")}
    return {"type": str(kind)}


def call(args):
    """Call the tool with ``args`` after checking it is still the one approved; the result as data."""
    s = spec()

    async def work(session, info):
        problem = _changed(s, await _all_tools(session))
        if problem is not None:
            return {"ok": False, "server": s["server"], "tool": s["tool"],
                    "error": {"class": problem[0], "message": problem[1]}}
        result = await session.call_tool(s["tool"], dict(args))
        raw = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        content = [_content(b) for b in raw.get("content") or []]
        text = "\n".join(b["text"] for b in content if b.get("type") == "text" and b.get("text"))[:KEEP_CHARS]
        out = {"ok": not raw.get("isError", False), "server": s["server"], "tool": s["tool"], "text": text,
               "content": content}
        if isinstance(raw.get("structuredContent"), dict):
            out["structured"] = raw["structuredContent"]
        if not out["ok"]:
            out["error"] = {"class": "McpToolError", "message": (text or "the tool reported an error")[:2000]}
        return out

    try:
        return _run(lambda: _with_session(s, work))
    except Exception as e:  # noqa: BLE001 - whatever the server did, the call ends with its cause named
        return {"ok": False, "server": s["server"], "tool": s["tool"],
                "error": {"class": "McpServerFailed", "message": f"{type(e).__name__}: {_cause(e)}"[:2000]}}


def _cause(e):
    # anyio wraps a failure in an exception group; its first leaf names the cause.
    while getattr(e, "exceptions", None):
        e = e.exceptions[0]
    return str(e) or type(e).__name__
