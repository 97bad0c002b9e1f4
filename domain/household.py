"""Who the agent works for: a host and guests (seeds/002 ch. 11.2.4, the actor resolver, step 1).

Every chat or device that talks to Metnos is paired once, when it first
speaks: the first pairing ever is the ``host``; each one after is a guest,
``guest_<id>``, with an id derived from the channel and its address, so the
same chat is the same guest on every machine that replays the log. One
aggregate holds every pairing, so that "the first" is decided by its version,
not by a race.
"""

from __future__ import annotations

import hashlib
from typing import Any

from domain.base import Created, DomainEvent, MetnosAggregate, name_id

HOST = "host"
GUEST_PREFIX = "guest_"


def household_id():  # noqa: ANN201 - a UUID
    return name_id("household", "pairings")


def guest_name(channel: str, address: str) -> str:
    return GUEST_PREFIX + hashlib.sha256(f"{channel}:{address}".encode()).hexdigest()[:6]


class Household(MetnosAggregate):
    class HouseholdOpened(Created):
        pass

    class ActorPaired(DomainEvent):
        """``address`` is the channel's own id of the chat or device (a Telegram chat id), never a secret."""

        channel: str
        address: str
        actor: str

        def apply(self, household: Household) -> None:
            household.pairings[f"{self.channel}:{self.address}"] = self.actor

    def __init__(self) -> None:
        self.pairings: dict[str, str] = {}

    @classmethod
    def open(cls, *, at: Any) -> Household:
        return cls._create(cls.HouseholdOpened, id=household_id(), timestamp=at)

    def actor_of(self, channel: str, address: str) -> str | None:
        return self.pairings.get(f"{channel}:{address}")

    def address_of(self, channel: str, actor: str) -> str | None:
        """The address on ``channel`` paired as ``actor`` (the host's Telegram chat), or None."""
        return next((key.split(":", 1)[1] for key, who in self.pairings.items() if who == actor and key.split(":", 1)[0] == channel), None)

    def pair(self, *, channel: str, address: str, at: Any) -> str:
        """The actor of ``channel:address``, paired now if it never was."""
        known = self.actor_of(channel, address)
        if known is not None:
            return known
        actor = HOST if not self.pairings else guest_name(channel, address)
        self.trigger_event(self.ActorPaired, channel=channel, address=address, actor=actor, timestamp=at)
        return actor
