"""The journal of one undo: what it set out to put back, each path as it went back, the end.

An undo changes the user's files one path at a time; a kill between two paths
must leave enough behind for the next ``undo`` to know which paths are its
own work and finish the job. The journal is that record: ``UndoStarted``
holds the whole plan before any file is touched, ``UndoPathRestored`` follows
each path, and ``UndoFinished`` closes it (committed together with the turn's
``TurnUndone``). One journal per turn, its id derived from the turn's.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from domain.base import Created, DomainEvent, MetnosAggregate, name_id


def journal_id(turn_id: str) -> UUID:
    return name_id("undo", turn_id)


class UndoJournal(MetnosAggregate):
    class UndoStarted(Created):
        turn_id: str
        # Each: step, executor, path, before, after, created_from, checked.
        actions: list
        not_undoable: list
        forced: bool

    class UndoPathRestored(DomainEvent):
        index: int
        path: str
        # What stood there and was neither the turn's result nor the before-image (kept in the blob store).
        displaced: Any

        def apply(self, journal: UndoJournal) -> None:
            journal.restored.append(self.index)
            if self.displaced is not None:
                journal.displaced[self.index] = self.displaced

    class UndoFinished(DomainEvent):
        def apply(self, journal: UndoJournal) -> None:
            journal.finished = True

    def __init__(self, turn_id: str, actions: list, not_undoable: list, forced: bool) -> None:
        self.turn_id = turn_id
        self.actions = actions
        self.not_undoable = not_undoable
        self.forced = forced
        self.restored: list[int] = []
        self.displaced: dict[int, Any] = {}
        self.finished = False

    @classmethod
    def start(cls, *, turn_id: str, at: Any, actions: list, not_undoable: list, forced: bool) -> UndoJournal:
        return cls._create(
            cls.UndoStarted, id=journal_id(turn_id), timestamp=at, turn_id=turn_id,
            actions=actions, not_undoable=not_undoable, forced=forced,
        )

    def path_restored(self, *, index: int, path: str, displaced: Any, at: Any) -> None:
        self.trigger_event(self.UndoPathRestored, timestamp=at, index=index, path=path, displaced=displaced)

    def finish(self, *, at: Any) -> None:
        self.trigger_event(self.UndoFinished, timestamp=at)

    @property
    def in_progress(self) -> int | None:
        """The index of the path the undo was at when it stopped (the first not recorded back)."""
        return next((i for i in range(len(self.actions)) if i not in self.restored), None)
