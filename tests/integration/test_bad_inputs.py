"""Issue 18 item 4: every bad input gets a clear error, never a traceback, never silence.

Real processes where the fault is one of the process (a closed standard input,
a terminal that sends end-of-file, a model server that never answers, a
workspace of another user); in-process ``main([...])`` where the CLI's answer is
the whole story.
"""

from __future__ import annotations

import os
import pty
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from metnos.adapters.cli import main
from metnos.adapters.cli.ask_cmd import EXIT_CODES
from tests.support.cli_process import metnos_env, run, spawn, wait_for
from tests.support.scripted_llm import ScriptedLLM, call, text

WRITE = call("write_files", {"files": [{"path": "~/approved.txt", "content": "x"}]})


def one_clear_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("metnos: "), stderr
    return lines[0]


def kinds(env: dict[str, str]) -> list[str]:
    done = run(["events", "--json"], env)
    return [orjson.loads(line)["topic"].rsplit(".", 1)[-1] for line in done.stdout.splitlines()]


@pytest.mark.parametrize("request_text", ["", "   \n\t "], ids=["empty", "blank"])
def test_an_empty_request_is_refused_before_anything_is_asked_or_recorded(home: Path, capsys, monkeypatch, request_text: str) -> None:
    with ScriptedLLM([text("an answer to nothing")], dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        code = main(["ask", request_text])
        err = capsys.readouterr().err
        assert code == 2
        assert "the request is empty" in one_clear_line(err)
        assert llm.requests == []
    assert "TurnStarted" not in kinds(metnos_env())


@pytest.mark.parametrize(("command", "variable", "value"), [
    (["ask", "what time is it"], "METNOS_CAP_STEPS", "abc"),
    (["ask", "what time is it"], "METNOS_JUDGE_THRESHOLD", "nan"),
    (["ask", "what time is it"], "METNOS_LLM_TIMEOUT", "-1"),
    (["ask", "what time is it"], "METNOS_LLM_PROVIDER", "maybe"),
    (["replay", "--all"], "METNOS_ENGINE_POOL_SIZE", "twelve"),
    (["replay", "--all"], "METNOS_SCRATCHPAD_THRESHOLD_BYTES", "10"),
    (["replay", "--all"], "METNOS_BIRTH_REUSE", "maybe"),
    (["replay", "--all"], "METNOS_LLM_URL", "ftp://127.0.0.1"),
])
def test_an_invalid_setting_is_one_line_naming_it(home: Path, command: list[str], variable: str, value: str) -> None:
    done = run(command, metnos_env(**{variable: value}))
    assert done.returncode == 2
    line = one_clear_line(done.stderr)
    assert line.startswith(f"metnos: {variable}={value!r} is invalid: ")


def test_a_misspelt_setting_is_named_not_ignored_in_silence(home: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("METNOS_CAP_STEP", "3")
    capsys.readouterr()
    assert main(["turns", "list"]) == 0
    assert "METNOS_CAP_STEP is not a Metnos setting (did you mean METNOS_CAP_STEPS?)" in capsys.readouterr().err


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A real socket on 127.0.0.1 that accepts every connection and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


class StderrLines:
    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stderr:
            self.lines.append(line)

    def text(self) -> str:
        self._thread.join(timeout=30)
        return "".join(self.lines)


def test_a_model_that_never_answers_is_a_bounded_wait_with_progress(home: Path, silent_server: str) -> None:
    env = metnos_env(METNOS_LLM_URL=silent_server, METNOS_LLM_MODEL="silent", METNOS_LLM_TIMEOUT="5")
    started = time.monotonic()
    proc = spawn(["ask", "what time is it"], env)
    err = StderrLines(proc)
    code = proc.wait(timeout=120)
    stderr = err.text()
    assert code == 1, stderr
    assert "Traceback" not in stderr
    assert f"metnos: waiting for the model at {silent_server}: 3 s so far, gives up after 5 s" in stderr
    assert f"the LLM server at {silent_server}/v1/chat/completions is unreachable: no reply within 5 s" in stderr
    assert time.monotonic() - started < 60


def test_the_default_wait_says_its_bound_and_can_be_interrupted(home: Path, silent_server: str) -> None:
    env = metnos_env(METNOS_LLM_URL=silent_server, METNOS_LLM_MODEL="silent")
    proc = spawn(["ask", "what time is it"], env)
    err = StderrLines(proc)
    wait_for(lambda: any("gives up after 120 s" in line for line in err.lines), timeout=90, what="the progress line", proc=proc)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    stderr = err.text()
    assert "Traceback" not in stderr and "interrupted by SIGINT while waiting for the model" in stderr


def approval_events(env: dict[str, str]) -> list[dict]:
    done = run(["events", "--json", "--topic", "ApprovalAnswered"], env)
    return [orjson.loads(line)["state"] for line in done.stdout.splitlines()]


def test_a_closed_standard_input_at_an_approval_is_no_with_a_message(home: Path) -> None:
    with ScriptedLLM([WRITE, text("I did not write it")], dialect="openai") as llm:
        env = metnos_env(METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted")
        proc = spawn(["ask", "write approved.txt"], env, stdin=None, preexec_fn=lambda: os.close(0))
        out, err = proc.communicate(timeout=180)
    assert "Traceback" not in err
    assert proc.returncode == EXIT_CODES["refused"], err  # the user's no ends the turn as refused
    assert "write_files needs your approval and there is no terminal to ask on" in err and "taken as no" in err
    assert not (home / "approved.txt").exists()
    assert approval_events(env) == [{"step": 1, "approved": False, "by": "no-terminal"}]


def test_end_of_input_at_the_approval_prompt_is_no_with_a_message(home: Path) -> None:
    master, slave = pty.openpty()
    with ScriptedLLM([WRITE, text("I did not write it")], dialect="openai") as llm:
        env = metnos_env(METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted")
        proc = spawn(["ask", "write approved.txt"], env, stdin=slave)
        os.close(slave)
        os.write(master, b"\x04")  # Ctrl-D: the terminal says its input has ended
        out, err = proc.communicate(timeout=180)
    os.close(master)
    assert "Traceback" not in err
    assert proc.returncode == EXIT_CODES["refused"], err  # the user's no ends the turn as refused
    assert "standard input closed at the approval of step 1 (write_files); taken as no" in err
    assert not (home / "approved.txt").exists()
    assert approval_events(env) == [{"step": 1, "approved": False, "by": "user:closed-input"}]


def test_a_workspace_of_another_user_is_refused_with_its_owner_named(home: Path, tmp_path: Path) -> None:
    from metnos.settings.workspace import Workspace

    data = Workspace.from_env().data_dir
    os.chown(data, 65534, 65534)
    try:
        for command in (["turns", "list"], ["ask", "what time is it"], ["replay", "--all"]):
            done = run(command, metnos_env())
            assert done.returncode == 2, done.stderr
            line = one_clear_line(done.stderr)
            assert f"the workspace at {data} belongs to" in line and "(uid 65534), not to you" in line
    finally:
        os.chown(data, os.geteuid(), os.getegid())


def test_an_unexpected_error_is_one_line_and_the_traceback_is_there_on_request(home: Path, capsys, monkeypatch) -> None:
    from metnos.adapters.cli import turns_cmd

    def broken(args):  # noqa: ANN001, ANN202 - a bug planted in a command
        return {}["missing"]

    monkeypatch.setattr(turns_cmd, "run_list", broken)
    capsys.readouterr()
    assert main(["turns", "list"]) == 70
    line = one_clear_line(capsys.readouterr().err)
    assert "unexpected error: KeyError: 'missing'" in line and "--debug" in line
    assert main(["--debug", "turns", "list"]) == 70
    assert "Traceback" in capsys.readouterr().err
    monkeypatch.setenv("METNOS_DEBUG", "1")
    assert main(["turns", "list"]) == 70
    assert "Traceback" in capsys.readouterr().err


def test_the_connection_gives_up_in_seconds_while_the_reply_may_take_minutes() -> None:
    from metnos.mechanisms.llm.transport import make_client

    with make_client(120.0) as client:
        assert client.timeout.connect == 5.0 and client.timeout.read == 120.0


@pytest.fixture
def trickling_server() -> Iterator[str]:
    """A real socket on 127.0.0.1 that answers 200 at once, then sends its body a byte a second."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    stop = threading.Event()

    def serve() -> None:
        conn, _ = server.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n")
        for _ in range(200):
            if stop.wait(1.0):
                break
            try:
                conn.sendall(b" ")
            except OSError:
                break
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(timeout=5)
    server.close()


def test_a_reply_sent_a_byte_at_a_time_cannot_stretch_the_bound(trickling_server: str) -> None:
    from metnos.mechanisms.llm.errors import ProviderTimeout
    from metnos.mechanisms.llm.messages import UserMessage
    from metnos.mechanisms.llm.openai_compat import OpenAICompatProvider

    provider = OpenAICompatProvider(url=trickling_server, model="slow", timeout_s=3)
    started = time.monotonic()
    with pytest.raises(ProviderTimeout) as caught:
        provider.complete([UserMessage("hello")])
    provider.close()
    # Each byte comes well within the read timeout; only the bound on the whole reply stops it.
    assert time.monotonic() - started < 15
    assert "no reply within 3 s" in str(caught.value)
