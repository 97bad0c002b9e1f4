"""SIGINT and SIGTERM during a turn: stop where nothing is half done, and say so.

A signal becomes an :class:`Interrupted` exception. While a turn runs, the
gate defers it: an executor that is changing files and the commit of a step
are never cut in half. It lands at once only in the two waits on the outside
world (the model's reply, the user's approval), where nothing is being
written, and otherwise at the next checkpoint, just after a step's events are
committed. The loop then records ``TurnInterrupted`` and closes the turn.

A stop asked from another thread (the daemon stopping, the dashboard's Stop)
cannot raise inside the turn's thread, so where such a stop can come (a turn
the daemon runs), the wait on the model runs on a thread of its own
(:meth:`InterruptGate.abandonable`) and is given up when the stop comes first:
the turn does not sit out a reply it will not use. Elsewhere the wait runs
inline, and costs no thread.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

HANDLED = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """The process was told to stop. A BaseException, like KeyboardInterrupt,
    so that no ``except Exception`` on the way swallows it."""

    def __init__(self, signum: int, by: str | None = None) -> None:
        self.signum = signum
        # What the turn's record names as the cause: the signal, or who asked for the stop ("a Stop on http").
        self.signal = by or signal.Signals(signum).name
        super().__init__(f"interrupted by {self.signal}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class InterruptGate:
    """Where a stop signal may land. Without :meth:`installed`, it never fires
    (replay and tests run the loop with a gate that nothing opens)."""

    def __init__(self) -> None:
        self.pending: int | None = None
        self.pending_by: str | None = None
        self._deferring = False
        self._waiting = 0
        self._installed = False
        self._stoppable_elsewhere = False
        self._stop_asked = threading.Event()

    def accept_stops_from_other_threads(self) -> None:
        """Stops will be asked from other threads (:meth:`stop_at_next_checkpoint`): give up the waits on the
        outside world when one comes, at the cost of a thread a wait."""
        self._stoppable_elsewhere = True

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self._deferring and not self._waiting:
            self.pending = signum
            return
        raise Interrupted(signum)

    @contextmanager
    def installed(self) -> Iterator[InterruptGate]:
        """Route SIGINT and SIGTERM to this gate (main thread only), then put the old handlers back."""
        previous = {s: signal.signal(s, self._handle) for s in HANDLED}
        self._installed = True
        try:
            yield self
        finally:
            self._installed = False
            for s, handler in previous.items():
                signal.signal(s, handler)

    @contextmanager
    def deferring(self) -> Iterator[None]:
        """A signal waits for the next checkpoint or wait instead of landing where it falls."""
        self._deferring, self._waiting = True, 0
        try:
            yield
        finally:
            self._deferring, self._waiting = False, 0

    def stop_at_next_checkpoint(self, signum: int, by: str | None = None) -> None:
        """Stop the turn at its next safe point, asked from another thread (the daemon, when the
        client that asked went away, or the dashboard's Stop): the same path as a signal that
        arrived while deferring. ``by`` names who asked, for the turn's record."""
        self.pending, self.pending_by = signum, by
        self._stop_asked.set()

    def checkpoint(self) -> None:
        if self.pending is not None:
            signum, by, self.pending, self.pending_by = self.pending, self.pending_by, None, None
            self._stop_asked.clear()
            raise Interrupted(signum, by)

    def abandonable(self, work: Callable[[], T]) -> T:
        """``work``, a wait on the outside world, given up at once when a stop is asked from another
        thread before it ends: it runs on a thread of its own, and what it later returns or raises is
        dropped. Where the gate takes the signals itself (the main thread), they land in the wait, and where
        no other thread stops it, nothing can: ``work`` runs here."""
        if self._installed or not self._stoppable_elsewhere:
            return work()
        ended = threading.Event()
        outcome: list[Any] = []

        def run() -> None:
            try:
                outcome.append((True, work()))
            except BaseException as e:  # handed to the turn's thread, or dropped with the wait
                outcome.append((False, e))
            finally:
                ended.set()

        threading.Thread(target=run, name="metnos-outside-wait", daemon=True).start()
        while not ended.wait(0.05):
            if self._stop_asked.is_set():
                self.checkpoint()
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """A wait on the outside world: a signal may land inside it."""
        self.checkpoint()
        self._waiting += 1
        try:
            yield
        finally:
            self._waiting = max(0, self._waiting - 1)

    @contextmanager
    def waiting_as(self, state: Any, what: str) -> Iterator[None]:
        """A wait the turn names (``state.during``: "while waiting for approval"), for the record if a signal stops it there."""
        self.checkpoint()
        state.during = what
        with self.waiting():
            yield
        state.during = "between steps"
