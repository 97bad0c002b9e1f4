"""``metnos daemon``: the one long-running process (docs/daemon.md).

It boots the runtime once and writes the log for every way in: the
scheduler loop (one tick every 60 seconds, seeds/002 ch. 11.2), the warm
embedded model, the HTTP API and dashboard (127.0.0.1:8737 by default,
``--http HOST:PORT``), and the channels of metnos.adapters.daemon.extensions. At
start it installs the builtin maintenance jobs that are missing, then ticks:
each tick fires what is due and prints one JSON line with what it did. A
tick's own failures are printed and the loop goes on. ``--once`` runs one
tick and exits, with no HTTP server unless ``--http`` is given.

``metnos daemon token`` prints the bearer token the HTTP API wants.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from metnos.settings.http_address import DEFAULT_HTTP
from domain.errors import MetnosError
from metnos.settings.loader import in_force
from metnos.settings.workspace import Workspace


def run_token(args: argparse.Namespace) -> int:
    from metnos.adapters.daemon.token import load_or_create_token

    print(load_or_create_token(in_force().workspace))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("daemon", help="the long-running process: scheduler, warm model, HTTP API and dashboard")
    inner = p.add_subparsers(dest="daemon_command", metavar="SUBCOMMAND")
    token = inner.add_parser("token", help="print the bearer token of the daemon's HTTP API (made on first use, mode 0600)")
    token.set_defaults(run=run_token)
    p.add_argument("--http", metavar="HOST:PORT", help=f"serve the HTTP API and the dashboard here (default [daemon] http of config.toml, else {DEFAULT_HTTP})")
    p.add_argument("--tick", type=float, default=60.0, help="seconds between ticks (default 60)")
    p.add_argument("--once", action="store_true", help="run one tick and exit")
    p.add_argument("--skip-birth", action="store_true", help="skip the executors' birth tests at start (signatures are still checked)")
    p.add_argument("--no-model", action="store_true", help="do not start or keep warm the embedded model's shared server")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from metnos.adapters.daemon.host import DaemonHost
    from metnos.mechanisms.llm.shared_server import touch
    from metnos.runtime.booted import Runtime
    from metnos.runtime.scheduler.clock import clock_from_env
    from metnos.runtime.scheduler.service import ScheduleService
    from metnos.runtime.scheduler.tick import Scheduler

    if args.tick <= 0:
        raise MetnosError("--tick must be a positive number of seconds")
    clock = clock_from_env()
    # The daemon runs every birth at its start; commands reuse what it found.
    with Runtime.boot(in_force().workspace, birth=not args.skip_birth, reuse_births=False, clock=clock) as rt:
        installed = ScheduleService(rt).install_builtin_jobs()
        # Turns left open by a writer that is gone were closed as abandoned at boot.
        model = {} if args.no_model else _warm_model(rt.workspace, args.tick, args.settings)
        config = args.settings.settings.daemon
        host = DaemonHost(rt, env=os.environ, approval_timeout_s=config.approval_timeout_s)
        with serving(host, _http_address(args, config.http)) as http:
            _emit({"event": "started", "installed": installed, "abandoned": rt.orphans.closed, **model, **http})
            scheduler = Scheduler(rt)
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
                _emit({"event": "tick", **report})
                if args.once:
                    return 0
                time.sleep(max(0.0, args.tick - (time.monotonic() - started)))


def _http_address(args: argparse.Namespace, configured: str) -> str | None:
    """Where to serve HTTP: --http, else [daemon] http of config.toml; none for --once unless asked."""
    if args.http:
        return args.http
    return None if args.once else configured


@contextmanager
def serving(host: Any, address: str | None) -> Iterator[dict[str, Any]]:
    """The HTTP server and the channels, up for the body, down (channels first) after it."""
    from metnos.adapters.daemon import extensions
    from metnos.adapters.daemon.app import HttpServer, build_app, is_loopback
    from metnos.adapters.daemon.token import load_or_create_token

    if address is None:
        yield {}
        return
    server = HttpServer(build_app(host, load_or_create_token(host.runtime.workspace)), address)
    if not is_loopback(server.host):
        print(f"metnos: the daemon listens on {server.url}, beyond this machine; only its token keeps others out", file=sys.stderr)
    server.start()
    started: list[Any] = []
    try:
        for channel in extensions.channels(host):
            channel.start()
            started.append(channel)
        yield {"http": server.url, "channels": [c.name for c in started]}
    finally:
        if not host.drain():
            print("metnos: a turn was still running when the daemon stopped; it is closed as abandoned at the next start", file=sys.stderr)
        for channel in reversed(started):
            channel.stop()
        server.stop()
        host.close()


def _warm_model(workspace: Workspace, tick_s: float, loaded: Any) -> dict:
    """Start (or find) the shared embedded model server, so that asks find it warm.

    Only when a tier is the embedded model and its file is installed; a
    failure is reported in the started line and the daemon runs on without.
    """
    from metnos.mechanisms.llm.errors import LLMError
    from metnos.mechanisms.llm.router import embedded_model_files
    from metnos.mechanisms.llm.shared_server import start_shared

    try:
        models = [m for m in embedded_model_files(loaded.llm(), workspace) if m.is_file()]
        if not models:
            return {"model": "no embedded model installed"}
        # Touched at every tick: it must outlast a tick, and goes a few ticks after the daemon.
        idle_s = max(loaded.settings.model.idle_s, 3 * tick_s)
        return {"model": str(models[0]), "model_url": start_shared(workspace.runtime_dir, models[0], idle_s, owner="daemon")}
    except (LLMError, OSError) as e:
        return {"model": f"not started: {e}"}


def _emit(record: dict) -> None:
    sys.stdout.write(orjson.dumps(record, default=str).decode() + "\n")
    sys.stdout.flush()
