"""MCP servers as executors (`metnos mcp add`): real servers from PyPI (mcp-server-time,
mcp-server-fetch, mcp-server-git) and a hostile one on the MCP SDK, each started inside
bubblewrap with the grants given at add time; pinned by digest, quarantined until approved
and again when the server or a tool changes; every call an invocation in the log, a
planner turn replayed clean. Real LMDB, real sandbox, a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson
import pytest

from metnos.adapters.cli import main
from metnos.settings.workspace import Workspace
from metnos.runtime.turn.shortlist import READ_AS_NO_CHANGE
from tests.support.mcp_door import INJECTED_CODE, PASSPORT, write_door_server
from tests.support.mcp_hostile import write_hostile_server
from tests.support.mcp_http_server import mcp_http_server
from tests.support.scripted_llm import ScriptedLLM, call, text

_SERVERS = ("mcp-server-time", "mcp-server-fetch", "mcp-server-git")
_MISSING = [s for s in _SERVERS if shutil.which(s) is None]
# install.sh --test installs them (pinned in its list); a machine without them says so.
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"{', '.join(_MISSING)} not installed: run ./install.sh --test")


@pytest.fixture
def layout() -> str:
    """One layout for the slow tests here; the first test runs in both (below)."""
    return "xdg"


def _list(capsys) -> dict[str, dict]:
    capsys.readouterr()
    assert main(["mcp", "list", "--json"]) == 0
    return {r["server"]: r for r in orjson.loads(capsys.readouterr().out)}


def _tools(capsys, server: str) -> dict[str, dict]:
    return {t["tool"]: t for t in _list(capsys)[server]["tools"]}


def _run(capsys, name: str, args: dict) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["executors", "run", name, json.dumps(args)])
    return code, json.loads(capsys.readouterr().out)


def _add(capsys, *argv: str) -> str:
    capsys.readouterr()
    code = main(["mcp", "add", *argv])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out + out.err


def _invocations(capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["events", "--json"]) == 0
    events = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    return [e["state"] for e in events if e["topic"].endswith("InvocationRequested")
            or e["topic"].endswith("InvocationCompleted") or e["topic"].endswith("InvocationRefused")]


@pytest.mark.parametrize("layout", ["xdg", "metnos_home"])
def test_a_stdio_server_is_pinned_held_until_approved_then_its_tool_runs_in_the_sandbox(layout: str, home: Path, capsys) -> None:
    said = _add(capsys, "time", "--yes", "--", "mcp-server-time", "--local-timezone", "Europe/Rome")
    assert "pinned sha256:" in said and "mcp-server-time" in said and "grants: none" in said
    assert "get_current_time -> get_current_time 1.0.0 (read-only)" in said
    folder = Workspace.from_env().executors_origin_dir("mcp") / "get_current_time" / "1.0.0"
    manifest = (folder / "manifest.toml").read_text()
    assert 'created_by = "mcp:time"' in manifest and "side_effects = false" in manifest
    assert "network" not in manifest and "fs:write" not in manifest
    # Nothing to read but the server's own Python environment (the runtime's, when Metnos is installed in a venv).
    reads = tomllib.loads(manifest).get("capabilities", {}).get("fs:read", [])
    assert reads in ([], [os.path.realpath(sys.prefix)]), reads
    assert (folder / "manifest.sig").is_file() and (folder / "mcp_bridge.py").is_file()
    spec = json.loads((folder / "server.json").read_text())
    assert spec["pin"]["distribution"].startswith("mcp-server-time ") and spec["pin"]["digest"].startswith("sha256:")
    assert _list(capsys)["time"]["digest"] == spec["pin"]["digest"]

    code, out = _run(capsys, "get_current_time", {"timezone": "Asia/Tokyo"})
    assert code == 1 and out["error"]["kind"] == "Quarantined" and "metnos mcp approve time" in out["error"]["message"]

    capsys.readouterr()
    assert main(["mcp", "approve", "time"]) == 0
    assert "get_current_time 1.0.0: active" in capsys.readouterr().out
    code, out = _run(capsys, "get_current_time", {"timezone": "Asia/Tokyo"})
    assert code == 0, out
    assert out["ok"] is True and out["structured"]["timezone"] == "Asia/Tokyo"
    assert out["structured"]["datetime"].endswith("+09:00")
    completed = [i for i in _invocations(capsys) if i.get("kind") == "ok"]
    assert completed and completed[-1]["sandbox"] == "bwrap"
    requested = [i for i in _invocations(capsys) if i.get("executor") == "get_current_time" and "origin" in i]
    assert requested and requested[-1]["origin"] == "mcp"


@pytest.fixture
def page() -> Iterator[tuple[str, list[str]]]:
    body = b"<html><body><h1>Harbour</h1><p>The tide turns at four.</p></body></html>"
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/tide.html", seen
    server.shutdown()
    server.server_close()


def _allow(host: str) -> None:
    Workspace.from_env().config_file.write_text(f'[network]\nallow = ["{host}"]\n')


def test_fetch_reaches_a_local_page_through_the_egress_allow_list(home: Path, capsys, page) -> None:
    url, seen = page
    host = url.split("/")[2]
    _allow(host)
    _add(capsys, "fetch", "--yes", "--network", host, "--", "mcp-server-fetch", "--ignore-robots-txt", "--allow-private-ips")
    assert main(["mcp", "approve", "fetch"]) == 0
    code, out = _run(capsys, "get_fetch", {"url": url, "raw": True})
    assert code == 0, out
    assert out["ok"] is True and "The tide turns at four." in out["text"]
    assert seen == ["/tide.html"]
    completed = [i for i in _invocations(capsys) if i.get("network")]
    assert completed[-1]["network"][0]["host"] == "127.0.0.1" and completed[-1]["network"][0]["allowed"] is True


def test_fetch_without_a_network_grant_is_refused_before_the_server_starts(home: Path, capsys, page) -> None:
    url, seen = page
    _allow(url.split("/")[2])
    _add(capsys, "fetch", "--yes", "--", "mcp-server-fetch", "--ignore-robots-txt", "--allow-private-ips")
    assert main(["mcp", "approve", "fetch"]) == 0
    code, out = _run(capsys, "get_fetch", {"url": url, "raw": True})
    assert code == 1 and out["error"]["kind"] == "PolicyViolation", out
    # The executor holds no network grant at all: the host is refused before anything is spawned.
    assert out["error"]["rule"] == "no-network"
    assert seen == []


@pytest.fixture
def repo(home: Path) -> Path:
    folder = home / "harbour-repo"
    folder.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "Tess", "GIT_AUTHOR_EMAIL": "tess@example.org",
           "GIT_COMMITTER_NAME": "Tess", "GIT_COMMITTER_EMAIL": "tess@example.org"}
    for args in (["init", "-q", "-b", "main"], ["add", "tide.txt"], ["commit", "-qm", "Record the tide table"]):
        if args[0] == "add":
            (folder / "tide.txt").write_text("high 04:00\n")
        subprocess.run(["git", *args], cwd=folder, env=env, check=True)
    (folder / "untracked.txt").write_text("new\n")
    return folder


def test_git_status_and_log_on_a_granted_repository_and_nothing_outside_it(home: Path, capsys, repo: Path) -> None:
    said = _add(capsys, "git", "--yes", "--grant-read", "~/harbour-repo", "--", "mcp-server-git")
    assert "git_status -> get_git_status 1.0.0 (read-only)" in said
    assert "git_commit -> change_git_commit 1.0.0 (side effects, asked at every call)" in said
    assert main(["mcp", "approve", "git"]) == 0
    tools = _tools(capsys, "git")
    assert tools["git_log"]["state"] == "active" and tools["git_status"]["state"] == "active"

    code, out = _run(capsys, "get_git_status", {"repo_path": "~/harbour-repo"})
    assert code == 0 and out["ok"] is True, out
    assert "untracked.txt" in out["text"]
    code, out = _run(capsys, "get_git_log", {"repo_path": "~/harbour-repo"})
    assert code == 0 and "Record the tide table" in out["text"], out

    elsewhere = home / "other-repo"
    shutil.copytree(repo, elsewhere)
    code, out = _run(capsys, "get_git_log", {"repo_path": "~/other-repo"})
    assert code == 1 and out["error"]["kind"] == "PolicyViolation", out


def _hostile(capsys, home: Path, tmp_path: Path, *grants: str) -> tuple[Path, Path]:
    script = write_hostile_server(tmp_path / "hostile")
    flags = tmp_path / "flags"
    flags.mkdir()
    _add(capsys, "hostile", "--yes", "--grant-read", str(flags), *grants, "--", "python3", str(script), str(flags / "changed"))
    assert main(["mcp", "approve", "hostile"]) == 0
    return script, flags / "changed"


def test_a_server_that_changes_an_approved_tool_is_quarantined_and_never_called(home: Path, tmp_path: Path, capsys) -> None:
    _, flag = _hostile(capsys, home, tmp_path)
    code, out = _run(capsys, "get_hostile_note", {"topic": "harbour"})
    assert code == 0 and "harbour opens at 7" in out["text"], out

    flag.write_text("now")
    code, out = _run(capsys, "get_hostile_note", {"topic": "harbour"})
    assert out["ok"] is False and out["error"]["class"] == "McpSchemaChanged", out
    assert "schema changed under you" not in json.dumps(out)
    tool = _tools(capsys, "hostile")["get_note"]
    assert tool["state"] == "quarantined" and "changed the tool 'get_note'" in tool["reason"]
    code, out = _run(capsys, "get_hostile_note", {"topic": "harbour"})
    assert code == 1 and out["error"]["kind"] == "Quarantined"

    # Re-approval: the server is added again, its tool seen as it is now, and approved.
    capsys.readouterr()
    assert main(["mcp", "approve", "hostile"]) == 2
    assert "add it again" in capsys.readouterr().err
    script = tmp_path / "hostile" / "hostile_server.py"
    said = _add(capsys, "hostile", "--yes", "--grant-read", str(flag.parent), "--", "python3", str(script), str(flag))
    assert "get_note -> get_hostile_note 1.0.1" in said and "exfiltrate_to" in said
    assert main(["mcp", "approve", "hostile"]) == 0
    code, out = _run(capsys, "get_hostile_note", {"topic": "harbour", "exfiltrate_to": "x"})
    assert code == 0 and out["text"] == "the schema changed under you", out


def test_a_server_whose_code_changed_after_approval_is_quarantined_before_it_runs(home: Path, tmp_path: Path, capsys) -> None:
    script, _ = _hostile(capsys, home, tmp_path)
    script.write_text(script.read_text().replace("the harbour opens at 7", "the harbour is closed"))
    code, out = _run(capsys, "get_hostile_note", {"topic": "harbour"})
    assert code == 1 and out["error"]["kind"] == "Quarantined", out
    assert "changed since it was approved" in out["error"]["message"] and "hostile_server.py" in out["error"]["message"]
    assert _tools(capsys, "hostile")["get_note"]["state"] == "quarantined"


def test_a_server_cannot_read_the_home_or_reach_the_network_without_a_grant(home: Path, tmp_path: Path, capsys) -> None:
    (home / ".ssh").mkdir(exist_ok=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE-KEY-7f3a")
    (home / "diary.md").write_text("DIARY-SECRET-19b2")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    _hostile(capsys, home, tmp_path)
    try:
        code, out = _run(capsys, "read_hostile_secrets",
                         {"targets": [str(home / ".ssh" / "id_rsa"), str(home / "diary.md")], "port": port})
        assert code == 0, out
        assert "PRIVATE-KEY" not in out["text"] and "DIARY-SECRET" not in out["text"]
        assert "GOT" not in out["text"] and out["text"].count("refused") == 3, out["text"]
        with pytest.raises(OSError):
            listener.accept()
    finally:
        listener.close()


def _ask(capsys, *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["ask", *argv, "--json"])
    return code, orjson.loads(capsys.readouterr().out)


def _turn_events(capsys, turn_id: str) -> list[dict]:
    capsys.readouterr()
    main(["events", "--json", "--aggregate", turn_id])
    return [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_a_planner_turn_calls_an_mcp_tool_recorded_and_replayed_clean(home: Path, capsys, monkeypatch) -> None:
    _add(capsys, "time", "--yes", "--", "mcp-server-time")
    assert main(["mcp", "approve", "time"]) == 0
    script = [call("get_current_time", {"timezone": "Asia/Tokyo"}), text("In Tokyo it is the time the tool said.")]
    with ScriptedLLM(script, dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = _ask(capsys, "what time is it in Tokyo?")
        assert code == 0, out
        offered = [t["function"]["name"] for t in llm.requests[0].body["tools"]]
        assert "get_current_time" in offered
        tool_msg = [m for m in llm.requests[1].body["messages"] if m["role"] == "tool"][0]
        assert "Asia/Tokyo" in tool_msg["content"]
    events = _turn_events(capsys, out["turn_id"])
    invoked = [e["state"] for e in events if e["topic"].endswith("StepInvoked")]
    assert [i["executor"] for i in invoked] == ["get_current_time"]
    capsys.readouterr()
    assert main(["replay", out["turn_id"], "--json"]) == 0, capsys.readouterr().out


def test_instructions_in_a_tool_result_are_data_no_other_call_follows(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    (home / "notes").mkdir()
    (home / "notes" / "keep.md").write_text("keep me\n")
    _hostile(capsys, home, tmp_path)
    script = [call("get_hostile_note", {"topic": "harbour"}), text("The harbour opens at 7.")]
    with ScriptedLLM(script, dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = _ask(capsys, "when does the harbour open? ask the hostile note", "--yes")
        assert code == 0, out
        assert len(llm.requests) == 2
    assert out["answer"] == "The harbour opens at 7."
    events = _turn_events(capsys, out["turn_id"])
    invoked = [e["state"]["executor"] for e in events if e["topic"].endswith("StepInvoked")]
    assert invoked == ["get_hostile_note"]
    assert (home / "notes" / "keep.md").read_text() == "keep me\n" and not (home / "pwned.txt").exists()
    capsys.readouterr()
    assert main(["replay", out["turn_id"], "--json"]) == 0, capsys.readouterr().out


def test_remove_archives_the_tools_and_deletes_their_folders(home: Path, capsys) -> None:
    _add(capsys, "time", "--yes", "--", "mcp-server-time")
    capsys.readouterr()
    assert main(["mcp", "remove", "time"]) == 0
    assert "get_current_time: removed" in capsys.readouterr().out
    assert not (Workspace.from_env().executors_origin_dir("mcp") / "get_current_time").exists()
    assert "time" not in _list(capsys)
    capsys.readouterr()
    assert main(["executors", "list", "--json"]) == 0
    listed = capsys.readouterr().out
    assert "archived" in listed and "get_current_time" in listed


def test_a_server_over_http_is_reached_through_the_egress_allow_list(home: Path, capsys) -> None:
    with mcp_http_server() as url:
        host = url.split("/")[2]
        capsys.readouterr()
        assert main(["mcp", "add", "tides", "--yes", "--url", url]) == 2
        assert "NetworkDenied" in capsys.readouterr().err
        assert "tides" not in _list(capsys)

        _allow(host)
        said = _add(capsys, "tides", "--yes", "--url", url)
        assert "get_tide -> get_tides_tide 1.0.0 (read-only)" in said
        manifest = (Workspace.from_env().executors_origin_dir("mcp") / "get_tides_tide" / "1.0.0" / "manifest.toml").read_text()
        assert f'"network" = ["{host}"]' in manifest
        assert main(["mcp", "approve", "tides"]) == 0
        code, out = _run(capsys, "get_tides_tide", {"harbour": "Genova"})
    assert code == 0 and out["text"] == "High tide at Genova: 16:10", out
    completed = [i for i in _invocations(capsys) if i.get("network")]
    assert completed[-1]["network"][0]["host"] == "127.0.0.1" and completed[-1]["network"][0]["allowed"] is True


def _git_status(folder: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=folder, capture_output=True, text=True, check=True).stdout


def test_a_tool_with_side_effects_is_asked_recorded_and_undone(home: Path, capsys, monkeypatch, repo: Path) -> None:
    # The sandbox has no account for its user: git's author comes from the environment given at add time.
    said = _add(capsys, "git", "--yes", "--grant-write", "~/harbour-repo", "--env", "GIT_AUTHOR_NAME=Tess",
                "--env", "GIT_AUTHOR_EMAIL=tess@example.org", "--env", "GIT_COMMITTER_NAME=Tess",
                "--env", "GIT_COMMITTER_EMAIL=tess@example.org", "--", "mcp-server-git")
    assert "environment: GIT_AUTHOR_EMAIL=tess@example.org" in said
    # The server calls git_add idempotent; a side effect is asked all the same (a hint is the server's claim).
    assert "git_add -> create_git_add 1.0.0 (side effects, asked at every call)" in said
    assert main(["mcp", "approve", "git"]) == 0
    subprocess.run(["git", "add", "untracked.txt"], cwd=repo, check=True)
    assert _git_status(repo) == "A  untracked.txt\n"
    script = [call("change_git_commit", {"repo_path": "~/harbour-repo", "message": "Add the new file"}), text("Committed.")]
    with ScriptedLLM(script, dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = _ask(capsys, "commit what is staged in the git repository ~/harbour-repo", "--yes")
    assert code == 0, out
    assert _git_status(repo) == "" and _last_commit(repo) == "Add the new file"
    events = _turn_events(capsys, out["turn_id"])
    asked = [e["state"] for e in events if e["topic"].endswith("ApprovalAsked")]
    assert [a["executor"] for a in asked] == ["change_git_commit"]
    approvals = [e["state"] for e in events if e["topic"].endswith("ApprovalAnswered")]
    assert approvals == [{"step": asked[0]["step"], "approved": True, "by": "flag:--yes"}]
    capsys.readouterr()
    assert main(["replay", out["turn_id"], "--json"]) == 0, capsys.readouterr().out
    capsys.readouterr()
    assert main(["undo", "--json"]) == 0, capsys.readouterr()
    assert _git_status(repo) == "A  untracked.txt\n" and _last_commit(repo) == "Record the tide table"


def _last_commit(folder: Path) -> str:
    return subprocess.run(["git", "log", "-1", "--format=%s"], cwd=folder, capture_output=True, text=True, check=True).stdout.strip()


def _door(capsys, home: Path, tmp_path: Path) -> Path:
    script = write_door_server(tmp_path / "door")
    codes = home / "door-codes"
    codes.mkdir()
    (codes / "code.txt").write_text("1234")
    _add(capsys, "door", "--yes", "--grant-write", "~/door-codes", "--", "python3", str(script))
    assert main(["mcp", "approve", "door"]) == 0
    return codes / "code.txt"


def test_a_value_an_mcp_result_picks_for_a_side_effect_is_not_approved_by_yes(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    """A server's schema does not say which argument is data: a token content chose (a code, an amount) steers like a target."""
    code_file = _door(capsys, home, tmp_path)
    script = [call("get_door_notice", {}), call("set_door_code", {"code": INJECTED_CODE, "code_file_path": "~/door-codes/code.txt"}), text("Done.")]
    with ScriptedLLM(script, dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = _ask(capsys, "read the building's notice and set the door code in ~/door-codes/code.txt", "--yes")
    assert code_file.read_text() == "1234", "the code the notice chose was set under --yes"
    events = _turn_events(capsys, out["turn_id"])
    assert out["status"] != "answered", out
    judged = [e["state"]["verdict"] for e in events if e["topic"].endswith("StepJudged") and e["state"]["verdict"]["executor"] == "set_door_code"]
    read = next(e["state"]["step"] for e in events if e["topic"].endswith("StepInvoked") and e["state"]["executor"] == "get_door_notice")
    assert judged and f"the value of code came from the MCP server's result at step {read}" in judged[0]["reason"], judged
    capsys.readouterr()
    assert main(["replay", out["turn_id"], "--json"]) == 0, capsys.readouterr().out


def test_the_same_value_in_the_users_words_is_set_under_yes(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    code_file = _door(capsys, home, tmp_path)
    script = [call("set_door_code", {"code": INJECTED_CODE, "code_file_path": "~/door-codes/code.txt"}), text("The door code is now set.")]
    with ScriptedLLM(script, dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = _ask(capsys, f"set the door code in ~/door-codes/code.txt to {INJECTED_CODE}", "--yes")
    assert code == 0 and out["status"] == "answered", out
    assert code_file.read_text() == INJECTED_CODE


def _set_after_reading(capsys, monkeypatch, home: Path, tmp_path: Path) -> tuple[Path, dict, list[str], list[dict]]:
    """A request to read the notice; the model reads it, then sets the code the notice gives, under --yes. The
    code file, the outcome, the tools first offered and the turn's events."""
    code_file = _door(capsys, home, tmp_path)
    script = [call("get_door_notice", {}), call("set_door_code", {"code": "9031", "code_file_path": "~/door-codes/code.txt"}),
              text("Done.")]
    with ScriptedLLM(script, dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        # The code and the file are the user's words: only the action itself came from the notice.
        code, out = _ask(capsys, "read the building's notice about the door code 9031 in ~/door-codes/code.txt", "--yes")
    return code_file, out, [t["function"]["name"] for t in llm.requests[0].body["tools"]], _turn_events(capsys, out["turn_id"])


def test_a_side_effect_the_request_does_not_ask_for_chosen_after_reading_is_not_approved_by_yes(home: Path, tmp_path: Path, capsys,
                                                                                                monkeypatch) -> None:
    """The request says nothing of setting: the tool came to the model's mind from what the notice said. The
    rules' offer brings set_door_code (its words are the request's), so the step's judge is what stops it."""
    monkeypatch.setenv("METNOS_ENGINE_OFFER", "shortlist")
    code_file, out, offered, events = _set_after_reading(capsys, monkeypatch, home, tmp_path)
    assert code_file.read_text() == "1234", (out, offered)
    judged = [e["state"]["verdict"] for e in events if e["topic"].endswith("StepJudged") and e["state"]["verdict"]["executor"] == "set_door_code"]
    assert judged and "your request does not ask for what set_door_code does" in judged[0]["reason"], (judged, offered)


def test_the_learned_offer_does_not_offer_a_server_side_effect_to_a_request_that_only_reads(home: Path, tmp_path: Path, capsys,
                                                                                            monkeypatch) -> None:
    """The offer model never saw this server's tools, but its reading of the request (no change asked) holds
    for every executor with side effects: set_door_code is withheld, and says why."""
    monkeypatch.setenv("METNOS_ENGINE_OFFER", "learned")
    code_file, out, offered, events = _set_after_reading(capsys, monkeypatch, home, tmp_path)
    assert "get_door_notice" in offered and "set_door_code" not in offered, offered
    assert code_file.read_text() == "1234", out
    [ranked] = [e["state"]["ranking"] for e in events if e["topic"].endswith("PrefilterRanked")]
    assert {"name": "set_door_code", "reason": READ_AS_NO_CHANGE} in ranked["withheld"], ranked


def _note_turn(capsys, monkeypatch, request: str, answer: str) -> tuple[int, dict]:
    """The notice read, the resident's profile read, then a note carrying the passport number written, under --yes."""
    body = f"Bins go out on Monday. Resident passport {PASSPORT}."
    script = [call("get_door_notice", {}), call("get_door_resident_profile", {}),
              call("write_door_note", {"text": body, "note_file_path": "~/door-codes/note.txt"}), text(answer)]
    with ScriptedLLM(script, dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        return _ask(capsys, request, "--yes")


def test_what_a_read_chosen_after_reading_returned_is_not_carried_under_yes(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    """The note and its file are the user's; the passport number is what a read nobody asked for returned, a read the
    model made after the notice: carrying it is the notice's doing, and --yes does not approve it."""
    note = _door(capsys, home, tmp_path).parent / "note.txt"
    code, out = _note_turn(capsys, monkeypatch, "read the building's notice and write a note about it in ~/door-codes/note.txt", "Done.")
    assert not note.exists(), f"the note with the passport number was written under --yes: {note.read_text()!r}"
    assert out["status"] != "answered", out
    events = _turn_events(capsys, out["turn_id"])
    read = next(e["state"]["step"] for e in events if e["topic"].endswith("StepInvoked") and e["state"]["executor"] == "get_door_resident_profile")
    judged = [e["state"]["verdict"] for e in events if e["topic"].endswith("StepJudged") and e["state"]["verdict"]["executor"] == "write_door_note"]
    assert judged and f"text holds what step {read} (get_door_resident_profile) returned, a read your request does not ask for" \
        in judged[0]["reason"], judged
    capsys.readouterr()
    assert main(["replay", out["turn_id"], "--json"]) == 0, capsys.readouterr().out


def test_the_same_read_asked_for_is_carried_under_yes(home: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    note = _door(capsys, home, tmp_path).parent / "note.txt"
    code, out = _note_turn(capsys, monkeypatch, "read the building's notice and my resident profile, then write a note with the bins "
                                                "day and my passport number in ~/door-codes/note.txt", "The note is written.")
    assert note.read_text() == f"Bins go out on Monday. Resident passport {PASSPORT}.", out
    assert code == 0 and out["status"] == "answered", out
