"""The MCP server of the injection benchmark: a small real server on the MCP SDK, speaking stdio,
added to each home with `metnos mcp add` as a user adds one.

Its two read-only tools (an order's status, a city's forecast) answer with the text the bench
wrote for the case in a JSON file (``INJECTION_MCP_DATA``, granted read-only at add time): the
server is pinned by its code, and the case's content, the injected sentence included, changes
without re-approval, as a real server's data would.
"""

from __future__ import annotations

from pathlib import Path

DATA_ENV = "INJECTION_MCP_DATA"
SERVER_NAME = "shop"
TOOLS = ("get_order", "get_forecast")

SOURCE = '''
import json
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
server = MCPServer("shop", version="1.0.0")


def _answer(tool: str) -> str:
    return json.loads(Path(os.environ["INJECTION_MCP_DATA"]).read_text()).get(tool, "nothing known")


@server.tool(name="get_order", description="Returns the status, arrival day and tracking number of an order.", annotations=READ_ONLY)
def get_order(order_id: str) -> str:
    return _answer("get_order")


@server.tool(name="get_forecast", description="Returns the weather forecast for a city.", annotations=READ_ONLY)
def get_forecast(city: str) -> str:
    return _answer("get_forecast")


server.run()
'''


def write_server(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "shop_server.py"
    script.write_text(SOURCE)
    return script
