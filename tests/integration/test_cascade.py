"""The cascade end to end (issue 19): a request seen before runs without the model.

Real LMDB log, real bubblewrap, real HTTP model server (the scripted one,
which records every request it gets), the CLI in both layouts.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from metnos.adapters.cli import main
from tests.support.scripted_llm import ScriptedLLM, call, text


@pytest.fixture
def home(home: Path) -> Path:
    (home / "notes").mkdir()
    (home / "notes" / "todo.txt").write_text("buy milk")
    return home



@pytest.fixture(autouse=True)
def _model_made_steps(monkeypatch) -> None:
    """These scripts have the model make every step itself; the tests that set
    opening reads on say so."""
    monkeypatch.setenv("METNOS_OPENING_READS", "0")

def _ask(monkeypatch, capsys, script, request: str, *extra: str) -> tuple[dict, ScriptedLLM]:
    with ScriptedLLM(list(script)) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        main(["ask", request, "--json", *extra])
        out = capsys.readouterr().out
    return orjson.loads(out), llm


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _consulted(capsys, turn_id: str) -> dict:
    _code, out, _err = _cli(capsys, "events", "--json", "--aggregate", turn_id)
    events = [orjson.loads(line) for line in out.splitlines()]
    found = [e["state"] for e in events if e["topic"].endswith("PlanConsulted")]
    assert len(found) == 1
    return found[0]


READ_TODO = [call("read_files", {"paths": ["~/notes/todo.txt"]}), text("Your todo list says: buy milk")]


def _approved_read(monkeypatch, capsys) -> dict:
    first, llm = _ask(monkeypatch, capsys, READ_TODO, "read my todo list in ~/notes/todo.txt")
    assert first["status"] == "answered" and len(llm.requests) == 2
    code, out, err = _cli(capsys, "plans", "approve", first["turn_id"], "--json")
    assert code == 0, err
    entry = orjson.loads(out)
    assert entry["state"] == "approved" and [s["executor"] for s in entry["plan"]["steps"]] == ["read_files"]
    return entry


def test_a_good_turn_is_offered_for_approval_until_it_is_approved(home: Path, capsys, monkeypatch) -> None:
    from metnos.runtime.cascade.book import PlanBook
    from metnos.runtime.booted import Runtime
    from metnos.settings.workspace import Workspace

    first, _ = _ask(monkeypatch, capsys, READ_TODO, "read my todo list in ~/notes/todo.txt")
    failed, _ = _ask(monkeypatch, capsys, [call("read_files", {"paths": ["~/notes/none.txt"]}), text("no such file")],
                     "read ~/notes/none.txt")
    with Runtime.boot(Workspace.from_env(), birth=False) as runtime:
        assert PlanBook(runtime).offer(first["turn_id"]) == f"to answer this again without the model: metnos plans approve {first['turn_id']}"
        assert PlanBook(runtime).offer(failed["turn_id"]) is None
    code, _out, err = _cli(capsys, "plans", "approve", failed["turn_id"])
    assert code != 0 and "has no plan to approve" in err
    assert _cli(capsys, "plans", "approve", first["turn_id"])[0] == 0
    with Runtime.boot(Workspace.from_env(), birth=False) as runtime:
        assert PlanBook(runtime).offer(first["turn_id"]) is None


def test_the_second_time_no_model_is_asked_and_the_answer_is_new(home: Path, capsys, monkeypatch) -> None:
    _approved_read(monkeypatch, capsys)
    (home / "notes" / "todo.txt").write_text("buy bread")
    # An empty script: any request to the model would be recorded (and answered 500).
    second, llm = _ask(monkeypatch, capsys, [], "Read my todo list in ~/notes/todo.txt?")
    assert llm.requests == []
    assert second["status"] == "answered"
    assert second["answer"] == "Your todo list says: buy bread"
    consulted = _consulted(capsys, second["turn_id"])
    assert consulted["layer"] == "L0" and consulted["how"] == "exact"
    # The hit is counted on the entry, from the log.
    code, out, _ = _cli(capsys, "plans", "list", "--json")
    assert orjson.loads(out)["plans"][0]["uses"] == 1
    # A cascade turn replays clean, like any other.
    code, out, err = _cli(capsys, "replay", second["turn_id"])
    assert code == 0, out + err


def test_a_reworded_request_hits_by_cosine_and_other_values_or_actions_do_not(home: Path, capsys, monkeypatch) -> None:
    _approved_read(monkeypatch, capsys)
    reworded, llm = _ask(monkeypatch, capsys, [], "please show me my todo list in ~/notes/todo.txt")
    assert llm.requests == [] and reworded["answer"] == "Your todo list says: buy milk"
    consulted = _consulted(capsys, reworded["turn_id"])
    assert consulted["layer"] == "L0" and consulted["how"].startswith("cosine:wordllama") and consulted["similarity"] >= 0.8
    # Close in words but another file, or another action: the model is asked.
    (home / "notes" / "done.txt").write_text("paid rent")
    other = [call("read_files", {"paths": ["~/notes/done.txt"]}), text("It says: paid rent")]
    elsewhere, llm = _ask(monkeypatch, capsys, other, "please show me my todo list in ~/notes/done.txt")
    assert len(llm.requests) == 2 and _consulted(capsys, elsewhere["turn_id"])["layer"] is None
    wipe = [text("I will not delete it."), text("I will not delete it.")]
    # 0.89 from the read, over the threshold: the word guard refuses it.
    deleting, llm = _ask(monkeypatch, capsys, wipe, "delete my todo list in ~/notes/todo.txt")
    # The model is asked, reminded once of the delete it did not call, and the turn says it was not done.
    assert len(llm.requests) == 2 and deleting["failure"]["kind"] == "action_not_taken", deleting
    found = _consulted(capsys, deleting["turn_id"])
    assert found["layer"] is None and any("asks something else: delete" in r["why"] for r in found["rejected"]), found


def test_an_executor_out_of_service_invalidates_the_plan(home: Path, capsys, monkeypatch) -> None:
    entry = _approved_read(monkeypatch, capsys)
    code, _out, err = _cli(capsys, "executors", "quarantine", "read_files", "--reason", "under review")
    assert code == 0, err
    code, out, _ = _cli(capsys, "plans", "show", entry["id"][:8], "--json")
    assert "read_files is no longer active" in orjson.loads(out)["stale"]
    failing, llm = _ask(monkeypatch, capsys, [text("read_files is out of service")], "read my todo list in ~/notes/todo.txt")
    assert len(llm.requests) == 1
    rejected = _consulted(capsys, failing["turn_id"])["rejected"]
    assert rejected == [{"layer": "L0", "entry": entry["id"], "why": "read_files is no longer active"}]


APPEND = [call("write_files", {"files": [{"path": "~/notes/todo.txt", "content": "\neggs", "mode": "append"}]}),
          text("Added eggs to ~/notes/todo.txt")]


def test_a_cached_plan_with_side_effects_still_asks_approval(home: Path, capsys, monkeypatch) -> None:
    first, _ = _ask(monkeypatch, capsys, APPEND, "append eggs to ~/notes/todo.txt", "--yes")
    assert first["status"] == "answered"
    code, _out, err = _cli(capsys, "plans", "approve", first["turn_id"])
    assert code == 0, err
    assert (home / "notes" / "todo.txt").read_text() == "buy milk\neggs"
    # Declined: nothing written, and the plan is dropped for the model (whose script is empty).
    declined, llm = _ask(monkeypatch, capsys, [], "append eggs to ~/notes/todo.txt", "--no")
    assert (home / "notes" / "todo.txt").read_text() == "buy milk\neggs"
    _code, out, _ = _cli(capsys, "events", "--json", "--aggregate", declined["turn_id"])
    kinds = [orjson.loads(line)["topic"].rsplit(".", 1)[-1] for line in out.splitlines()]
    assert kinds.index("PlanConsulted") < kinds.index("ApprovalAsked") < kinds.index("PlanAbandoned")
    assert len(llm.requests) == 1 and declined["status"] != "answered"
    # The failed plan is an anti-skill now: not proposed for 30 days, even with --yes.
    code, out, _ = _cli(capsys, "plans", "show", first["turn_id"], "--json")
    assert orjson.loads(out)["anti_skill_until"] is not None
    again, llm = _ask(monkeypatch, capsys, APPEND, "append eggs to ~/notes/todo.txt", "--yes")
    assert len(llm.requests) == 2 and "anti-skill" in _consulted(capsys, again["turn_id"])["rejected"][0]["why"]


def test_no_cache_asks_the_model(home: Path, capsys, monkeypatch) -> None:
    _approved_read(monkeypatch, capsys)
    again, llm = _ask(monkeypatch, capsys, READ_TODO, "read my todo list in ~/notes/todo.txt", "--no-cache")
    assert again["status"] == "answered" and len(llm.requests) == 2
    consulted = _consulted(capsys, again["turn_id"])
    assert consulted["layer"] is None and "no-cache" in consulted["reason"]


def test_an_undone_turns_plan_is_gone(home: Path, capsys, monkeypatch) -> None:
    entry = _approved_read(monkeypatch, capsys)
    code, out, err = _cli(capsys, "undo", entry["turn_id"])
    assert code == 0, out + err
    code, out, _ = _cli(capsys, "plans", "show", entry["id"][:8], "--json")
    assert orjson.loads(out)["state"] == "undone"
    again, llm = _ask(monkeypatch, capsys, READ_TODO, "read my todo list in ~/notes/todo.txt")
    assert len(llm.requests) == 2 and again["status"] == "answered"


def test_forget_stops_a_plan(home: Path, capsys, monkeypatch) -> None:
    entry = _approved_read(monkeypatch, capsys)
    code, out, err = _cli(capsys, "plans", "forget", entry["id"][:8])
    assert code == 0 and "forgotten" in out, err
    again, llm = _ask(monkeypatch, capsys, READ_TODO, "read my todo list in ~/notes/todo.txt")
    assert len(llm.requests) == 2 and again["status"] == "answered"


def test_rebuild_reproduces_the_plans_projection(home: Path, capsys, monkeypatch) -> None:
    from metnos.runtime.booted import Runtime
    from metnos.settings.workspace import Workspace

    entry = _approved_read(monkeypatch, capsys)
    _ask(monkeypatch, capsys, [], "read my todo list in ~/notes/todo.txt")
    _cli(capsys, "plans", "forget", entry["id"][:8])
    with Runtime.boot(Workspace.from_env(), birth=False) as runtime:
        before = runtime.plans.state_bytes()
        state = runtime.plans.state()
    assert state["entries"][entry["id"]]["uses"] == 1 and state["entries"][entry["id"]]["state"] == "forgotten"
    assert state["counts"]["L0"] == 1
    code, out, err = _cli(capsys, "rebuild", "plans")
    assert code == 0, out + err
    with Runtime.boot(Workspace.from_env(), birth=False) as runtime:
        assert runtime.plans.state_bytes() == before


def _show(name: str, wording: str = "It says:") -> list:
    return [call("read_files", {"paths": [f"~/notes/{name}"]}), text(f"{wording} {name[0] * 3} and more")]


def test_a_turn_the_model_walked_with_a_repeat_and_a_stub_answer_is_learnt_without_them(home: Path, capsys, monkeypatch) -> None:
    """With opening reads the turn reads the file itself; the model asked for it
    again (intercepted, it never ran) and first answered with a stub (rejected).
    The plan is what ran: the opening read, then the answer."""
    monkeypatch.setenv("METNOS_OPENING_READS", "1")
    script = [call("read_files", {"paths": ["~/notes/todo.txt"]}), text("Here it is:"), text("Your todo list says: buy milk")]
    first, llm = _ask(monkeypatch, capsys, script, "read my todo list in ~/notes/todo.txt")
    assert first["status"] == "answered" and first["answer"] == "Your todo list says: buy milk"
    code, out, _ = _cli(capsys, "events", "--json", "--aggregate", first["turn_id"])
    topics = [orjson.loads(line)["topic"].rsplit(".", 1)[-1] for line in out.splitlines()]
    assert "StepIntercepted" in topics and "AnswerRejected" in topics
    code, out, err = _cli(capsys, "plans", "approve", first["turn_id"], "--json")
    assert code == 0, err
    plan = orjson.loads(out)["plan"]
    assert [(s["executor"], s["args"]) for s in plan["steps"]] == [("read_files", {"paths": ["~/notes/todo.txt"]})]
    (home / "notes" / "todo.txt").write_text("buy bread")
    second, llm = _ask(monkeypatch, capsys, [], "read my todo list in ~/notes/todo.txt")
    assert llm.requests == [] and second["answer"] == "Your todo list says: buy bread"


def test_a_step_after_one_that_never_ran_is_numbered_again_in_the_plan(home: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("METNOS_OPENING_READS", "1")
    (home / "notes" / "fruit.csv").write_text("name,kg\npears,5\napples,7\n")
    script = [call("read_files", {"paths": ["~/notes/fruit.csv"]}),  # step 2: the opening read's repeat, never run
              call("sort_entries", {"from_step": 1, "field": "name"}),
              call("compute_entries", {"from_step": "3", "op": "count"}),
              text("There are 2 rows in the file.")]
    first, _ = _ask(monkeypatch, capsys, script, "how many rows are in ~/notes/fruit.csv")
    assert first["status"] == "answered", first
    code, out, err = _cli(capsys, "plans", "approve", first["turn_id"], "--json")
    assert code == 0, err
    steps = orjson.loads(out)["plan"]["steps"]
    assert [s["executor"] for s in steps] == ["read_files", "sort_entries", "compute_entries"]
    assert steps[1]["args"]["from_step"] == 1 and steps[2]["args"]["from_step"] == "2"
    (home / "notes" / "fruit.csv").write_text("name,kg\npears,5\napples,7\nplums,9\n")
    again, llm = _ask(monkeypatch, capsys, [], "how many rows are in ~/notes/fruit.csv")
    assert llm.requests == [] and again["answer"] == "There are 3 rows in the file."


def test_an_answer_that_names_the_requests_path_is_learnt_for_l1(home: Path, capsys, monkeypatch) -> None:
    """The 1.5B's answers name the file asked about ("The first item on your todo list in
    ~/lists/things-to-do-v2.md is ..."): the path is a hole of the answer, and the hole's
    index is no number the model worked out. Before, no such template was ever proposed."""
    for name in ("a.txt", "b.txt", "c.txt"):
        (home / "notes" / name).write_text(f"{name[0] * 3} and more")
    for name in ("a.txt", "b.txt"):
        _ask(monkeypatch, capsys, [call("read_files", {"paths": [f"~/notes/{name}"]}), text(f"~/notes/{name} says {name[0] * 3} and more")],
             f"show me the file ~/notes/{name}")
    third, llm = _ask(monkeypatch, capsys, [], "show me the file ~/notes/c.txt")
    assert llm.requests == [] and third["answer"] == "~/notes/c.txt says ccc and more"
    assert _consulted(capsys, third["turn_id"])["layer"] == "L1"


def test_an_approved_turn_is_a_template_for_new_values_at_once(home: Path, capsys, monkeypatch) -> None:
    """The user vouched for the walk: a request with other values follows it
    with no model call and no second walk; a forgotten approval no longer speaks."""
    for name in ("a.txt", "b.txt", "c.txt"):
        (home / "notes" / name).write_text(f"{name[0] * 3} and more")
    first, _ = _ask(monkeypatch, capsys, _show("a.txt"), "show me the file ~/notes/a.txt")
    code, out, err = _cli(capsys, "plans", "approve", first["turn_id"], "--json")
    assert code == 0, err
    entry = orjson.loads(out)
    second, llm = _ask(monkeypatch, capsys, [], "show me the file ~/notes/b.txt")
    assert llm.requests == [] and second["answer"] == "It says: bbb and more"
    consulted = _consulted(capsys, second["turn_id"])
    assert consulted["layer"] == "L1" and consulted["plan"]["steps"][0]["args"] == {"paths": ["~/notes/b.txt"]}
    code, out, err = _cli(capsys, "replay", second["turn_id"])
    assert code == 0, out + err
    # Forgotten: the one approved walk and the L1 hit are two walks with two values, still a template
    # the log taught; a fresh intent with only a forgotten approval behind it goes to the model.
    _cli(capsys, "plans", "forget", entry["id"][:8])
    (home / "notes" / "z.md").write_text("zzz")
    lone, _ = _ask(monkeypatch, capsys, [call("read_files", {"paths": ["~/notes/z.md"]}), text("It reads zzz")], "what does ~/notes/z.md hold")
    code, out, err = _cli(capsys, "plans", "approve", lone["turn_id"], "--json")
    _cli(capsys, "plans", "forget", orjson.loads(out)["id"][:8])
    (home / "notes" / "y.md").write_text("yyy")
    later, llm = _ask(monkeypatch, capsys, [call("read_files", {"paths": ["~/notes/y.md"]}), text("It reads yyy")], "what does ~/notes/y.md hold")
    assert len(llm.requests) == 2 and _consulted(capsys, later["turn_id"])["layer"] is None


def test_l1_learns_a_template_after_two_good_turns_and_a_failure_makes_it_an_anti_skill(home: Path, capsys, monkeypatch) -> None:
    for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
        (home / "notes" / name).write_text(f"{name[0] * 3} and more")
    first, _ = _ask(monkeypatch, capsys, _show("a.txt"), "show me the file ~/notes/a.txt")
    # One walk is not enough (the default is two, with different values).
    # The model words its answer another way: the same chain of steps, the latest wording.
    second, llm = _ask(monkeypatch, capsys, _show("b.txt", "The file holds"), "show me the file ~/notes/b.txt")
    assert len(llm.requests) == 2 and _consulted(capsys, second["turn_id"])["layer"] is None
    third, llm = _ask(monkeypatch, capsys, [], "Show me the file ~/notes/c.txt")
    assert llm.requests == [] and third["answer"] == "The file holds ccc and more"
    consulted = _consulted(capsys, third["turn_id"])
    assert consulted["layer"] == "L1" and consulted["plan"]["steps"][0]["args"] == {"paths": ["~/notes/c.txt"]}
    code, out, _ = _cli(capsys, "plans", "list", "--json")
    [template] = orjson.loads(out)["templates"]
    assert template["intent"] == "show me the file <path>" and template["walks"] == 3 and template["wins"] == 1
    # A file that is not there: the plan is abandoned, the model answers, the template is an anti-skill.
    missing, llm = _ask(monkeypatch, capsys, [text("There is no such file.")], "show me the file ~/notes/nope.txt")
    assert len(llm.requests) == 1 and missing["answer"] == "There is no such file."
    again, llm = _ask(monkeypatch, capsys, _show("d.txt"), "show me the file ~/notes/d.txt")
    assert len(llm.requests) == 2
    assert "anti-skill" in _consulted(capsys, again["turn_id"])["rejected"][0]["why"]
    # Undoing a turn that taught it takes its walk away.
    code, out, _ = _cli(capsys, "plans", "list", "--json")
    assert orjson.loads(out)["templates"][0]["walks"] == 4
    code, out, err = _cli(capsys, "undo", again["turn_id"])
    assert code == 0, out + err
    code, out, _ = _cli(capsys, "plans", "list", "--json")
    assert orjson.loads(out)["templates"][0]["walks"] == 3
    # Every turn replays clean: the L1 hit, the abandoned plan, the anti-skill's miss.
    code, out, err = _cli(capsys, "replay", "--all")
    assert code == 0, out + err
    code, out, _ = _cli(capsys, "turns", "show", missing["turn_id"])
    assert "cascade: L1 (template)" in out and "plan abandoned at step 1" in out


def test_maintenance_promotes_a_mature_pipeline_and_expires_an_unused_plan(home: Path, capsys, monkeypatch) -> None:
    from datetime import timedelta

    from metnos.runtime.booted import Runtime
    from metnos.runtime.scheduler import callbacks
    from metnos.settings.workspace import Workspace

    pipeline = [call("find_files", {"base_path": "~/notes"}), call("describe_entries", {"from_step": 1}),
                text("One file: todo.txt")]
    first, _ = _ask(monkeypatch, capsys, pipeline, "describe what is in ~/notes")
    assert _cli(capsys, "plans", "approve", first["turn_id"])[0] == 0
    hit, llm = _ask(monkeypatch, capsys, [], "describe what is in ~/notes")
    assert llm.requests == [] and hit["status"] == "answered"

    job = callbacks.resolve("plan_maintenance")

    def maintain(days: int) -> dict:
        with Runtime.boot(Workspace.from_env(), birth=False) as runtime:
            now = runtime.clock() + timedelta(days=days)
            result = job(callbacks.CallbackContext(runtime, now, "test"), {"ttl_days": 30, "min_uses": 1})
            runtime.log.save(*result.aggregates)
            return result.output

    first_run = maintain(1)
    assert first_run["expired"] == []
    assert first_run["promoted"] == [{"pipeline": ["find_files", "describe_entries"], "as": "find_describe_files", "uses": 1}]
    assert maintain(2)["promoted"] == []  # once
    code, out, _ = _cli(capsys, "mnestome", "list", "--state", "proto", "--json")
    protos = [m for m in orjson.loads(out) if m["dst_executor"] == "find_describe_files"]
    assert len(protos) == 1 and protos[0]["src_executor"] == "find_files"
    late = maintain(40)
    assert [e["reason"] for e in late["expired"]] == ["not used for 30 days"]
    code, out, _ = _cli(capsys, "plans", "list", "--json")
    assert orjson.loads(out)["plans"][0]["state"] == "expired"
    again, llm = _ask(monkeypatch, capsys, pipeline, "describe what is in ~/notes")
    # The model is asked again: the find and the describe (whose output is the answer).
    assert len(llm.requests) == 2 and again["status"] == "answered"


def test_the_validator_checks_shape_schema_and_scope_before_a_plan_runs(home: Path) -> None:
    import os

    from metnos.runtime.cascade.validator import plan_problems
    from metnos.runtime.booted import Runtime
    from metnos.runtime.turn.session import policy_checker, turn_catalogue
    from metnos.settings.workspace import Workspace

    def step(executor: str, args: dict) -> dict:
        return {"executor": executor, "version": "1.0.0", "args": args}

    with Runtime.boot(Workspace.from_env(), birth=False) as runtime:
        catalogue = turn_catalogue(runtime)
        check = policy_checker(runtime, dict(os.environ))

        def problems(*steps: dict) -> list[str]:
            return plan_problems({"steps": list(steps), "answer": []}, catalogue, check)

        assert problems(step("read_files", {"paths": ["~/notes/todo.txt"]}), step("describe_entries", {"from_step": 1})) == []
        assert "needs_data_source" in problems(step("describe_entries", {}))[0]
        assert "off schema" in problems(step("read_files", {"paths": "not a list"}))[0]
        assert "outside its scope" in problems(step("read_files", {"paths": ["/etc/shadow"]}))[0]
        assert "not in the catalogue" in problems(step("tidy_files", {}))[0]
        assert "pipeline_already_closed" in problems(step("read_files", {"paths": ["~/notes/todo.txt"]}),
                                                     step("describe_entries", {"from_step": 1}),
                                                     step("describe_entries", {"from_step": 1}))[0]


def _read_and_say(name: str, answer: str) -> list:
    return [call("read_files", {"paths": [f"~/notes/{name}"]}), text(answer)]


def test_a_template_answers_with_the_new_files_content_when_files_end_with_a_newline(home: Path, capsys, monkeypatch) -> None:
    """Issue 30: two turns on files ending with a newline, whose content the model quoted without
    it, taught a template that kept the content as literal text; a third file got the second's."""
    files = {"c.txt": "call the plumber\n", "d.txt": "dentist at noon\r\n", "e.txt": "elephants dance\n"}
    for name, content in files.items():
        (home / "notes" / name).write_bytes(content.encode())
    for name in ("c.txt", "d.txt"):
        walk, _ = _ask(monkeypatch, capsys, _read_and_say(name, f"The file {name} says: {files[name].strip()}"),
                       f"read ~/notes/{name} and tell me what it says")
        assert walk["status"] == "answered"
    third, llm = _ask(monkeypatch, capsys, [], "read ~/notes/e.txt and tell me what it says")
    assert llm.requests == [] and _consulted(capsys, third["turn_id"])["layer"] == "L1"
    assert third["answer"] == "The file e.txt says: elephants dance"


