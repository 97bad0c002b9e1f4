"""Issue 33 item 5: run_commands, fenced, against real bubblewrap, Landlock and seccomp.

Each call goes through the runtime as a turn's step does (the Invoker: the policy check, the sandbox,
the events); the turns go through `metnos ask` against a scripted model, with approval, undo and
replay. The attacks are the ones a model (or a page it read) would try with a listed program:
arguments that make it start another, write outside its folder, read a secret or reach the network.
"""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from metnos.adapters.cli import main
from metnos.runtime.booted import Runtime
from metnos.settings.commands import FREE_WARNING
from metnos.settings.errors import ConfigError
from metnos.settings.workspace import Workspace
from tests.integration.test_side_effect_gate import events_of, kind
from tests.support.scripted_llm import ScriptedLLM, call, text

CALLER = {"kind": "user", "actor": "test"}


@pytest.fixture
def layout() -> str:
    # One layout: what is tested here is the fence, the same in both.
    return "xdg"


def configure(**commands: Any) -> None:
    lines = ["[commands]"]
    for key, value in commands.items():
        lines.append(f"{key} = {orjson.dumps(value).decode()}")
    Workspace.from_env().config_file.write_text("\n".join(lines) + "\n")


def run_commands(args: dict[str, Any]) -> Any:
    with Runtime.boot(Workspace.from_env()) as rt:
        return rt.invoker.call("run_commands", args, caller=CALLER)


def output(args: dict[str, Any]) -> dict[str, Any]:
    """The executor's own result: it was spawned and returned one (whatever the program's exit)."""
    done = run_commands(args)
    assert done.refusal is None and done.outcome is not None and done.outcome.ok, done.observation()
    return done.observation()


def refused_kind(done: Any) -> str:
    _requested, refused = done.invocation.pending_events
    return refused.kind


# -- what runs, and the bounds ---------------------------------------------------------------------

def test_a_listed_program_runs_in_the_sandbox(home: Path) -> None:
    (home / "Music").mkdir()
    (home / "Music" / "song.mp3").write_bytes(b"\x00" * 300_000)
    out = output({"program": "du", "args": ["-sk", "~/Music"]})
    assert out["ok"] is True and out["exit_code"] == 0, out
    kib, where = out["stdout"].split()
    assert int(kib) >= 290 and where == str(home / "Music")


def test_an_unlisted_program_is_refused_before_any_spawn_naming_the_setting(home: Path) -> None:
    (home / "keep.txt").write_text("keep")
    done = run_commands({"program": "rm", "args": ["-f", "~/keep.txt"]})
    assert done.outcome is not None and done.outcome.kind == "PolicyViolation", done.observation()
    assert done.outcome.error["rule"] == "unlisted-program"
    assert "[commands] allow" in done.outcome.error["detail"] and "rm" in done.outcome.error["detail"]
    assert refused_kind(done) == "PolicyViolation" and (home / "keep.txt").read_text() == "keep"
    # A path in place of a name, and arguments folded into the name, are refused the same way.
    for program in ("/usr/bin/du", "du -sh ~"):
        done = run_commands({"program": program})
        assert done.outcome.kind == "PolicyViolation", done.observation()


def test_forbidden_runs_nothing_and_says_which_setting(home: Path) -> None:
    configure(shell="forbidden")
    done = run_commands({"program": "ls"})
    assert done.outcome.kind == "PolicyViolation" and done.outcome.error["rule"] == "shell-forbidden"
    assert "[commands] shell" in done.outcome.error["detail"]


def test_output_is_bounded_and_the_cut_said(home: Path) -> None:
    configure(max_output_bytes=2000)
    (home / "big.txt").write_text("a line\n" * 100_000)
    out = output({"program": "grep", "args": ["line", "~/big.txt"]})
    assert len(out["stdout"].encode()) == 2000 and out["truncated"]["stdout"] is True, out["truncated"]
    assert out["bytes"]["stdout"] == 700_000 and "stdout cut at 2000 of 700000 bytes" == out["note"]
    # A call may ask for less than the setting, never for more.
    out = output({"program": "grep", "args": ["line", "~/big.txt"], "max_output_bytes": 100000})
    assert len(out["stdout"].encode()) == 2000


def test_time_is_bounded_and_the_stop_said(home: Path) -> None:
    configure(timeout_s=2)
    (home / "log.txt").write_text("first\n")
    done = run_commands({"program": "tail", "args": ["-f", "~/log.txt"], "timeout_s": 20})
    out = done.observation()
    assert out["timed_out"] is True and out["exit_code"] is None and out["error"]["class"] == "TimedOut", out
    assert out["stdout"] == "first\n" and 2000 <= out["duration_ms"] < 6000, out
    assert done.outcome.duration_ms < 10_000


