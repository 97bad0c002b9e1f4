"""What a nightly job found, written down (seeds/002 ch. 11.2).

The jobs that read rather than change (the proposals' ETA, the promoter's
digest, the lifecycle summary, the sandbox watchdog) leave their findings
as events, so ``metnos events`` shows every night's figures and the text the
user was told, and a replay reads the same. One aggregate per job, one event
per run.
"""

from __future__ import annotations

from typing import Any

from domain.base import Created, DomainEvent, MetnosAggregate, name_id


def digest_id(job: str):  # noqa: ANN201 - a UUID
    return name_id("digest", job)


class Digest(MetnosAggregate):
    class DigestOpened(Created):
        job: str

    class DigestWritten(DomainEvent):
        """``day`` is the firing's date; ``text`` is what the user was told ("" when nothing)."""

        day: str
        figures: dict
        text: str

        def apply(self, digest: Digest) -> None:
            digest.last = {"day": self.day, "figures": self.figures, "text": self.text}

    def __init__(self, job: str) -> None:
        self.job = job
        self.last: dict[str, Any] | None = None

    @classmethod
    def open(cls, *, job: str, at: Any) -> Digest:
        return cls._create(cls.DigestOpened, id=digest_id(job), job=job, timestamp=at)

    def write(self, *, day: str, figures: dict, text: str, at: Any) -> None:
        self.trigger_event(self.DigestWritten, day=day, figures=figures, text=text, timestamp=at)
