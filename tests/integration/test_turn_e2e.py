"""Issue 5 end to end: turns through the CLI against a scripted model on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from metnos.adapters.cli import main
from metnos.settings.workspace import Workspace
from tests.support.scripted_llm import ScriptedLLM, call, text




def ask(capsys, *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["ask", *argv, "--json"])
    return code, orjson.loads(capsys.readouterr().out)


def turn_events(capsys, turn_id: str) -> list[dict]:
    capsys.readouterr()
    main(["events", "--json", "--aggregate", turn_id])
    return [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_read_a_file_and_answer(home: Path, capsys, monkeypatch) -> None:
    (home / "notes").mkdir()
    (home / "notes" / "diary.md").write_text("monday\ntuesday\nwednesday\nthursday\n")
    script = [call("read_files", {"paths": ["~/notes/diary.md"]}), call("extract_lines", {"from_step": 1, "last": 3}),
              text("tuesday, wednesday, thursday")]
    with ScriptedLLM(script, dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = ask(capsys, "read ~/notes/diary.md and tell me the last three lines")
        assert code == 0, out
        assert out["answer"] == "tuesday, wednesday, thursday"
        second = llm.requests[1].body
        tool_msg = [m for m in second["messages"] if m["role"] == "tool"][0]
        assert "thursday" in tool_msg["content"]
        assert "read_files" in [t["function"]["name"] for t in llm.requests[0].body["tools"]]
    kinds = [e["topic"].rsplit(".", 1)[-1] for e in turn_events(capsys, out["turn_id"])]
    assert kinds[:3] == ["TurnStarted", "CatalogueResolved", "PrefilterRanked"]
    for expected in ("LLMAsked", "LLMReplied", "StepProposed", "StepResolved", "StepJudged", "StepInvoked", "ObservationRecorded", "TurnAnswered"):
        assert expected in kinds


@pytest.fixture
def page_server():
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    body = b"<html><body>hello from a local page</body></html>"

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):  # noqa: ANN002
            pass

        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/page", body
    server.shutdown()
    server.server_close()


def scripted(monkeypatch, llm: ScriptedLLM) -> None:
    monkeypatch.setenv("METNOS_LLM_URL", llm.url)
    monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")


def kinds_of(capsys, turn_id: str) -> list[str]:
    return [e["topic"].rsplit(".", 1)[-1] for e in turn_events(capsys, turn_id)]


def test_fetch_a_url_write_it_to_a_file_and_report_the_bytes(home: Path, capsys, monkeypatch, page_server) -> None:
    url, body = page_server
    # The instance allows the page's server: get_urls reaches what config.toml allows.
    from urllib.parse import urlsplit

    from metnos.settings.workspace import Workspace

    Workspace.from_env().config_file.write_text(f'[network]\nallow = ["{urlsplit(url).netloc}"]\n')
    script = [
        call("get_urls", {"urls": [url]}),
        call("write_files", {"files": [{"path": "~/page.html", "content": "{{step1.content}}"}]}),
        text(f"I wrote {len(body)} bytes to ~/page.html"),
    ]
    with ScriptedLLM(script, dialect="openai") as llm:
        scripted(monkeypatch, llm)
        code, out = ask(capsys, "fetch the page, save it to ~/page.html and tell me how many bytes", "--yes")
    assert code == 0, out
    assert (home / "page.html").read_bytes() == body
    events = turn_events(capsys, out["turn_id"])
    piped = [e["state"] for e in events if e["topic"].endswith("DataPiped")]
    assert piped and piped[0]["src_executor"] == "get_urls" and piped[0]["dst_executor"] == "write_files"
    assert piped[0]["mechanism"] == "template"
    approvals = [e["state"] for e in events if e["topic"].endswith("ApprovalAnswered")]
    assert approvals == [{"step": 2, "approved": True, "by": "flag:--yes"}]


def test_an_action_is_not_taken_when_approval_is_declined(home: Path, capsys, monkeypatch) -> None:
    script = [call("write_files", {"files": [{"path": "~/x.txt", "content": "x"}]}), text("I could not write it")]
    with ScriptedLLM(script) as llm:
        scripted(monkeypatch, llm)
        code, out = ask(capsys, "write x to ~/x.txt", "--no")
        tool_msg = [m for m in llm.requests[1].body["messages"] if m["role"] == "tool"][0]
    # Nothing was done, so the turn is not "answered", whatever the model wrote.
    assert code == 3 and out["status"] == "refused", out
    assert "write_files was not approved" in out["failure"]["message"]
    assert not (home / "x.txt").exists()
    assert "declined" in tool_msg["content"]
    assert "StepInvoked" not in kinds_of(capsys, out["turn_id"])


def test_find_filter_describe_pipeline_with_from_step(home: Path, capsys, monkeypatch) -> None:
    # The model makes the first read itself here (no opening read): this test is about what follows it,
    # the piping, on the rules' ranking that offers describe_entries (the learned offer does not, to "describe them").
    monkeypatch.setenv("METNOS_OPENING_READS", "0")
    monkeypatch.setenv("METNOS_ENGINE_OFFER", "shortlist")
    docs = home / "docs"
    docs.mkdir()
    for name in ("report-2025.md", "report-2026.md", "notes.txt", "recipe.md"):
        (docs / name).write_text(name)
    script = [
        call("find_files", {"base_path": "~/docs", "pattern": "*.md"}),
        call("filter_entries", {"from_step": 1, "predicate": "where_starts_with", "value": "report", "field": "name"}),
        call("describe_entries", {"from_step": 2, "fields": ["name"]}),
        text("report-2025.md and report-2026.md"),
    ]
    with ScriptedLLM(script) as llm:
        scripted(monkeypatch, llm)
        code, out = ask(capsys, "find the markdown files in ~/docs whose name starts with report and describe them")
    assert code == 0, out
    # The description closes a request that changes nothing: it is the answer, no fourth model call.
    assert len(llm.requests) == 3
    assert "report-2025.md" in out["answer"] and "recipe.md" not in out["answer"]
    events = turn_events(capsys, out["turn_id"])
    piped = [(e["state"]["src_executor"], e["state"]["dst_executor"], e["state"]["mechanism"]) for e in events if e["topic"].endswith("DataPiped")]
    assert piped == [("find_files", "filter_entries", "from_step"), ("filter_entries", "describe_entries", "from_step")]


def test_a_large_file_spills_to_the_scratchpad_and_can_be_read_back(home: Path, capsys, monkeypatch) -> None:
    # The model makes the first read itself here (no opening read): this test is about what follows it.
    monkeypatch.setenv("METNOS_OPENING_READS", "0")
    lines = [f"line {i:05d} " + "x" * 40 for i in range(400)]
    lines[123] = "line 00123 THE NEEDLE"
    (home / "big.log").write_text("\n".join(lines))

    def grep_step(recorded):  # the scratchpad id comes from the previous observation
        tool = [m for m in recorded.body["messages"] if m["role"] == "tool"][-1]
        sid = orjson.loads(tool["content"])["scratchpad_id"]
        return call("scratchpad_read", {"scratchpad_id": sid, "mode": "grep", "pattern": "NEEDLE"})

    with ScriptedLLM([call("read_files", {"paths": ["~/big.log"]}), grep_step, text("found it at line 124")]) as llm:
        scripted(monkeypatch, llm)
        code, out = ask(capsys, "read ~/big.log and find the needle")
        first_obs = orjson.loads([m for m in llm.requests[1].body["messages"] if m["role"] == "tool"][0]["content"])
        grep_obs = [m for m in llm.requests[2].body["messages"] if m["role"] == "tool"][-1]["content"]
        tools_second = [t["function"]["name"] for t in llm.requests[1].body["tools"]]
    assert code == 0, out
    assert first_obs["kind"] == "text" and first_obs["size_bytes"] > 4096
    assert "characters omitted" in first_obs["summary"] and len(first_obs["summary"]) < 1200
    assert "scratchpad_read" in tools_second
    assert "THE NEEDLE" in grep_obs
    spills = [e["state"]["spill"] for e in turn_events(capsys, out["turn_id"]) if e["topic"].endswith("ObservationRecorded") and e["state"]["spill"]]
    assert spills[0]["spilled"] is True


def test_a_guests_turn_cannot_read_what_a_host_turn_spilled_by_its_id(home: Path, capsys, monkeypatch) -> None:
    """The scratchpad is the turn's own (metnos/runtime/step/scratchpad.py): a guest's turn that names the id
    a host's turn spilled under, or the host turn's step, is refused, and nothing of the entry reaches its model."""
    from metnos.runtime.booted import Runtime
    from metnos.runtime.turn.session import run_turn

    monkeypatch.setenv("METNOS_OPENING_READS", "0")
    lines = [f"line {i:05d} " + "x" * 40 for i in range(400)]
    lines[123] = "line 00123 THE HOSTS NEEDLE"
    (home / "big.log").write_text("\n".join(lines))
    spilled: list[str] = []

    def host_grep(recorded):
        tool = [m for m in recorded.body["messages"] if m["role"] == "tool"][-1]
        spilled.append(orjson.loads(tool["content"])["scratchpad_id"])
        return call("scratchpad_read", {"scratchpad_id": spilled[0], "mode": "grep", "pattern": "NEEDLE"})

    def guest_grep(recorded):
        return call("scratchpad_read", {"scratchpad_id": spilled[0], "mode": "grep", "pattern": "NEEDLE"})

    script = [call("read_files", {"paths": ["~/big.log"]}), host_grep, text("found it at line 124"),
              guest_grep, call("describe_entries", {"from_step": 1}), text("I could not read it.")]
    with ScriptedLLM(script) as llm:
        scripted(monkeypatch, llm)
        with Runtime.boot(Workspace.from_env(), birth=False) as rt:
            host = run_turn(rt, "read ~/big.log and find the needle", approver=lambda *a: (False, "test"))
            hosts_requests = len(llm.requests)
            guest = run_turn(rt, "find the needle in what was read before", approver=lambda *a: (False, "test"), principal="guest_abc123")
        host_saw = [m["content"] for m in llm.requests[hosts_requests - 1].body["messages"] if m["role"] == "tool"][-1]
        guest_saw = [m for r in llm.requests[hosts_requests:] for m in r.body["messages"]]
    assert host.status == "answered" and "THE HOSTS NEEDLE" in host_saw
    tool_answers = [orjson.loads(m["content"]) for m in guest_saw if m["role"] == "tool"]
    assert tool_answers and all(answer.get("ok") is False for answer in tool_answers), tool_answers
    assert tool_answers[0]["error_class"] == "unknown_scratchpad_id" and f"no scratchpad entry {spilled[0]} in this turn" in tool_answers[0]["error"]
    assert not any("NEEDLE" in str(m.get("content")) for m in guest_saw if m["role"] != "user")
    events = turn_events(capsys, guest.turn_id)
    assert "HOSTS NEEDLE" not in orjson.dumps(events).decode()


def test_the_duplicate_read_guard_intercepts_a_second_read(home: Path, capsys, monkeypatch) -> None:
    # The model makes the first read itself here (no opening read): this test is about what follows it.
    monkeypatch.setenv("METNOS_OPENING_READS", "0")
    (home / "a.md").write_text("alpha")
    script = [call("read_files", {"paths": ["~/a.md"]}), call("read_files", {"paths": ["~/a.md"]}), text("alpha")]
    with ScriptedLLM(script) as llm:
        scripted(monkeypatch, llm)
        code, out = ask(capsys, "read ~/a.md")
        second_obs = [m for m in llm.requests[2].body["messages"] if m["role"] == "tool"][-1]["content"]
    assert code == 0
    assert "duplicate_read" in second_obs and "step 1" in second_obs
    events = turn_events(capsys, out["turn_id"])
    assert [e["state"]["step"] for e in events if e["topic"].endswith("StepInvoked")] == [1]
    assert [e["state"]["decision"]["outcome"] for e in events if e["topic"].endswith("StepIntercepted")] == ["duplicate_read"]


def test_cap_steps_ends_the_turn_cleanly(home: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("METNOS_CAP_STEPS", "3")
    # Each call differs (the very same call again is a duplicate: test_turn_honest.py).
    script = [call("get_now", {"timezone": tz}) for tz in ("UTC", "Europe/Rome", "Asia/Tokyo", "Europe/Paris", "Asia/Seoul")]
    with ScriptedLLM(script) as llm:
        scripted(monkeypatch, llm)
        # A request that acts keeps its tools to the cap (one that only reads is asked for
        # its answer once the model reads again: test_turn_opening_reads.py).
        code, out = ask(capsys, "what time is it now? write it to ~/now.txt")
    assert code == 1
    assert out["failure"]["kind"] == "cap_steps" and "3 steps" in out["failure"]["message"]
    assert kinds_of(capsys, out["turn_id"])[-1] == "TurnFailed"


def test_cap_same_executor_ends_the_turn_cleanly(home: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("METNOS_CAP_SAME_EXECUTOR", "2")
    script = [call("get_now", {"timezone": tz}) for tz in ("UTC", "Europe/Rome", "Asia/Tokyo")]
    with ScriptedLLM(script) as llm:
        scripted(monkeypatch, llm)
        # A request that acts, so that its tools stay on offer up to the cap.
        code, out = ask(capsys, "what time is it now in three places? write them to ~/times.txt")
    assert code == 1
    assert out["failure"]["kind"] == "cap_same_executor" and "get_now" in out["failure"]["message"]


def test_a_dead_llm_server_ends_the_turn_with_a_clear_message(home: Path, capsys, monkeypatch) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("METNOS_LLM_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("METNOS_LLM_MODEL", "nothing")
    capsys.readouterr()
    code = main(["ask", "hello"])
    err = capsys.readouterr().err
    assert code == 1
    assert "unreachable" in err and "Traceback" not in err
    # One line says what went wrong; off a terminal the others are the phases' progress lines.
    lines = err.splitlines()
    assert [line for line in lines if "unreachable" in line] == [lines[-1]]
    # "hello" is one word, too little to tell a language by: the lines are English.
    assert all(line.startswith(("metnos: thinking", "metnos: waiting", "metnos: step", "metnos: starting")) for line in lines[:-1]), lines


def test_needs_action_target_and_pipeline_already_closed(home: Path, capsys, monkeypatch) -> None:
    with ScriptedLLM([call("delete_files", {})]) as llm:
        scripted(monkeypatch, llm)
        code, out = ask(capsys, "delete them")
    assert code == 4 and out["status"] == "needs_input" and out["failure"]["kind"] == "needs_inputs"

    (home / "a.md").write_text("alpha")
    script = [
        call("read_files", {"paths": ["~/a.md"]}),
        call("describe_entries", {"from_step": 1}),
        call("read_files", {"paths": ["~/b.md"]}),
        text("alpha"),
    ]
    with ScriptedLLM(script) as llm:
        scripted(monkeypatch, llm)
        # A request that acts keeps its tools after the description (one that only reads is
        # asked for its answer once a step gives a single value), so the read reaches the check.
        code, out = ask(capsys, "read ~/a.md and describe it, then write the description to ~/d.md")
        last = llm.requests[-1].body
    rejected = [e["state"] for e in turn_events(capsys, out["turn_id"]) if e["topic"].endswith("StepRejected")]
    assert rejected[0]["error"]["error_class"] == "pipeline_already_closed"
    assert rejected[0]["remediation"]["kind"] == "force_final_answer"
    # Asked for the answer in words: the tools stay in the prompt (its cached prefix), with tool_choice "none".
    assert last.get("tool_choice") == "none" and last.get("tools")
    # The write the request asks for never ran: the turn says so rather than answering "alpha".
    assert code == 1 and out["failure"]["kind"] == "action_not_taken" and "write_files" in out["failure"]["message"], out
    assert not (home / "d.md").exists()


def test_a_second_action_the_request_names_runs_after_the_first_closed_the_pipeline(home: Path, capsys, monkeypatch) -> None:
    (home / "Downloads").mkdir()
    (home / "Downloads" / "x.tmp").write_text("x")
    script = [
        call("find_files", {"base_path": "~/Downloads", "pattern": "*.tmp"}),
        call("delete_files", {"from_step": 1}),
        call("send_messages", {"messages": [{"to_user": "elena", "body": "done"}]}),
        call("move_files", {"moves": [{"src": "~/a", "dst": "~/b"}]}),
        text("Deleted x.tmp and told elena."),
    ]
    with ScriptedLLM(script) as llm:
        scripted(monkeypatch, llm)
        code, out = ask(capsys, "delete the .tmp files in ~/Downloads and then send elena a message saying it is done", "--yes")
    assert code == 0 and out["status"] == "answered", out
    assert not (home / "Downloads" / "x.tmp").exists()
    events = turn_events(capsys, out["turn_id"])
    ran = [e["state"]["executor"] for e in events if e["topic"].endswith("StepInvoked")]
    assert ran[-2:] == ["delete_files", "send_messages"] and ran.count("send_messages") == 1
    sent = [e["state"] for e in events if e["topic"].endswith("ObservationRecorded")][-1]
    assert sent["ok"] and sent["observation"]["entries"][0]["to_user"] == "elena", sent
    # An action the request does not name still finds the pipeline closed.
    rejected = [e["state"] for e in events if e["topic"].endswith("StepRejected")]
    assert [r["error"]["error_class"] for r in rejected] == ["pipeline_already_closed"]


def test_needs_data_source_with_nothing_named_needs_input(home: Path, capsys, monkeypatch) -> None:
    script = [call("sort_entries", {"by": "name"}), text("nothing to sort")]
    with ScriptedLLM(script) as llm:
        scripted(monkeypatch, llm)
        code, out = ask(capsys, "sort them by name")
    # The request names nothing to sort and no source can be guessed: Metnos asks.
    assert code == 4 and out["status"] == "needs_input", out
    rejected = [e["state"] for e in turn_events(capsys, out["turn_id"]) if e["topic"].endswith("StepRejected")]
    assert rejected[0]["kind"] == "shape" and rejected[0]["error"]["error_class"] == "needs_data_source"


def test_an_executor_that_crashes_gives_an_observation_not_a_traceback(home: Path, capsys, monkeypatch) -> None:
    # read_files on a directory makes the executor report an error; a crash needs a broken
    # executor: replace one, re-sign it with the instance key, and call it.

    ws = Workspace.from_env()
    target = ws.executors_origin_dir("seed") / "get_now" / "1.0.0"
    (target / "main.py").write_text("def run(args, ctx):\n    raise RuntimeError('boom inside get_now')\n")
    (target / "tests" / "birth.py").write_text("def birth_nothing(run, tmp):\n    pass\n")
    assert main(["executors", "sign", str(target)]) == 0
    assert main(["executors", "rehabilitate", "get_now"]) in (0, 2)
    with ScriptedLLM([call("get_now", {}), text("the clock is broken")]) as llm:
        scripted(monkeypatch, llm)
        code, out = ask(capsys, "what time is it now")
        obs = orjson.loads([m for m in llm.requests[1].body["messages"] if m["role"] == "tool"][0]["content"])
    # The model saw the error and the end of stderr; the turn is failed, said in words.
    assert obs["error"]["kind"] == "Crash" and "boom inside get_now" in obs["error"]["message"]
    assert "RuntimeError" in obs["stderr_tail"] and len(obs["stderr_tail"].encode()) <= 2048
    assert code == 1 and out["status"] == "failed", out
    assert out["failure"]["message"] == "I could not do it: get_now crashed: RuntimeError: boom inside get_now"
    capsys.readouterr()
    assert main(["turns", "show", out["turn_id"][:8]]) == 0
    shown = capsys.readouterr().out
    assert "crashed: RuntimeError: boom inside get_now" in shown and "-> Crash" not in shown
    assert "failed (step_failed)" in shown


def test_an_executor_tampered_with_after_signing_is_never_run(home: Path, capsys, monkeypatch) -> None:

    (home / "a.md").write_text("alpha")
    main_py = Workspace.from_env().executors_origin_dir("seed") / "read_files" / "1.0.0" / "main.py"
    main_py.write_text(main_py.read_text() + "\nimport os  # tampered\n")
    with ScriptedLLM([call("read_files", {"paths": ["~/a.md"]}), text("I cannot read it")]) as llm:
        scripted(monkeypatch, llm)
        code, out = ask(capsys, "read ~/a.md")
        obs = [m for m in llm.requests[1].body["messages"] if m["role"] == "tool"][0]["content"] if len(llm.requests) > 1 else ""
        offered = [t["function"]["name"] for t in llm.requests[0].body.get("tools", [])]
    assert "read_files" not in offered
    assert "nonexistent executor" in obs or "unknown_executor" in obs
    assert "StepInvoked" not in kinds_of(capsys, out["turn_id"])


def test_the_anthropic_dialect_drives_the_same_loop(home: Path, capsys, monkeypatch) -> None:
    (home / "a.md").write_text("alpha beta")
    config = Workspace.from_env().config_file
    with ScriptedLLM([call("read_files", {"paths": ["~/a.md"]}), text("alpha beta")], dialect="anthropic") as llm:
        config.write_text(
            "[llm.tiers.fast]\n"
            f'provider = "anthropic"\nurl = "{llm.url}"\nmodel = "claude-test"\napi_key_env = "METNOS_TEST_ANTHROPIC_KEY"\n'
        )
        monkeypatch.setenv("METNOS_TEST_ANTHROPIC_KEY", "sk-test-not-a-secret")
        code, out = ask(capsys, "read ~/a.md")
        first = llm.requests[0]
        second = llm.requests[1].body
    assert code == 0, out
    assert out["answer"] == "alpha beta"
    assert first.path == "/v1/messages" and first.headers.get("x-api-key") == "sk-test-not-a-secret"
    assert any(b.get("type") == "tool_result" for m in second["messages"] if isinstance(m["content"], list) for b in m["content"])
