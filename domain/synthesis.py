"""What synt proposes for a recurring wish (seeds/000 ch. 7, the cascade).

One aggregate per wanted executor name. A suggestion says whether a chain of
existing executors closes the gap (compose: no new executor, no signature) or
whether a new executor would have to be generated; the user decides.
"""

from __future__ import annotations

from typing import Any

from domain.base import Created, DomainEvent, MetnosAggregate, name_id


def synthesis_id(wanted: str):  # noqa: ANN201 - a UUID
    return name_id("synthesis", wanted)


class Synthesis(MetnosAggregate):
    class SynthesisOpened(Created):
        wanted: str

    class SynthesisSuggested(DomainEvent):
        source: str
        uses: int
        weight: float
        outcome: str  # compose | generate
        chain: list | None

        def apply(self, synthesis: Synthesis) -> None:
            synthesis.last = {"outcome": self.outcome, "chain": self.chain}

    def __init__(self, wanted: str) -> None:
        self.wanted = wanted
        self.last: dict[str, Any] | None = None

    @classmethod
    def open(cls, *, wanted: str, at: Any) -> Synthesis:
        return cls._create(cls.SynthesisOpened, id=synthesis_id(wanted), wanted=wanted, timestamp=at)

    def suggest(self, *, source: str, uses: int, weight: float, outcome: str, chain: list | None, at: Any) -> bool:
        """Record a suggestion unless it says what the last one said; True when recorded."""
        if self.last == {"outcome": outcome, "chain": chain}:
            return False
        self.trigger_event(self.SynthesisSuggested, source=source, uses=uses, weight=weight, outcome=outcome, chain=chain, timestamp=at)
        return True
