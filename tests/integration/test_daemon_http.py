"""Issue 21 item 1: the daemon's HTTP API, on a real uvicorn on 127.0.0.1, in a real ``metnos daemon``.

A turn asked over HTTP runs against the scripted LLM server, with its
approval answered over HTTP by another request, then is replayed and undone
through the API; the live event stream shows it. Without the token every
route answers 401 and nothing reaches the log or the model.
"""

from __future__ import annotations

import stat
import threading
import time
from pathlib import Path

import orjson
import pytest

from metnos.settings.workspace import Workspace
from tests.support.cli_process import run, wait_for
from tests.support.daemon_process import RunningDaemon, daemon, daemon_in_layout, daemon_llm  # noqa: F401 - fixtures
from tests.support.scripted_llm import ScriptedLLM, call, text

pytestmark = pytest.mark.bwrap


def user_home(daemon: RunningDaemon) -> Path:
    return Path(daemon.env["HOME"])


def ask_and_wait_for_approval(client, request: str, result: dict) -> tuple[threading.Thread, list[dict]]:
    """Ask in a thread (the answer comes when the turn ends) and wait for its approval to be pending."""
    asking = threading.Thread(target=lambda: result.update(client.post("/api/ask", json={"text": request}).json()))
    asking.start()
    return asking, wait_for(lambda: client.get("/api/approvals").json(), timeout=60, what="the approval to be pending")


def test_the_token_file_is_private_and_stable(daemon: RunningDaemon) -> None:
    path = Workspace.from_env(daemon.env).config_dir / "daemon.token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().strip() == daemon.token and len(daemon.token) >= 32
    again = run(["daemon", "token"], daemon.env)
    assert again.stdout.strip() == daemon.token


UNAUTHENTICATED = [
    ("POST", "/api/ask", {"text": "write a file", "approve": "yes"}),
    ("POST", "/api/undo", {}),
    ("GET", "/api/undo", None),
    ("GET", "/api/turns", None),
    ("POST", "/api/approvals/x", {"approve": True}),
    ("GET", "/api/executors", None),
    ("GET", "/api/mnestome", None),
    ("GET", "/api/schedules", None),
    ("POST", "/api/schedules/x/pause", {}),
    ("POST", "/api/schedules", {"when": "every morning at 8", "executor": "get_now", "confirm": True}),
    ("GET", "/api/schedules/when?words=tomorrow", None),
    ("GET", "/api/events", None),
    ("GET", "/", None),
]


@pytest.mark.parametrize("token", [None, "wrong-token-of-the-same-shape-as-the-real-one-xx"])
def test_without_the_token_every_route_is_401_and_touches_nothing(daemon: RunningDaemon, daemon_llm: ScriptedLLM, token: str | None) -> None:
    before_log, before_llm = daemon.last_event_id(), len(daemon_llm.requests)
    target = user_home(daemon) / "must-not-exist.txt"
    daemon_llm.add(call("write_files", {"files": [{"path": str(target), "content": "x"}]}), text("done"))
    try:
        with daemon.client(token=token) as client:
            for method, path, body in UNAUTHENTICATED:
                reply = client.request(method, path, content=orjson.dumps(body) if body is not None else None)
                assert reply.status_code == 401, (method, path, reply.text)
                if path.startswith("/api"):
                    assert reply.json()["error"]["kind"] == "unauthorized"
                    assert reply.headers["www-authenticate"].startswith("Bearer")
    finally:
        unserved = daemon_llm.remaining
    assert daemon.last_event_id() == before_log
    assert len(daemon_llm.requests) == before_llm and unserved == 2 and not target.exists()
    # The steps this test queued were never asked for: drop them for the next test.
    daemon_llm._state.script = daemon_llm._state.script[: len(daemon_llm._state.script) - 2]


def test_a_browser_page_without_the_token_gets_the_login_form_with_401(daemon: RunningDaemon) -> None:
    with daemon.client(token=None) as client:
        reply = client.get("/", headers={"Accept": "text/html"})
        assert reply.status_code == 401 and 'name="token"' in reply.text
        wrong = client.post("/login", data={"token": "nope", "next": "/"})
        assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
        ok = client.post("/login", data={"token": daemon.token, "next": "/"})
        assert ok.status_code == 303 and ok.headers["location"] == "/"
        cookie = ok.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("SameSite=Strict", "SameSite=strict")
        assert client.get("/", headers={"Accept": "text/html"}).status_code == 200