# -- what the fence keeps out ----------------------------------------------------------------------

def test_secrets_and_system_files_are_not_there(home: Path) -> None:
    ssh = home / ".ssh"
    ssh.mkdir(mode=0o700)
    (ssh / "id_ed25519").write_text("PRIVATE KEY")
    out = output({"program": "grep", "args": ["-r", "PRIVATE", "~/.ssh"]})
    assert "PRIVATE KEY" not in out["stdout"] and out["exit_code"] == 2, out
    out = output({"program": "head", "args": ["/etc/shadow", "/etc/passwd"]})
    assert "No such file" in out["stderr"] and "root:" not in out["stdout"], out
    # Metnos's own keys and settings are masked as in every sandbox.
    config_dir = Workspace.from_env().config_dir
    out = output({"program": "ls", "args": ["-A", str(config_dir)]})
    assert "keys" not in out["stdout"] and "config.toml" not in out["stdout"], out


class _Listener:
    """A real TCP server on 127.0.0.1 counting who connects."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[_Listener]:
    server = _Listener()
    yield server
    server.close()


def test_a_listed_program_cannot_reach_the_network(home: Path, listener: _Listener) -> None:
    # Even a program that opens sockets, under "free": no network namespace of the host, no socket.
    configure(shell="free")
    probe = ("import socket,sys\n"
             "try:\n"
             f"    socket.create_connection(('127.0.0.1', {listener.port}), timeout=2)\n"
             "except OSError as e:\n"
             "    sys.exit('refused: %s' % e)\n"
             "print('connected')\n")
    out = output({"program": "python3", "args": ["-c", probe]})
    assert "connected" not in out["stdout"] and "refused" in out["stderr"], out
    assert listener.accepted == 0
    # The same probe outside the sandbox does connect: the server is there to be reached.
    subprocess.run(["python3", "-c", probe], check=True, capture_output=True)
    assert listener.accepted == 1


def _repo(home: Path) -> Path:
    repo = home / "projects" / "garden"
    repo.mkdir(parents=True)
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1"}
    (repo / "beds.txt").write_text("tomatoes\n")
    for argv in (["init", "-q"], ["add", "beds.txt"],
                 ["-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "-m", "start"]):
        subprocess.run(["git", *argv], cwd=repo, env=env, check=True)
    return repo


def test_argument_injection_cannot_start_another_program(home: Path) -> None:
    repo = _repo(home)
    # git runs an alias that starts with ! through /bin/sh: the sandbox lets only listed programs execute.
    out = output({"program": "git", "args": ["-c", "alias.x=!touch pwned", "x"], "cwd": str(repo)})
    assert out["ok"] is False and not (repo / "pwned").exists(), out
    assert "Permission denied" in out["stderr"] or "cannot run" in out["stderr"], out
    # Settings that make git start a program of their own: a hook-like monitor, an external diff, an ssh command.
    (repo / "beds.txt").write_text("peppers\n")
    for args in (["-c", "core.fsmonitor=touch pwned", "status"],
                 ["-c", "diff.external=touch", "diff", "--ext-diff"],
                 ["-c", "core.sshCommand=touch pwned", "ls-remote", "ssh://example.org/x"],
                 ["-c", "protocol.ext.allow=always", "ls-remote", "ext::touch pwned"]):
        out = output({"program": "git", "args": args, "cwd": str(repo)})
        assert not (repo / "pwned").exists() and not (repo / "diff").exists(), (args, out)
        assert "Permission denied" in out["stderr"] or "cannot run" in out["stderr"] or out["ok"] is False, (args, out)
    # find -exec could start the dynamic loader, which runs any program: find cannot be listed at all,
    # and a config.toml that lists it is refused whole, before anything runs.
    configure(allow=["find"])
    with pytest.raises(ConfigError, match=r"\['find'\] start the programs their arguments name"):
        run_commands({"program": "find", "args": [str(repo), "-exec", "sh", "-c", "touch pwned", ";"], "cwd": str(repo)})
    assert not (repo / "pwned").exists()


def test_an_output_path_outside_the_call_folder_is_read_only(home: Path) -> None:
    repo = _repo(home)
    outside = home / "outside.txt"
    out = output({"program": "git", "args": ["log", f"--output={outside}"], "cwd": str(repo)})
    assert out["ok"] is False and not outside.exists() and "Read-only file system" in out["stderr"], out
    out = output({"program": "git", "args": ["log", "--output=~/.ssh/authorized_keys"], "cwd": str(repo)})
    assert out["ok"] is False and not (home / ".ssh" / "authorized_keys").exists(), out
    # Without cwd nothing at all may change, the home included.
    out = output({"program": "git", "args": ["-C", str(repo), "log", "--output=inside.txt"]})
    assert out["ok"] is False and not (home / "inside.txt").exists(), out
    # Inside cwd the same option writes: that folder is what undo keeps.
    out = output({"program": "git", "args": ["log", "--output=log.txt"], "cwd": str(repo)})
    assert out["ok"] is True and "start" in (repo / "log.txt").read_text(), out


def test_free_runs_a_shell_and_is_warned_about(home: Path, capsys) -> None:
    configure(shell="free")
    out = output({"program": "sh", "args": ["-c", "printf 'a b c' | wc -w"]})
    assert out["ok"] is True and out["stdout"].strip() == "3", out
    capsys.readouterr()
    assert main(["executors", "run", "run_commands", '{"program": "date"}']) == 0
    assert FREE_WARNING in capsys.readouterr().err


# -- through a turn: approval, undo, replay --------------------------------------------------------

def ask(capsys, monkeypatch, script: list, *argv: str) -> tuple[int, dict]:
    with ScriptedLLM(script) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        code = main(["ask", *argv, "--json", "--no-cache"])
        return code, orjson.loads(capsys.readouterr().out)


@pytest.mark.parametrize("level", ["supervised", "full"])
def test_approval_is_asked_at_every_level_that_runs_it(home: Path, level: str, capsys, monkeypatch) -> None:
    (home / "Music").mkdir()
    code, out = ask(capsys, monkeypatch, [call("run_commands", {"program": "du", "args": ["-sh", "~/Music"]}), text("done")],
                    "how much space does ~/Music take?", "--no", "--autonomy", level)
    assert out["status"] == "refused" and code == 3, out
    events = events_of(capsys, out["turn_id"])
    [asked] = [e["state"] for e in events if kind(e) == "ApprovalAsked"]
    [answered] = [e["state"] for e in events if kind(e) == "ApprovalAnswered"]
    assert asked["executor"] == "run_commands" and answered["approved"] is False
    # (The turn may open with a read of the folder it names; run_commands itself never ran.)
    assert "run_commands" not in [e["state"].get("executor") for e in events if kind(e) == "StepInvoked"]
    capsys.readouterr()
    assert main(["replay", out["turn_id"], "--json"]) == 0, capsys.readouterr().out


def test_read_only_neither_offers_nor_runs_it(home: Path, capsys, monkeypatch) -> None:
    code, out = ask(capsys, monkeypatch, [call("run_commands", {"program": "du", "args": ["-sh", "~"]}), text("done")],
                    "how much space does my home take?", "--yes", "--autonomy", "read_only")
    assert out["status"] == "refused" and code == 3, out
    events = events_of(capsys, out["turn_id"])
    assert "run_commands" not in [e["state"].get("executor") for e in events if kind(e) == "StepInvoked"]


def test_undo_restores_what_a_listed_program_changed(home: Path, capsys, monkeypatch) -> None:
    configure(allow=["sed", "ls"])
    garden = home / "garden"
    garden.mkdir()
    (garden / "beds.txt").write_bytes(b"tomatoes\nbasil\n")
    (garden / "beds.txt").chmod(0o640)
    (garden / "seeds.txt").write_text("kale\n")
    step = {"program": "sed", "args": ["-i", "s/tomatoes/peppers/", "beds.txt"], "cwd": "~/garden"}
    code, out = ask(capsys, monkeypatch, [call("run_commands", step), text("replaced")],
                    "in ~/garden/beds.txt replace tomatoes with peppers", "--yes")
    assert code == 0, out
    assert (garden / "beds.txt").read_text() == "peppers\nbasil\n"
    turn_id = out["turn_id"]
    capsys.readouterr()
    assert main(["undo", "--json"]) == 0
    result = orjson.loads(capsys.readouterr().out)
    assert result["status"] == "undone" and result["turn_id"] == turn_id, result
    assert (garden / "beds.txt").read_bytes() == b"tomatoes\nbasil\n"
    assert (garden / "beds.txt").stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in garden.iterdir()) == ["beds.txt", "seeds.txt"]
    capsys.readouterr()
    assert main(["replay", "--all"]) == 0, capsys.readouterr().out