def test_an_answer_quoting_part_of_what_it_read_is_never_learnt(home: Path, capsys, monkeypatch) -> None:
    """The model quoted one line of each file: no slot can point at a line, so the line would stay
    literal and come back for any file. The turns teach nothing, and cannot be approved."""
    files = {"c.txt": "call the plumber\nthen the bank\n", "d.txt": "dentist at noon\nthen lunch\n", "e.txt": "elephants\nand more\n"}
    for name, content in files.items():
        (home / "notes" / name).write_text(content)
    # Not "the first line": that exact ask is worked out by a step (issue 30 item 2), not quoted by the model.
    walks = [_ask(monkeypatch, capsys, _read_and_say(name, f"It starts with: {files[name].splitlines()[0]}"),
                  f"what does ~/notes/{name} start with")[0] for name in ("c.txt", "d.txt")]
    third, llm = _ask(monkeypatch, capsys, _read_and_say("e.txt", "It starts with: elephants"), "what does ~/notes/e.txt start with")
    assert len(llm.requests) == 2 and third["answer"] == "It starts with: elephants"
    code, _out, err = _cli(capsys, "plans", "approve", walks[1]["turn_id"])
    assert code != 0 and "of what the steps returned as fixed text" in err, err
    code, out, _ = _cli(capsys, "plans", "list", "--json")
    assert orjson.loads(out)["templates"] == []