def test_a_cross_origin_post_is_refused_even_with_the_cookie(daemon: RunningDaemon) -> None:
    before = daemon.last_event_id()
    with daemon.client(token=None) as client:
        client.post("/login", data={"token": daemon.token, "next": "/"})
        reply = client.post("/api/undo", content=b"{}", headers={"Origin": "http://evil.example"})
    assert reply.status_code == 403 and reply.json()["error"]["kind"] == "cross_origin"
    assert daemon.last_event_id() == before


def test_ask_over_http_runs_a_turn_recorded_with_the_http_channel(daemon: RunningDaemon, daemon_llm: ScriptedLLM) -> None:
    daemon_llm.add(call("get_now", {}), text("It is now the time the clock gave."))
    with daemon.client() as client:
        reply = client.post("/api/ask", json={"text": "what time is it?"})
        assert reply.status_code == 200, reply.text
        outcome = reply.json()
        assert outcome["status"] == "answered" and outcome["answer"] == "It is now the time the clock gave."
        turn = client.get(f"/api/turns/{outcome['turn_id'][:8]}").json()
        started = next(e for e in turn["events"] if e["type"] == "TurnStarted")
        assert started["state"]["channel"] == "http" and started["state"]["text"] == "what time is it?"
        assert any(e["type"] == "StepInvoked" and e["state"]["executor"] == "get_now" and e["state"]["ok"] for e in turn["events"])
        listed = client.get("/api/turns").json()
        assert listed[-1]["id"] == outcome["turn_id"] and listed[-1]["status"] == "answered"
        replayed = client.post(f"/api/turns/{outcome['turn_id']}/replay").json()
        assert replayed["same_path"] is True and replayed["diff"] == ""


def test_an_approval_is_answered_over_http_then_the_turn_is_undone_with_a_preview(daemon: RunningDaemon, daemon_llm: ScriptedLLM) -> None:
    target = user_home(daemon) / "approved.txt"
    daemon_llm.add(call("write_files", {"files": [{"path": str(target), "content": "hello"}]}), text("I wrote the file."))
    result: dict = {}
    with daemon.client() as client:
        asking, pending = ask_and_wait_for_approval(client, "write approved.txt", result)
        assert pending[0]["executor"] == "write_files" and pending[0]["args"]["files"][0]["path"] == str(target)
        assert not target.exists()
        assert client.post(f"/api/approvals/{pending[0]['id']}", json={"approve": True}).json()["approved"] is True
        asking.join(timeout=60)
        assert result["status"] == "answered", result
        assert target.read_text() == "hello"
        answered = [e for e in client.get(f"/api/turns/{result['turn_id']}").json()["events"] if e["type"] == "ApprovalAnswered"]
        assert answered and answered[0]["state"]["approved"] is True and answered[0]["state"]["by"] == "http:user"
        # Answered once: a second answer is refused, told where the first came from.
        again = client.post(f"/api/approvals/{pending[0]['id']}", json={"approve": False})
        assert again.status_code == 409 and "already answered on http (http:user)" in again.json()["error"]["message"], again.text
        assert client.post("/api/approvals/0123456789abcdef", json={"approve": False}).status_code == 404

        preview = client.get("/api/undo").json()
        assert preview["status"] == "dry-run" and preview["turn_id"] == result["turn_id"]
        assert [(a["action"], a["path"]) for a in preview["actions"]] == [("remove", str(target))]
        assert target.exists()  # the preview changed nothing
        undone = client.post("/api/undo", json={"turn_id": result["turn_id"]})
        assert undone.status_code == 200 and undone.json()["status"] == "undone"
        assert not target.exists()
        again = client.post("/api/undo", json={"turn_id": result["turn_id"]})
        assert again.json()["status"] == "already-undone"


def test_a_declined_approval_refuses_the_step(daemon: RunningDaemon, daemon_llm: ScriptedLLM) -> None:
    target = user_home(daemon) / "declined.txt"
    daemon_llm.add(call("write_files", {"files": [{"path": str(target), "content": "no"}]}), text("I did not write it."))
    result: dict = {}
    with daemon.client() as client:
        asking, pending = ask_and_wait_for_approval(client, "write declined.txt", result)
        client.post(f"/api/approvals/{pending[0]['id']}", json={"approve": False})
        asking.join(timeout=60)
        events = client.get(f"/api/turns/{result['turn_id']}").json()["events"]
    assert result["status"] == "refused", result
    assert not target.exists()
    [answered] = [e["state"] for e in events if e["type"] == "ApprovalAnswered"]
    assert answered["approved"] is False and answered["by"] == "http:user"
    assert not any(e["type"] == "StepInvoked" for e in events)


