"""The actor resolver (seeds/002 ch. 11.2.4, step 1): who a turn works for, and what that allows.

A chat or device is paired on its first message (domain/household.py): the
first is the host, the others guests. The actor then decides, per turn:

* autonomy: ``[actors.guest] autonomy`` (``read_only`` by default: it looks,
  it does not act), whatever ``[runtime] autonomy`` says for the host;
  ``[actors.host] autonomy``, when set, is the host's;
* approvals: a guest may give only those ``[actors.guest] approvals`` lists
  (none by default); a question about any other executor is answered no,
  without asking, and the log says why (``by`` = ``guest:not_allowed``).
  A listed approval is asked only where the vaglio asks: it never widens what
  the guest's autonomy level allows (at ``read_only`` a side effect is refused
  before anyone is asked).

The approval router stays single-channel (step 1): a guest's turn never
reaches the host's chat.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eventsourcing.application import AggregateNotFoundError

from domain.household import HOST, Household, household_id
from metnos.settings.actors import ActorsConfig

REFUSED_BY = "guest:not_allowed"

Approver = Callable[[int, str, dict[str, Any], str], tuple[bool, str]]


def known(runtime: Any, channel: str, address: str) -> str | None:
    """The actor of ``channel:address`` if it was paired; None otherwise. Reads only."""
    try:
        household: Household = runtime.log.repository.get(household_id())
    except AggregateNotFoundError:
        return None
    return household.actor_of(channel, address)


def address_of(runtime: Any, channel: str, actor: str = HOST) -> str | None:
    """The chat or device on ``channel`` paired as ``actor`` (the host's, by default); None if none was. Reads only."""
    try:
        household: Household = runtime.log.repository.get(household_id())
    except AggregateNotFoundError:
        return None
    return household.address_of(channel, actor)


def pair(runtime: Any, channel: str, address: str) -> str:
    """The actor of ``channel:address``; its pairing is recorded the first time."""
    try:
        household: Household = runtime.log.repository.get(household_id())
    except AggregateNotFoundError:
        household = Household.open(at=runtime.clock())
    actor = household.pair(channel=channel, address=address, at=runtime.clock())
    if household.pending_events:
        runtime.log.save(household)
    return actor


def is_guest(actor: str) -> bool:
    return actor != HOST


def level_for(actor: str, level: str, policy: ActorsConfig | None = None) -> str:
    """The autonomy a turn of ``actor`` runs at, ``level`` being what config or flag asked for."""
    return (policy or ActorsConfig()).autonomy_of(actor, level)


def approver_for(actor: str, approver: Approver, policy: ActorsConfig | None = None) -> Approver:
    """Who answers a question of ``actor``'s turn: the host's approver; for a guest, its own for the
    executors ``[actors.guest] approvals`` lists, no without asking for every other."""
    if not is_guest(actor):
        return approver
    approvable = frozenset((policy or ActorsConfig()).approvals_of(actor))

    def guest_answer(step: int, executor: str, args: dict[str, Any], reason: str) -> tuple[bool, str]:
        if executor in approvable:
            return approver(step, executor, args, reason)
        return False, REFUSED_BY

    return guest_answer