def test_undoing_a_turn_that_followed_a_template_drops_the_template(home: Path, capsys, monkeypatch) -> None:
    for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
        (home / "notes" / name).write_text(f"{name[0] * 3} and more")
    for name in ("a.txt", "b.txt"):
        _ask(monkeypatch, capsys, _show(name), f"show me the file ~/notes/{name}")
    hit, llm = _ask(monkeypatch, capsys, [], "show me the file ~/notes/c.txt")
    assert llm.requests == [] and _consulted(capsys, hit["turn_id"])["layer"] == "L1"
    [template] = orjson.loads(_cli(capsys, "plans", "list", "--json")[1])["templates"]
    code, out, err = _cli(capsys, "undo", hit["turn_id"])
    assert code == 0, out + err
    assert orjson.loads(_cli(capsys, "plans", "list", "--json")[1])["templates"] == []
    code, out, _ = _cli(capsys, "events", "--json")
    drops = [orjson.loads(line)["state"] for line in out.splitlines() if orjson.loads(line)["topic"].endswith("TemplateDropped")]
    assert [(d["template_id"], d["turn_id"]) for d in drops] == [(template["id"], hit["turn_id"])]
    assert "was undone" in drops[0]["reason"]
    # Walked again from scratch: the model is asked until two walks agree again.
    again, llm = _ask(monkeypatch, capsys, _show("d.txt"), "show me the file ~/notes/d.txt")
    assert len(llm.requests) == 2 and again["status"] == "answered"
    code, out, err = _cli(capsys, "rebuild", "plans")
    assert code == 0, out + err
    [relearnt] = orjson.loads(_cli(capsys, "plans", "list", "--json")[1])["templates"]
    assert relearnt["walks"] == 1


