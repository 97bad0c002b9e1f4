"""A booted runtime held for the ways in that serve many turns: a channel on its own, or the daemon.

A host offers a channel two things: ``ask(text, approver=..., channel=...)``
runs one turn as ``metnos ask`` does (metnos.services.turns), and
``writing()`` lends the runtime to one writer at a time. A channel is written
against that pair, so it runs the same inside the daemon and on its own
(``metnos mcp serve`` over stdio, a test).

:class:`DaemonHost` is what the daemon holds while it runs, shared by every
way in (HTTP, dashboard, channels): one booted Runtime writes the log for
every channel, with one LLM router kept warm across turns. Writes go through
:meth:`DaemonHost.writing`, one at a time (a turn, an undo, a scheduler
tick, a lifecycle change); reads take :meth:`DaemonHost.reading`, which
brings the read models up to date when no write is in progress and
otherwise serves them as last folded, so that the dashboard answers while a
turn runs.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from domain.errors import MetnosError
from metnos.mechanisms.store.shared_lock import is_shared
from metnos.runtime import actors
from metnos.runtime.booted import Runtime
from metnos.services import outgoing, turns, wiring
from metnos.services.approvals import ApprovalBroker
from metnos.services.delivery import Outbox
from metnos.services.dialogs import DialogBroker
from metnos.services.interrupts import InterruptGate
from metnos.services.live import LiveTurns
from metnos.settings.loader import load


class DaemonBusy(MetnosError):
    """A write waited too long for another one to finish."""


class DaemonStopping(MetnosError):
    """The daemon is stopping: it takes no new work."""


STOPPING = "the daemon is stopping and takes no new work; ask again once it has restarted (`metnos daemon`)"


class RuntimeHost:
    def __init__(self, runtime: Runtime, *, env: Mapping[str, str] | None = None) -> None:
        self.runtime = runtime
        self.env = dict(os.environ if env is None else env)
        # None: the command's own settings; a mapping: the settings it gives (a test's environment).
        self._given_env = env
        self._write = threading.RLock()
        self._router: Any = None
        self._router_made = threading.Lock()
        # What the channels send goes through here, so that a channel that is down loses nothing.
        self.outbox = Outbox(self)
        if runtime is not None:
            # A turn's own send_messages steps go through it too (metnos/services/outgoing.py).
            runtime.outgoing = outgoing.step_port(self.outbox)

    @contextmanager
    def writing(self) -> Iterator[Runtime]:
        with self._write:
            yield self.runtime

    def pair(self, channel: str, address: str) -> str:
        """The actor a chat or device speaks as (``host`` or ``guest_<id>``), paired on its first message."""
        # Paired already: read without waiting for a write in progress (a turn).
        paired = actors.known(self.runtime, channel, address)
        if paired is not None:
            return paired
        with self.writing() as rt:
            return actors.pair(rt, channel, address)

    def approver_is_guest(self, channel: str, address: str) -> bool:
        """The chat or device at ``address`` is paired, as a guest (one never paired is not asked here)."""
        paired = actors.known(self.runtime, channel, address)
        return paired is not None and actors.is_guest(paired)

    def model_for(self, tier: str) -> Any:
        """A tier's model on the host's one router (words of a schedule the rules cannot read)."""
        return self._the_router().for_tier(tier)

    def _the_router(self) -> Any:
        # One router for every turn and reading: a warm model stays warm between messages.
        with self._router_made:
            if self._router is None:
                self._router = wiring.llm_router(self.runtime.workspace, self._given_env)
            return self._router

    def ask(self, text: str, *, approver: Callable[..., tuple[bool, str]], channel: str, actor: str = "user",
            observer: Callable[[Any], None] | None = None, asker: Callable[..., tuple[str | None, str]] | None = None,
            principal: str = "host", interrupts: InterruptGate | None = None, conversation: str | None = None,
            new_conversation: bool = False, confirm_schedules: bool = False) -> Any:
        with self.writing() as rt:
            router = self._the_router()
            # A long-running host reads config.toml again at each turn (through the one loader), so that an
            # edit takes effect without a restart, as it always has (docs/channels.md).
            settings = load(self._given_env, config_file=rt.workspace.config_file)
            return turns.run(rt, text, approver=approver, router=router, env=self._given_env, actor=actor, channel=channel,
                             observer=observer, settings=settings, asker=asker, principal=principal, interrupts=interrupts,
                             conversation=conversation, new_conversation=new_conversation, confirm_schedules=confirm_schedules)

    def call(self, name: str, args: dict[str, Any], *, approver: Callable[..., tuple[bool, str]], channel: str, actor: str,
             observer: Callable[[Any], None] | None = None, interrupts: InterruptGate | None = None,
             caller: dict[str, Any] | None = None) -> Any:
        """One call a channel chose (an MCP client's), run as a turn of its own (metnos.services.turns.call)."""
        with self.writing() as rt:
            settings = load(self._given_env, config_file=rt.workspace.config_file)
            return turns.call(rt, name, args, approver=approver, channel=channel, actor=actor, env=self._given_env,
                              observer=observer, interrupts=interrupts, settings=settings, caller=caller)

    def close(self) -> None:
        self.outbox.close()
        if self._router is not None:
            self._router.close()
            self._router = None


class DaemonHost(RuntimeHost):
    def __init__(self, runtime: Runtime, *, env: Mapping[str, str], approval_timeout_s: float = 300.0,
                 write_wait_s: float = 600.0) -> None:
        super().__init__(runtime, env=env)
        # On a log other daemons write too, a question asked here can be answered through any of them.
        shared = runtime.log if runtime is not None and is_shared(runtime.log) else None
        self.approvals = ApprovalBroker(timeout_s=approval_timeout_s, shared_log=shared, clock=runtime.clock if shared else None)
        # A question waits as long as an approval does.
        # Questions are in the log as they are asked: another daemon on it, or the next start, sees them.
        self.dialogs = DialogBroker(timeout_s=approval_timeout_s, log=runtime.log if runtime is not None else None,
                                    clock=runtime.clock if runtime is not None else None)
        self._write_wait_s = write_wait_s
        # Set by begin_stop(): no new turn starts, and every way in says why.
        self.stopping = False
        # The gates of the turns running now, so that a stop can interrupt them at their next safe point.
        self._gates: set[InterruptGate] = set()
        self._gates_lock = threading.Lock()
        # The running turn's events as they are recorded, and its Stop (metnos/services/live.py).
        self.live = LiveTurns()
        # How a scheduled firing's message reaches the outbox (set by metnos/services/daemon.py); None: send_messages.
        self.deliver_scheduled: Callable[[str, str, str], Any] | None = None

    @contextmanager
    def writing(self) -> Iterator[Runtime]:
        if not self._write.acquire(timeout=self._write_wait_s):
            msg = f"the daemon is busy (another turn or change has run for over {self._write_wait_s:.0f} s); try again"
            raise DaemonBusy(msg)
        try:
            yield self.runtime
        finally:
            self._write.release()

    def begin_stop(self) -> None:
        """Take no new work, refuse what waits for an approval, leave a waiting question unanswered."""
        self.stopping = True
        self.approvals.refuse_all("daemon-stopping")
        self.dialogs.stop_all("daemon-stopping")

    def interrupt_running(self) -> None:
        """Ask the running turns to stop at their next safe point (recorded as TurnInterrupted, SIGTERM)."""
        with self._gates_lock:
            for gate in self._gates:
                gate.stop_at_next_checkpoint(signal.SIGTERM)

    def drain(self, wait_s: float = 30.0, finish_s: float = 2.0) -> bool:
        """At stop: :meth:`begin_stop`; the turn in progress gets ``finish_s`` to end by itself (one whose
        approval was just refused usually does), then is interrupted at its next safe point; wait for it to
        end, so that the runtime is not closed under it. False: it did not end within ``wait_s``."""
        self.begin_stop()
        started = time.monotonic()
        if not self._write.acquire(timeout=min(finish_s, wait_s)):
            self.interrupt_running()
            if not self._write.acquire(timeout=max(wait_s - (time.monotonic() - started), 0)):
                return False
        self._write.release()
        return True

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
            observer: Callable[[Any], None] | None = None, asker: Callable[..., tuple[str | None, str]] | None = None,
            principal: str = "host", interrupts: InterruptGate | None = None, wait_s: float | None = None,
            conversation: str | None = None, new_conversation: bool = False, confirm_schedules: bool = False) -> Any:
        """One turn, as ``metnos ask`` runs it; an empty request is refused before waiting for the writer.
        ``wait_s``: how long to wait for a turn already running before answering busy (default: the host's wait).
        ``conversation``: the key of the conversation the turn continues (``new_conversation``: starts); None, a turn alone."""
        turns.check_request(text)
        with self._running(interrupts, observer) as (gate, observe):
            return self._ask(text, approver=approver, channel=channel, actor=actor, observer=observe, asker=asker,
                             principal=principal, interrupts=gate, wait_s=wait_s, confirm_schedules=confirm_schedules,
                             talk={"conversation": conversation, "new_conversation": new_conversation})

    def call(self, name: str, args: dict[str, Any], *, approver: Callable[..., tuple[bool, str]], channel: str, actor: str,
             observer: Callable[[Any], None] | None = None, interrupts: InterruptGate | None = None,
             caller: dict[str, Any] | None = None) -> Any:
        """A call turn, listed live and stoppable as any turn the daemon runs."""
        with self._running(interrupts, observer) as (gate, observe):
            return super().call(name, args, approver=approver, channel=channel, actor=actor, observer=observe,
                                interrupts=gate, caller=caller)

    @contextmanager
    def _running(self, interrupts: InterruptGate | None, observer: Callable[[Any], None] | None):
        """A turn about to run here: refused while stopping; its gate is one a stop interrupts, and it is listed live."""
        if self.stopping:
            raise DaemonStopping(STOPPING)
        gate = interrupts or InterruptGate()
        gate.accept_stops_from_other_threads()
        with self._gates_lock:
            self._gates.add(gate)
        observe = self.live.observer(gate, observer)
        try:
            yield gate, observe
        finally:
            self.live.ended(observe)
            with self._gates_lock:
                self._gates.discard(gate)

    def stop_turn(self, turn_id: str, *, channel: str) -> dict[str, Any]:
        """The Stop of a turn running here, asked on ``channel``: it ends at its next safe point, recorded as
        interrupted by that Stop; an approval or a question it waits on is refused at once, so that it lands now."""
        self.live.stop(turn_id, f"a Stop on {channel}")
        self.approvals.refuse_all("stopped")
        self.dialogs.stop_all(f"{channel}:stopped")
        return {"turn_id": turn_id, "stopping": True}

    def _ask(self, text: str, *, approver: Callable[..., tuple[bool, str]], channel: str, actor: str,
             observer: Callable[[Any], None] | None, asker: Callable[..., tuple[str | None, str]] | None,
             principal: str, interrupts: InterruptGate, wait_s: float | None, confirm_schedules: bool,
             talk: dict[str, Any]) -> Any:
        if not self._write.acquire(timeout=self._write_wait_s if wait_s is None else wait_s):
            if wait_s is None:
                raise DaemonBusy(f"the daemon is busy (another turn or change has run for over {self._write_wait_s:.0f} s); try again")
            raise DaemonBusy("a turn is already running (or waits for an answer at /api/approvals or /api/dialogs); "
                             "try again when it has ended")
        try:
            # A stop that began while this turn waited for the one before: it does not start.
            if self.stopping:
                raise DaemonStopping(STOPPING)
            # The lock is re-entrant: the turn's own writing() below takes it at once.
            return super().ask(text, approver=approver, channel=channel, actor=actor, observer=observer, asker=asker,
                               principal=principal, interrupts=interrupts, confirm_schedules=confirm_schedules, **talk)
        finally:
            self._write.release()
