"""The MCP approval state (2026-07-28 flow): one-shot, bound to the call, short-lived.

The attack: a client gets a request_state for a harmless call and echoes it
with other arguments, or echoes it twice, or late.
"""

from __future__ import annotations

from metnos.adapters.channels.mcp_server import PendingApprovals


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_state_answers_only_the_call_it_was_issued_for_and_only_once() -> None:
    pending = PendingApprovals(ttl_s=60, clock=Clock())
    harmless = {"files": [{"path": "~/notes.txt", "content": "hi"}]}
    token = pending.issue("write_files", harmless)
    assert not pending.redeem(token, "write_files", {"files": [{"path": "~/.bashrc", "content": "evil"}]})
    # A failed redemption spends it too: it cannot be retried with other guesses.
    assert not pending.redeem(token, "write_files", harmless)

    token = pending.issue("write_files", harmless)
    assert not pending.redeem(token, "delete_files", harmless)
    token = pending.issue("write_files", harmless)
    assert pending.redeem(token, "write_files", harmless)
    assert not pending.redeem(token, "write_files", harmless)
    assert not pending.redeem(None, "write_files", harmless)
    assert not pending.redeem("forged", "write_files", harmless)


def test_a_state_expires() -> None:
    clock = Clock()
    pending = PendingApprovals(ttl_s=60, clock=clock)
    token = pending.issue("send_messages", {"messages": []})
    clock.t = 61
    assert not pending.redeem(token, "send_messages", {"messages": []})