def test_the_event_stream_is_live(daemon: RunningDaemon, daemon_llm: ScriptedLLM) -> None:
    start = daemon.last_event_id()
    daemon_llm.add(text("Hello there, nothing to run."))
    seen: list[dict] = []
    with daemon.client() as client, client.stream("GET", f"/api/events?after={start}&topic=Turn") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        threading.Thread(target=lambda: daemon.client().post("/api/ask", json={"text": "say hello"}), daemon=True).start()
        deadline = time.monotonic() + 60
        kind = None
        for line in stream.iter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                seen.append({"kind": kind, **orjson.loads(line.removeprefix("data: "))})
                if kind in ("TurnAnswered", "TurnFailed") or time.monotonic() > deadline:
                    break
    kinds = [s["kind"] for s in seen]
    assert kinds[0] == "TurnStarted" and kinds[-1] == "TurnAnswered", kinds
    assert all(s["id"] > start for s in seen) and [s["id"] for s in seen] == sorted(s["id"] for s in seen)


def test_the_dashboard_is_paired_first_as_the_host_and_another_device_as_a_guest(daemon: RunningDaemon, daemon_llm: ScriptedLLM) -> None:
    from domain.household import guest_name

    daemon_llm.add(call("get_now", {}), text("It is now the time the clock gave."), call("get_now", {}), text("It is now the time."))
    ask = {"when": "every morning at 8", "executor": "get_now", "channel": "none", "confirm": True}
    principals = {}
    with daemon.client() as client:
        for device in (None, "phone"):
            headers = {} if device is None else {"X-Metnos-Device": device}
            outcome = client.post("/api/ask", json={"text": "what time is it?"}, headers=headers).json()
            turn = client.get(f"/api/turns/{outcome['turn_id']}").json()
            started = next(e for e in turn["events"] if e["type"] == "TurnStarted")
            principals[device] = (started["state"]["principal"], started["state"]["autonomy"])
        made = client.post("/api/schedules", json=ask, headers={"X-Metnos-Device": "phone"}).json()
        row = next(s for s in client.get("/api/schedules").json() if s["id"] == made["schedule_id"])
        bad = client.post("/api/ask", json={"text": "what time is it?"}, headers={"X-Metnos-Device": "a phone!"})
    phone = guest_name("http", "phone")
    # The dashboard's session (no device named) is the first paired in this log: the host; the phone a guest, read-only.
    assert principals == {None: ("host", "supervised"), "phone": (phone, "read_only")}
    assert row["actor"] == phone
    assert bad.status_code == 400 and "x-metnos-device must be" in bad.json()["error"]["message"]


def test_schedules_executors_and_mnestome_are_served(daemon: RunningDaemon) -> None:
    with daemon.client() as client:
        schedules = client.get("/api/schedules").json()
        assert {s["target"].get("key") for s in schedules} >= {"executor_ager", "mnest_ager"}
        executors = client.get("/api/executors").json()
        assert {"get_now", "write_files"} <= {e["name"] for e in executors} and all(e["state"] for e in executors)
        mnestome = client.get("/api/mnestome").json()
        assert len(mnestome["mnests"]) >= 41 and "find_files" in mnestome["graph"]["nodes"]
        sid = schedules[0]["id"]
        paused = client.post(f"/api/schedules/{sid}/pause")
        assert paused.status_code == 200, paused.text
        assert next(s for s in client.get("/api/schedules").json() if s["id"] == sid)["status"] == "paused"
        assert client.post(f"/api/schedules/{sid}/resume").status_code == 200
        assert next(s for s in client.get("/api/schedules").json() if s["id"] == sid)["status"] == "active"
        # A schedule in words: read back with its next firings, created only once confirmed.
        read = client.get("/api/schedules/when", params={"words": "ogni lunedì alle 9", "timezone": "Europe/Rome"}).json()
        assert read["cron"] == "0 9 * * 1" and len(read["next_fires"]) == 3
        ask = {"when": "every other Tuesday at 18:30", "executor": "get_now", "channel": "none"}
        shown = client.post("/api/schedules", json=ask).json()
        assert shown["created"] is False and shown["cron"].startswith("30 18 * * 2 /2w@") and len(shown["next_fires"]) == 3
        assert len(client.get("/api/schedules").json()) == len(schedules)
        made = client.post("/api/schedules", json={**ask, "confirm": True})
        assert made.status_code == 200 and made.json()["created"] and made.json()["next_fire"] == shown["next_fires"][0]
        assert client.post("/api/schedules", json={**ask, "when": "whenever"}).json()["error"]["message"].startswith("cannot read a schedule")
        missing = client.post("/api/schedules/nope/pause")
        assert missing.status_code == 404 and "no schedule" in missing.json()["error"]["message"]
        assert client.get("/api/turns/ffffffff").status_code == 404


