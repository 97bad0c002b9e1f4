"""What the daemon holds while it runs, shared by every way in (HTTP, dashboard, channels).

One booted :class:`~metnos.runtime.booted.Runtime` writes the log for every channel;
it is a channels' host (metnos.adapters.channels.host: ``ask`` and ``writing``, one
LLM router kept warm across turns) with what only the daemon needs besides.
Writes go through :meth:`DaemonHost.writing`, one at a time (a turn, an undo,
a scheduler tick, a lifecycle change); reads take :meth:`DaemonHost.reading`,
which brings the read models up to date when no write is in progress and
otherwise serves them as last folded, so that the dashboard answers while a
turn runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from metnos.adapters.channels.host import RuntimeHost
from metnos.adapters.daemon.approvals import ApprovalBroker
from domain.errors import MetnosError
from metnos.runtime.booted import Runtime


class DaemonBusy(MetnosError):
    """A write waited too long for another one to finish."""


class DaemonHost(RuntimeHost):
    def __init__(self, runtime: Runtime, *, env: Mapping[str, str], approval_timeout_s: float = 300.0,
                 write_wait_s: float = 600.0) -> None:
        super().__init__(runtime, env=env)
        self.approvals = ApprovalBroker(timeout_s=approval_timeout_s)
        self._write_wait_s = write_wait_s

    @contextmanager
    def writing(self) -> Iterator[Runtime]:
        if not self._write.acquire(timeout=self._write_wait_s):
            msg = f"the daemon is busy (another turn or change has run for over {self._write_wait_s:.0f} s); try again"
            raise DaemonBusy(msg)
        try:
            yield self.runtime
        finally:
            self._write.release()

    def drain(self, wait_s: float = 30.0) -> bool:
        """At stop: refuse what waits for an approval, then wait for the write in progress
        (a turn) to end, so that the runtime is not closed under it. False: it did not end in time."""
        self.approvals.refuse_all("daemon-stopping")
        if self._write.acquire(timeout=wait_s):
            self._write.release()
            return True
        return False

    @contextmanager
    def reading(self) -> Iterator[Runtime]:
        if self._write.acquire(blocking=False):
            try:
                self.runtime.refresh()
                yield self.runtime
            finally:
                self._write.release()
        else:
            yield self.runtime

    def ask(self, text: str, *, approver: Callable[..., tuple[bool, str]], channel: str, actor: str = "user",
            observer: Callable[[Any], None] | None = None) -> Any:
        """One turn, as ``metnos ask`` runs it; an empty request is refused before waiting for the writer."""
        from metnos.runtime.turn.session import check_request

        check_request(text)
        return super().ask(text, approver=approver, channel=channel, actor=actor, observer=observer)
