"""The embedded model: llama.cpp's server (through xllamacpp) on 127.0.0.1, started and stopped by Metnos.

The server lives in a child Python process that hosts xllamacpp's in-process
llama.cpp server. Why a child and not this process: stopping must be certain,
and xllamacpp's server can hang in its destructor; a child can always be
killed. llama.cpp's own log goes to a file, not to the user's terminal.

Parent side: ``EmbeddedServer(model_path).start()`` returns the base URL (an
OpenAI-compatible and Anthropic-compatible server), ``stop()`` ends it.
Child side: ``python -m metnos.mechanisms.llm.embedded --model PATH ...`` prints one JSON
line ``{"url": ...}`` when the model is loaded and serves until its stdin
closes (so it dies with its parent) or it gets SIGTERM; with ``--idle-s N``
it is detached instead and serves until nobody used it for N seconds (the
shared warm server, metnos.mechanisms.llm.shared_server).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import httpx

from metnos.mechanisms.llm.errors import EmbeddedUnavailable, ModelNotInstalled
from metnos.mechanisms.llm.gguf_file import NotGGUF, chat_template_of
from metnos.mechanisms.llm.idle_watch import serve_until_idle
from metnos.mechanisms.llm.model_files import MODELS

DEFAULT_CTX = 4096
EXTRA_HINT = "install the optional extra: pip install 'metnos[embedded]'"


# Instead of a template file: the chat template the GGUF carries (the model's own).
BUILTIN_TEMPLATE = "builtin"


def chat_template_path() -> Path:
    return Path(str(resources.files("metnos.mechanisms.llm").joinpath("chat_template.jinja")))


def chat_template_for(model_path: Path) -> Path | str:
    """The template a model is served with: Metnos's own for its known sizes (written for them, it
    teaches their call format), the GGUF's own for any other model that carries one (llama.cpp
    renders it with --jinja), and Metnos's ChatML one for a GGUF that carries none."""
    if model_path.name in {spec.filename for spec in MODELS.values()}:
        return chat_template_path()
    try:
        carried = chat_template_of(model_path)
    except (OSError, NotGGUF):
        carried = None  # llama.cpp says what is wrong with the file when it loads it
    return BUILTIN_TEMPLATE if carried and carried.strip() else chat_template_path()


def xllamacpp_available() -> bool:
    return importlib.util.find_spec("xllamacpp") is not None