def test_a_busy_port_is_an_error_naming_it(daemon: RunningDaemon) -> None:
    address = daemon.url.removeprefix("http://")
    done = run(["daemon", "--http", address, "--skip-birth", "--no-model", "--tick", "3600"], daemon.env, timeout=120)
    assert done.returncode == 2 and f"cannot listen on {address}" in done.stderr and "Traceback" not in done.stderr


def test_an_executor_and_its_lifecycle(daemon: RunningDaemon) -> None:
    with daemon.client() as client:
        detail = client.get("/api/executors/get_now").json()
        assert [v["state"] for v in detail["versions"]] == ["active"]
        assert {"ExecutorRegistered", "ExecutorActivated"} <= {h["type"] for h in detail["history"]}
        missing = client.get("/api/executors/no_such_thing")
        assert missing.status_code == 404 and "no executor named" in missing.json()["error"]["message"]


def test_stopping_the_daemon_refuses_a_waiting_approval_and_the_turn_is_recorded(layout: str, tmp_path: Path) -> None:
    with ScriptedLLM() as llm, daemon_in_layout(layout, tmp_path, llm.url) as running:
        target = user_home(running) / "never.txt"
        llm.add(call("write_files", {"files": [{"path": str(target), "content": "no"}]}), text("I did not write it."))
        with running.client() as client:
            asking, pending = ask_and_wait_for_approval(client, "write never.txt", {})
            assert pending
            _, err = running.stop()
            asking.join(timeout=60)
        assert running.proc.returncode == 143 and "Traceback" not in err
        listed = run(["turns", "list", "--json"], running.env)
        [turn] = orjson.loads(listed.stdout)
        shown = orjson.loads(run(["turns", "show", turn["id"], "--json"], running.env).stdout)
    assert turn["status"] == "refused" and not target.exists()
    [answered] = [e["state"] for e in shown["events"] if e["type"] == "ApprovalAnswered"]
    assert answered == {"step": 1, "approved": False, "by": "http:daemon-stopping"}


def test_the_dashboard_asks_as_one_conversation_and_shows_it(daemon: RunningDaemon, daemon_llm: ScriptedLLM) -> None:
    """Issue 35 item 5: a named conversation over /api/ask, and its page on the dashboard."""
    with daemon.client() as client:
        for wrong in ({"conversation": 5}, {"conversation": "a b"}, {"conversation": "dashboard", "new_conversation": "yes"},
                      {"new_conversation": True}):
            reply = client.post("/api/ask", json={"text": "what time is it?", **wrong})
            assert reply.status_code == 400 and "conversation" in reply.json()["error"]["message"], (wrong, reply.text)
        daemon_llm.add(call("get_now", {}), text("It is now the time the clock gave."), text("The clock gave it at the step before."))
        first = client.post("/api/ask", json={"text": "what time is it?", "conversation": "dashboard", "new_conversation": True}).json()
        second = client.post("/api/ask", json={"text": "where did that come from?", "conversation": "dashboard"}).json()
        assert first["status"] == "answered" and second["status"] == "answered", (first, second)
        shown = daemon_llm.requests[-1].messages
        assert shown[1]["role"] == "system" and "Request 1: what time is it?" in shown[1]["content"]
        rows = {t["id"]: t for t in client.get("/api/turns").json()}
        # A conversation goes by its first turn's id.
        assert rows[first["turn_id"]]["conversation"] == rows[second["turn_id"]]["conversation"] == first["turn_id"]
        page = client.get(f"/conversations/{first['turn_id']}", headers={"Accept": "text/html"})
        assert page.status_code == 200 and "what time is it?" in page.text and "where did that come from?" in page.text
        timeline = client.get("/", headers={"Accept": "text/html"}).text
        assert f'href="/conversations/{first["turn_id"]}"' in timeline and 'id="new-conversation"' in timeline
