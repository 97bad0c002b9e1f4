"""Starting the daemon: the one long-running process (docs/daemon.md).

It boots the runtime once and writes the log for every way in: the
scheduler loop (one tick every ``tick_s`` seconds, seeds/002 ch. 11.2), the
warm embedded model, the HTTP API and dashboard, and the channels of
metnos.services.extensions. At start it installs the builtin maintenance
jobs that are missing, then ticks: each tick fires what is due and is handed
to ``emit`` with what it did. A tick's own failures are emitted and the loop
goes on. ``once`` runs one tick and returns.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from domain.delivery import RetryRule
from domain.errors import MetnosError
from metnos.mechanisms.llm.errors import LLMError
from metnos.mechanisms.llm.router import embedded_model_files
from metnos.mechanisms.llm.shared_server import start_shared, touch
from metnos.runtime import actors
from metnos.runtime.scheduler.clock import clock_from_env
from metnos.runtime.scheduler.service import ScheduleService
from metnos.runtime.scheduler.firing import recipient
from metnos.runtime.scheduler.tick import Scheduler
from metnos.mechanisms.store.shared_lock import is_shared
from metnos.services import daemon_client, delivery, extensions, outgoing, wiring
from metnos.services.host import DaemonHost
from metnos.settings.config_file import load_daemon_config
from metnos.settings.workspace import Workspace
from metnos.settings.loader import for_workspace


# How long a stop waits for the running turn to reach its safe point before leaving it to the next start.
DRAIN_S = 10.0


@dataclass(frozen=True)
class DaemonOptions:
    http: str | None = None
    tick_s: float = 60.0
    once: bool = False
    skip_birth: bool = False
    no_model: bool = False


def run(options: DaemonOptions, *, emit: Callable[[dict[str, Any]], None], warn: Callable[[str], None]) -> int:
    """Serve until stopped (a signal), or for one tick with ``once``. ``emit`` gets the started line and each
    tick's report; ``warn`` a line for the user."""
    if options.tick_s <= 0:
        raise MetnosError("--tick must be a positive number of seconds")
    clock = clock_from_env()
    # The daemon runs every birth at its start; commands reuse what it found.
    with wiring.boot(birth=not options.skip_birth, reuse_births=False, clock=clock) as rt:
        installed = ScheduleService(rt).install_builtin_jobs()
        # Turns left open by a writer that is gone were closed as abandoned at boot.
        model = {} if options.no_model else warm_model(rt.workspace, options.tick_s)
        config = load_daemon_config(rt.workspace.config_file)
        host = DaemonHost(rt, env=os.environ, approval_timeout_s=config.approval_timeout_s)
        host.outbox.rule = RetryRule(first_delay_s=config.delivery_first_delay_s, max_delay_s=config.delivery_max_delay_s,
                                     max_attempts=config.delivery_attempts)
        # What a turn's send_messages step, or a firing, could not send is sent again through send_messages.
        host.outbox.serve_by_executor(outgoing.executor_sender(host))
        if not is_shared(rt.log):
            # This daemon alone writes the log: a question still open in it was asked by a process that is gone.
            host.dialogs.withdraw_open("daemon-restarted")
        with serving(host, http_address(options, config.http), warn=warn) as http:
            emit({"event": "started", "installed": installed, "abandoned": rt.orphans.closed, **model, **http})
            # The nightly jobs that draft (i18n, synt) reach the model through the router, started on first use.
            models = None if options.no_model else wiring.llm_router(rt.workspace, os.environ).for_tier
            # A firing's message to a channel the daemon serves (Telegram) goes through its outbox.
            host.deliver_scheduled = delivery.scheduled_delivery(host, scheduled_address(rt), lambda: recipient(rt), told=told_chat(rt))
            scheduler = Scheduler(rt, models=models, deliver=host.deliver_scheduled)
            while True:
                started = time.monotonic()
                if model.get("model_url"):
                    # While the daemon runs, the model it serves stays warm for every command.
                    touch(rt.workspace.runtime_dir)
                try:
                    with host.writing():
                        report = scheduler.tick().to_json()
                except Exception as e:  # noqa: BLE001 - the loop must not fall (seeds/002 ch. 11.2)
                    report = {"error": f"{type(e).__name__}: {e}"}
                emit({"event": "tick", **report})
                if options.once:
                    return 0
                time.sleep(max(0.0, options.tick_s - (time.monotonic() - started)))


