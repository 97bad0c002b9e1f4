"""What a channel records or starts that is not a turn: a message it ignored, MCP over stdio."""

from __future__ import annotations

from typing import Any

import anyio

from domain.channel import ChannelMessage
from domain.canonical import canonical_hash
from metnos.mechanisms.sandbox.bwrap import require_sandbox
from metnos.services import extensions, wiring
from metnos.services.gated_call import GatedCaller
from metnos.services.host import RuntimeHost

def record_ignored(host: Any, *, channel: str, chat_id: str, sender: str, reason: str, text: str) -> None:
    """Audit a message that got no turn: who sent it where, the text's size and digest, never the text."""
    with host.writing() as rt:
        event = ChannelMessage.ignored(
            id=rt.ids(), at=rt.clock(), channel=channel, chat_id=chat_id, sender=sender,
            reason=reason, text_size=len(text), text_digest=canonical_hash(text),
        )
        rt.log.save(event)


def serve_mcp_stdio() -> None:
    """``metnos mcp serve``: the active executors as MCP tools on standard input and output, until the client goes."""
    # Where no executor may run, no tool is offered: the client is told at once.
    require_sandbox()
    with wiring.boot() as runtime:
        anyio.run(extensions.mcp_stdio, GatedCaller(RuntimeHost(runtime), caller={"kind": "mcp"}))
