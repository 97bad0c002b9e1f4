"""The turns that ran: the list, and one turn's events (``metnos turns list|show``).

Apart from metnos.services.turns, which runs turns, so that reading them loads nothing of the loop.
"""

from __future__ import annotations

from typing import Any

from metnos.services import wiring
from metnos.services.queries import find_turn, turn_events, turn_log, turn_rows, turns_state, undelivered


def listed(limit: int = 0) -> tuple[list[dict[str, Any]], list[str]]:
    """The turns, oldest first (the last ``limit`` when positive), and what the boot could not close of
    the turns left open by a writer that is gone."""
    with wiring.boot(birth=False) as rt:
        state = turns_state(rt)
        problems = list(rt.orphans.problems)
    return turn_rows(state, limit), problems


def shown(turn_ref: str) -> tuple[str, list[Any], list[dict[str, Any]]]:
    """The one turn whose id starts with ``turn_ref``, its events as recorded, and the messages of it that
    the delivery outbox gave up on (its answer that never reached the chat)."""
    with wiring.boot(birth=False) as rt:
        turn_id = find_turn(turns_state(rt), turn_ref)
        return turn_id, turn_log(rt, turn_id), undelivered(rt, turn_id)


def shown_as_data(turn_ref: str) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """The same turn's events as position, type, timestamp and fields (``--json``), and its undelivered messages."""
    with wiring.boot(birth=False) as rt:
        turn_id = find_turn(turns_state(rt), turn_ref)
        return turn_id, turn_events(rt, turn_id), undelivered(rt, turn_id)