def scheduled_address(rt: Any) -> Callable[[str, str], str | None]:
    """Where on a channel the scheduler's messages go: ``[scheduler] deliver_to`` (default "me") as send_messages
    reads it, a name of ``[telegram.chat_ids]`` or a chat id; None when it names none (send_messages then says so)."""

    def address(channel: str, schedule_id: str) -> str | None:
        if channel != "telegram":
            return None
        to_user = recipient(rt)
        mapped = str(for_workspace(rt.workspace).settings.telegram.chat_ids.get(to_user, to_user))
        # A chat id; a @channel name is left to send_messages, which takes it.
        return mapped if re.fullmatch(r"-?\d+", mapped) else None

    return address


def told_chat(rt: Any) -> Callable[[str], str | None]:
    """The host's paired chat on Telegram for a builtin job that tells the user (its channel the outbox), or None:
    the watchdog's, the promoter's digest, the lifecycle summary reach that chat as well (seeds/002 ch. 11.2)."""

    def chat(schedule_id: str) -> str | None:
        row = rt.schedules.state()["schedules"].get(schedule_id)
        if row is None or row["owner"] != "builtin" or row["channel"] != delivery.LOCAL:
            return None
        return actors.address_of(rt, delivery.TOLD_ON)

    return chat


def http_address(options: DaemonOptions, configured: str) -> str | None:
    """Where to serve HTTP: --http, else [daemon] http of config.toml; none for --once unless asked."""
    if options.http:
        return options.http
    return None if options.once else configured


@contextmanager
def serving(host: DaemonHost, address: str | None, *, warn: Callable[[str], None]) -> Iterator[dict[str, Any]]:
    """The HTTP server and the channels, up for the body, down (channels first) after it."""
    if address is None:
        yield {}
        return
    server = extensions.start_http(host, address)
    # Where it serves, for the commands that talk to it (`metnos inbox`).
    daemon_client.note_served(host.runtime.workspace, server.url)
    started: list[Any] = []
    try:
        for channel in extensions.channels(host):
            channel.start()
            started.append(channel)
        yield {"http": server.url, "channels": [c.name for c in started]}
    finally:
        # A few seconds: the running turn is asked to stop at its next safe point, and what waits is answered.
        if not host.drain(DRAIN_S):
            warn("a turn was still running when the daemon stopped; it is closed as abandoned at the next start")
        for channel in reversed(started):
            channel.stop()
        server.stop()
        daemon_client.forget_served(host.runtime.workspace, server.url)
        host.close()


def warm_model(workspace: Workspace, tick_s: float) -> dict[str, Any]:
    """Start (or find) the shared embedded model server, so that asks find it warm.

    Only when a tier is the embedded model and its file is installed; a
    failure is reported in the started line and the daemon runs on without.
    """
    try:
        models = [m for m in embedded_model_files(for_workspace(workspace).llm(), workspace) if m.is_file()]
        if not models:
            return {"model": "no embedded model installed"}
        # Touched at every tick: it must outlast a tick, and goes a few ticks after the daemon.
        idle_s = max(for_workspace(workspace).settings.model.idle_s, 3 * tick_s)
        return {"model": str(models[0]), "model_url": start_shared(workspace.runtime_dir, models[0], idle_s, owner="daemon")}
    except (LLMError, OSError) as e:
        return {"model": f"not started: {e}"}