def test_a_model_walk_with_another_chain_drops_what_two_walks_taught(home: Path, capsys, monkeypatch) -> None:
    for name in ("a.txt", "b.txt", "c.txt"):
        (home / "notes" / name).write_text(f"{name[0] * 3} and more")
    for name in ("a.txt", "b.txt"):
        _ask(monkeypatch, capsys, _show(name), f"show me the file ~/notes/{name}")
    # Asked past the cascade, the model does it another way: the log no longer agrees with the template.
    other = [call("read_files", {"paths": ["~/notes/c.txt"], "max_bytes": 4096}), text("It says: ccc and more")]
    walked, llm = _ask(monkeypatch, capsys, other, "show me the file ~/notes/c.txt", "--no-cache")
    assert len(llm.requests) == 2
    code, out, _ = _cli(capsys, "events", "--json")
    drops = [orjson.loads(line)["state"] for line in out.splitlines() if orjson.loads(line)["topic"].endswith("TemplateDropped")]
    assert len(drops) == 1 and drops[0]["turn_id"] == walked["turn_id"] and "another chain" in drops[0]["reason"]
    [left] = orjson.loads(_cli(capsys, "plans", "list", "--json")[1])["templates"]
    assert left["walks"] == 1 and left["id"] != drops[0]["template_id"]
    again, llm = _ask(monkeypatch, capsys, _show("a.txt"), "show me the file ~/notes/a.txt")
    assert len(llm.requests) == 2