class EmbeddedServer:
    def __init__(
        self,
        model_path: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        n_ctx: int = DEFAULT_CTX,
        threads: int | None = None,
        chat_template: Path | str | None = None,
        log_path: Path | None = None,
        idle_s: float | None = None,
        state_file: Path | None = None,
    ) -> None:
        """With ``idle_s``, the server outlives this process: it is detached
        (its own session, no stdin tie) and ends itself after ``idle_s``
        seconds in which nobody touched ``state_file`` and it served nothing
        (see metnos.mechanisms.llm.shared_server)."""
        self.model_path = Path(model_path)
        self.idle_s = idle_s
        self.state_file = state_file
        self.host = host
        self.port = port
        self.n_ctx = n_ctx
        self.threads = threads
        self.chat_template = chat_template or chat_template_for(self.model_path)
        self.log_path = log_path
        self.url: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: object | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout_s: float = 180.0) -> str:
        """Start the server and wait until it answers /health; return its base URL."""
        if self.running and self.url:
            return self.url
        if not self.model_path.is_file():
            raise ModelNotInstalled(str(self.model_path))
        if not xllamacpp_available():
            raise EmbeddedUnavailable(f"the embedded model needs the xllamacpp package: {EXTRA_HINT}")
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="metnos-embedded-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = self.log_path.open("ab")
        # A detached server must not end when this process closes its stdin.
        stdin = subprocess.DEVNULL if self.idle_s is not None else subprocess.PIPE
        self._proc = subprocess.Popen(self.command(), stdin=stdin, stdout=subprocess.PIPE, stderr=log_file, start_new_session=True)
        log_file.close()
        deadline = time.monotonic() + timeout_s
        try:
            self.url = self._read_url(deadline)
            self._wait_healthy(deadline)
        except BaseException:
            self.stop()
            raise
        return self.url

    def command(self) -> list[str]:
        """The child's argv: ``--template`` is a template file, or ``builtin`` for the GGUF's own."""
        cmd = [
            sys.executable, "-m", "metnos.mechanisms.llm.embedded",
            "--model", str(self.model_path),
            "--host", self.host,
            "--port", str(self.port),
            "--ctx", str(self.n_ctx),
            "--template", str(self.chat_template),
        ]
        if self.threads:
            cmd += ["--threads", str(self.threads)]
        if self.idle_s is not None:
            cmd += ["--idle-s", str(self.idle_s)]
            if self.state_file is not None:
                cmd += ["--state-file", str(self.state_file)]
        return cmd

    def release(self) -> None:
        """Let a detached server run on without this process: close our ends only."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.stdout:
            proc.stdout.close()

    def stop(self, timeout_s: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        self.url = None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        for stream in (proc.stdin, proc.stdout):
            if stream:
                stream.close()

    def __enter__(self) -> EmbeddedServer:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _read_url(self, deadline: float) -> str:
        assert self._proc and self._proc.stdout
        sel = selectors.DefaultSelector()
        sel.register(self._proc.stdout, selectors.EVENT_READ)
        buf = b""
        try:
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise EmbeddedUnavailable(f"the embedded model did not load in time (log: {self.log_path})")
                if not sel.select(min(left, 0.5)):
                    if self._proc.poll() is not None:
                        raise self._died()
                    continue
                chunk = os.read(self._proc.stdout.fileno(), 4096)
                if not chunk:
                    raise self._died()
                buf += chunk
        finally:
            sel.close()
        try:
            line = json.loads(buf.split(b"\n", 1)[0])
        except ValueError:
            raise EmbeddedUnavailable(f"the embedded model server said something unexpected (log: {self.log_path})") from None
        if "error" in line:
            raise EmbeddedUnavailable(str(line["error"]))
        return str(line["url"])

    def _wait_healthy(self, deadline: float) -> None:
        assert self.url
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while True:
                try:
                    r = client.get(f"{self.url}/health")
                    if r.status_code == 200:
                        return
                except httpx.HTTPError:
                    pass  # still coming up
                if self._proc is None or self._proc.poll() is not None:
                    raise self._died()
                if time.monotonic() > deadline:
                    raise EmbeddedUnavailable(f"the embedded model server never became healthy at {self.url}")
                time.sleep(0.2)

    def _died(self) -> EmbeddedUnavailable:
        tail = ""
        if self.log_path and self.log_path.exists():
            lines = [ln for ln in self.log_path.read_text(errors="replace").splitlines() if ln.strip()]
            tail = lines[-1] if lines else ""
        code = self._proc.poll() if self._proc else None
        return EmbeddedUnavailable(f"the embedded model server exited during start-up (code {code}): {tail or 'no log'} (log: {self.log_path})")


# The child.

def _child_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m metnos.mechanisms.llm.embedded")
    p.add_argument("--model", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ctx", type=int, default=DEFAULT_CTX)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--template", required=True)
    p.add_argument("--idle-s", type=float, default=None)
    p.add_argument("--state-file", default=None)
    args = p.parse_args(argv)

    def say(obj: dict[str, str]) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    # Ending is abrupt on purpose: the process exit frees the model, and the
    # server's destructor is the part that can hang.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, lambda *_: os._exit(0))
    try:
        import xllamacpp as xlc
    except ImportError:
        say({"error": f"the embedded model needs the xllamacpp package: {EXTRA_HINT}"})
        return 3
    params = xlc.CommonParams()
    params.model.path = args.model
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = 1
    params.use_jinja = True  # the template's tool section and llama.cpp's tool-call parsing need it
    if args.template != BUILTIN_TEMPLATE:
        params.chat_template = Path(args.template).read_text(encoding="utf-8")
    params.sampling.temp = 0.0  # the default for requests that do not say
    if args.threads:
        params.cpuparams.n_threads = args.threads
        params.cpuparams_batch.n_threads = args.threads
    try:
        server = xlc.Server(params)
    except Exception as e:  # noqa: BLE001 - whatever llama.cpp raises, the parent gets one line
        say({"error": f"llama.cpp could not load {args.model}: {e}"})
        return 4
    say({"url": server.listening_address})
    try:
        if args.idle_s is None:
            while sys.stdin.buffer.read(4096):
                pass  # stdin closes when the parent goes: that is our cue to go too
        else:
            serve_until_idle(server.listening_address, args.idle_s,
                             Path(args.state_file) if args.state_file else None)
    finally:
        os._exit(0)


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
