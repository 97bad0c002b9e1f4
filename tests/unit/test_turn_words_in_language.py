"""The runtime's own words in what a turn tells (a failure's detail, a refusal's reason, an approval's reason, the
unverified answer's summary, a quarantine notice) are said in the request's language: each path is driven with the
rules' stand-ins (tests/unit/test_turn_rules.py) for an Italian request, and what the person reads holds no English
word of the runtime's own; for an English request it is byte for byte what it was, and the events keep the English.

A text the runtime makes for a person comes from a ``turn.*`` template (metnos/settings/i18n/en.json): a literal or an
f-string given as a turn's failure detail, a step's problem, a refusal's or a verdict's reason fails here, naming the
file and line."""

from __future__ import annotations

import ast
import re
import string
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from domain import provenance as prov
from metnos.mechanisms.llm.messages import LLMReply
from metnos.runtime.step import vaglio as guard
from metnos.runtime.step.dialog_tools import Question
from metnos.runtime.step.shape import NEEDS_DATA_SOURCE
from metnos.runtime.step.vaglio import ALLOW, GuardPolicy
from metnos.runtime.turn import telling
from metnos.runtime.turn.answers import REASONS
from metnos.runtime.turn.failures import FailureKind, step_failure_words, turn_failure
from metnos.runtime.turn.grounding import StepData, check_answer
from metnos.runtime.turn.judge import LLMJudge
from metnos.runtime.turn.quarantined import told
from metnos.runtime.turn.rules.answers import ActionTaken, AnswerForm, answer_from_data
from metnos.runtime.turn.rules.base import End
from metnos.runtime.turn.rules.dialog import Reply, unanswered
from metnos.runtime.turn.rules.grounding import Grounded
from metnos.runtime.turn.rules.recovery import Recovery
from metnos.runtime.turn.rules.vaglio import Vaglio
from metnos.runtime.turn.turn_state import AnswerFromData, EndTurn, TurnState
from metnos.settings import i18n
from metnos.settings.runtime import JudgeConfig
from tests.unit.test_turn_rules import HOME, Loop, a_step, an_answer, ran

ROOT = Path(__file__).resolve().parents[2]
SOURCE = i18n.texts().source
ITALIAN = {k: v["text"] for k, v in i18n.texts().translations["it"].items()}
_WORD = re.compile(r"[A-Za-z]{3,}")


def _literals(template: str) -> str:
    return " ".join(literal for literal, _, _, _ in string.Formatter().parse(template))


# Words the Italian templates say as the English ones do: names (commands, settings, terms of Metnos), loan words, and
# words both languages spell alike ("data", given; "non"; "private"). Any other English word of the runtime's own
# templates left in what an Italian request is told is English the runtime made, or a translation that kept it.
SAID_ALIKE = frozenset({
    "actors", "ask", "dashboard", "data", "executor", "executors", "file", "full", "guest", "input", "json", "lat", "llm", "lon", "mcp",
    "metnos", "mnest", "non", "online", "output", "private", "rehabilitate", "sandbox", "schema", "server", "standard", "telos", "url", "vaglio", "yes"})
ENGLISH_ONLY = {w.lower() for k, v in SOURCE.items() if k.startswith(("turn.", "failure.", "telling."))
                for w in _WORD.findall(_literals(v))} - SAID_ALIKE


def english_left(text: str) -> set[str]:
    """The runtime's English words in ``text``, each as a word of its own (``read`` in ``read_files`` is data)."""
    return {w for w in re.findall(r"(?<![\w/.~'-])[A-Za-z]{3,}(?![\w/.'-])", text) if w.lower() in ENGLISH_ONLY}


def told_in(kind: FailureKind, detail: str, language: str) -> str:
    return turn_failure(kind, detail, language).message


def assert_italian(kind: FailureKind, detail: str, english: str) -> str:
    """The failure told in Italian holds no English word of the runtime's; told in English it is ``english``, as
    recorded before; recorded (``TurnFailed``) for the Italian request, its detail is the English one."""
    italian = told_in(kind, detail, "it")
    assert not english_left(italian), (italian, english_left(italian))
    assert told_in(kind, detail, "en") == english
    failure = turn_failure(kind, detail, "it")
    assert failure.recorded == i18n.texts().text(f"failure.{kind.value}", "it", detail=failure.detail)
    assert failure.detail in english
    return italian


# Each path, its English as the turn told it before the catalogue had it -----------------------------------------

def test_a_step_that_crashed_timed_out_or_was_refused_is_told_in_italian() -> None:
    crashed = step_failure_words("get_now", {"ok": False, "error": {"kind": "Crash", "type": "RuntimeError", "message": "boom"}})
    said = assert_italian(FailureKind.STEP_FAILED, crashed, "I could not do it: get_now crashed: RuntimeError: boom")
    assert said == "Non sono riuscito a farlo: get_now si è bloccato: RuntimeError: boom"
    assert_italian(FailureKind.STEP_FAILED, step_failure_words("get_now", {"ok": False, "error": {"kind": "Timeout"}}),
                   "I could not do it: get_now ran out of time")
    assert_italian(FailureKind.STEP_FAILED, step_failure_words("x_y", {"ok": False, "error": {"kind": "Odd", "detail": "d"}}),
                   "I could not do it: x_y failed (Odd): d")
    assert_italian(FailureKind.STEP_FAILED, step_failure_words("x_y", {"ok": False}), "I could not do it: x_y failed")
    schema = step_failure_words("read_files", {"ok": False, "error_class": "schema_violation", "errors": [{"path": "paths", "message": "m"}]})
    assert_italian(FailureKind.INVALID_ARGUMENTS, schema, "The language model could not write a valid call "
                   "(read_files was called with arguments that do not fit its schema: paths: m).")


@pytest.mark.parametrize("key", sorted(k for k in SOURCE if k.startswith("turn.step.") and not k.endswith(".because")))
def test_every_way_a_step_goes_wrong_is_worded_in_italian_with_and_without_its_cause(key: str) -> None:
    group, name = (key.split(".")[2:4] + [""])[:2]
    observation: dict[str, Any] = ({"ok": False, "error": {"kind": name}} if group == "kind"
                                   else {"ok": False, "error_class": name} if group == "class" else {"ok": False, "error_class": "odd"})
    if key == "turn.step.failed":
        observation = {"ok": False}
    for cause in ("", "the cause"):
        if cause and group == "kind":
            observation["error"]["message"] = cause
        elif cause:
            observation["error"] = cause
        words = step_failure_words("some_tool", observation)
        assert words == SOURCE[key + (".because" if cause else "")].format(executor="some_tool", what=name or "odd", cause=cause)
        italian = told_in(FailureKind.STEP_FAILED, words, "it")
        assert not english_left(italian.replace("the cause", "")), italian


def test_a_refusal_by_the_vaglio_the_user_or_the_llm_judge_is_told_in_italian() -> None:
    forbidden = TurnState()
    Vaglio().on_resolved(a_step(Loop(), "read_files", {"paths": ["/home/u/.ssh/id_ed25519"]}, forbidden))
    said = assert_italian(*forbidden.problem, "Not done: read_files was refused by the vaglio: "
                          "'/home/u/.ssh/id_ed25519' is inside the forbidden path /home/u/.ssh")
    assert "'/home/u/.ssh/id_ed25519' è dentro il percorso vietato /home/u/.ssh" in said
    declined = TurnState()
    Vaglio().on_resolved(a_step(Loop(approve=False), "delete_files", {"paths": ["~/a.md"]}, declined, text="delete ~/a.md"))
    assert_italian(*declined.problem, "Not done: delete_files was not approved: the user did not approve delete_files; do not retry it")
    judged = LLMJudge(JudgeConfig(enabled=True, threshold=0.5)).review(
        lambda *a, **k: None, lambda *a, **k: LLMReply(text='{"score": 0.1, "reason": "off topic"}', tool_calls=(), call_form="none", raw={}),
        round=1, step=1, request_text="cancella ~/a.md", name="delete_files", args={}, verdict=guard.Verdict("delete_files", ALLOW, "approved", 1.0, None, (), ()))
    words = step_failure_words("delete_files", {"ok": False, "error_class": "vaglio_denied", "error": judged.reason})
    assert_italian(FailureKind.STEP_REFUSED, words, "Not done: delete_files was refused by the vaglio: "
                   "the LLM judge refused delete_files (score 0.10 under 0.50): off topic")


def test_the_reasons_an_approval_is_asked_with_are_said_in_italian() -> None:
    policy = GuardPolicy.core(HOME)
    asked = [guard.vaglio("delete_files", {"paths": ["~/a.md"]}, intent_text="delete ~/a.md", policy=policy, side_effects=True,
                          idempotent=False, autonomy=level).reason for level in ("supervised", "full")]
    came_from = prov.target_origin(prov.PATH, prov.Provenance(prov.STEP, step=2, source=prov.WEB), tainted_by=None)
    asked.append(guard.vaglio("delete_files", {"paths": ["~/a.md"]}, intent_text="delete ~/a.md", policy=policy, side_effects=True,
                              untrusted=[i18n.english("turn.origin.for", name="delete_files", reason=came_from)]).reason)
    asked.append(guard.vaglio("delete_files", {"paths": ["~/a.md"]}, intent_text="delete ~/a.md", policy=policy, side_effects=True,
                              idempotent=False, principal="ospite").reason)
    asked.append(guard.vaglio("delete_files", {"paths": ["~/a.md"]}, intent_text="delete ~/a.md", policy=policy, side_effects=True,
                              autonomy="read_only").reason)
    assert asked[0] == "delete_files changes the world and cannot be repeated safely: it needs your approval"
    assert asked[1] == asked[0] + ", even at autonomy full"
    for reason in asked:
        said = i18n.said_words(reason, "it")
        assert said != reason and not english_left(said), said
        assert i18n.said_words(reason, "en") == reason


def test_what_the_rules_end_a_turn_with_is_told_in_italian() -> None:
    loop, state = Loop(), TurnState()
    for problem, reason in REASONS.items():
        assert_italian(FailureKind.UNUSABLE_ANSWER, reason, f"The language model did not produce an answer ({reason}).")
    state.answer_corrections = 1
    ended = AnswerForm().on_answer(an_answer(loop, "read_files", state))
    assert isinstance(ended, End) and ended.detail == REASONS["tool_name"]
    pool = ["read_files", "delete_files", "write_files"]
    loop_acting = Loop({"read_files": Loop().catalogue.get("read_files"), "delete_files": Loop().catalogue.get("delete_files"),
                        "write_files": Loop().catalogue.get("delete_files")})
    not_done = ActionTaken().on_answer(an_answer(loop_acting, "Fatto.", TurnState(), pool=pool, source="plan"))
    assert_italian(not_done.kind, not_done.detail, "Not done: the language model stopped before calling delete_files or write_files, "
                   "which the request asks for.")
    needs = TurnState()
    a_step(loop, "read_files", {}, needs).reject("shape", {}, {"ok": False, "error_class": NEEDS_DATA_SOURCE, "error": "no data"})
    assert_italian(*needs.problem, "I need more information before acting: read_files needs data to work on (which file, folder or items?)")
    figure = TurnState(observations={1: {"ok": True, "content": "x"}})
    with pytest.raises(EndTurn) as ended_turn:
        answer_from_data(loop, SimpleNamespace(id="t"), figure, SimpleNamespace(text="how many lines are there?"), ["read_files"],
                         AnswerFromData((1,), "raw_output_repeated"))
    assert_italian(ended_turn.value.kind, ended_turn.value.detail,
                   "The language model did not produce an answer (the figure asked for was never worked out from the data of step 1).")
    assert_italian(FailureKind.STEP_FAILED, "", "I could not do it: no detail")
    assert_italian(FailureKind.BAD_LLM_REPLY, i18n.english("turn.tool_call_after_close"),
                   "The language model gave a reply I could not use (a tool call after the pipeline was closed).")
    assert_italian(FailureKind.NEEDS_INPUTS, i18n.english("turn.needs_target", name="delete_files"),
                   "I need more information before acting: delete_files needs a target (which files, which items?)")
    crashed = step_failure_words("get_now", {"ok": False, "error": {"kind": "Crash"}})
    assert_italian(FailureKind.STEP_FAILED, i18n.english("turn.plan.step_failed.because", step=2, name="get_now", words=crashed),
                   "I could not do it: step 2 (get_now) did not succeed: get_now crashed")
    assert_italian(FailureKind.BAD_LLM_REPLY, i18n.english("turn.plan.placeholders_left", left="{{step1.path}}"),
                   "The language model gave a reply I could not use (the answer holds {{step1.path}}, which names no step's value).")


def test_a_read_on_the_model_s_guess_that_found_nothing_is_told_in_italian() -> None:
    from domain.provenance import MODEL, Provenance
    state, loop = TurnState(), Loop()
    guessed = a_step(loop, "read_files", {"paths": ["~/zebra"]}, state, text="what are my plans?")
    guessed.provenance = {"paths.0": Provenance(MODEL)}
    Recovery().on_observation(ran(guessed, {"ok": True, "entries": []}))
    assert_italian(*state.problem, "I could not do it: read_files found nothing with paths.0 '~/zebra', in neither your request nor "
                   "an earlier result: a guess of the model's, not a fact")


@pytest.mark.parametrize("by", ["cli:timeout", "no-terminal", "telegram:stopped", "someone"])
def test_a_question_nobody_answered_is_told_in_italian(by: str) -> None:
    detail = unanswered(Question(step=1, tool="get_inputs", question="Quali file?", channel="telegram"), Reply(None, by))
    said = assert_italian(FailureKind.NEEDS_INPUTS, detail, f"I need more information before acting: {detail}")
    assert "“Quali file?”" in said
    assert_italian(FailureKind.NEEDS_INPUTS, i18n.english("turn.dialog.nobody_to_ask", question="Quali file?", channel="mcp"),
                   "I need more information before acting: “Quali file?” needs an answer and nobody can be asked on mcp; name it in the request")


def test_an_unverified_answer_is_told_wholly_in_italian_and_its_english_is_unchanged() -> None:
    loop, state = Loop(), TurnState()
    ran(a_step(loop, "read_files", {"paths": ["~/notes"]}, state),
        {"ok": True, "entries": [{"path": "/home/u/notes/a.txt", "size": 120}, {"path": "/home/u/notes/b.md", "size": 3000}]})
    state.grounding_repaired = True
    bad = "There are 3 files: a.txt, c.txt and b.md."
    verdict = Grounded().on_conclusion(an_answer(loop, bad, state, request="elenca ~/notes"))
    summary = verdict.grounding.summary()
    assert summary == "not found in any step's result: 'c.txt', '3'"
    many = check_answer("x1.txt x2.txt x3.txt x4.txt x5.txt x6.txt x7.txt x8.txt x9.txt", request="list", steps=[])
    last3 = StepData("read_files", False, {"ok": True, "content": "a\nb\nc\nd\ne"})
    exact = check_answer("a\nb\nc\nd\ne", request="mostrami le ultime 3 righe", steps=[last3])
    top = check_answer("The largest is a.txt", request="qual è il file più grande?", steps=[
        StepData("sort_entries", True, {"ok": True, "entries": [{"path": "a.txt", "size": 1}, {"path": "b.txt", "size": 9}],
                                        "metadata": {"order": "asc", "field": "size", "count_in": 2, "count_out": 2}})])
    denied = check_answer("notes.md does not exist.", request="leggi notes.md", steps=[StepData("read_files", False, {"ok": True, "path": "notes.md", "content": "hi"})])
    for grounding, english in (
            (verdict.grounding, "Unverified: the answer does not hold up against what the steps returned (not found in any step's result: "
                                "'c.txt', '3')."),
            (many, None), (exact, None), (top, None), (denied, None)):
        assert not grounding.holds
        detail = grounding.summary()
        italian = assert_italian(FailureKind.UNVERIFIED_ANSWER, detail, english or told_in(FailureKind.UNVERIFIED_ANSWER, detail, "en"))
        outcome = SimpleNamespace(status="unverified", answer=bad, quarantined=[],
                                  failure={**turn_failure(FailureKind.UNVERIFIED_ANSWER, detail, "it").to_json(), **grounding.to_json()})
        lines = telling.unverified_lines(outcome, "it")
        assert not english_left("\n".join(lines[:-1])), lines
        assert italian.startswith("Non verificata:")
    assert "le ultime 3 righe" in told_in(FailureKind.UNVERIFIED_ANSWER, exact.summary(), "it")
    assert "e altri 1" in told_in(FailureKind.UNVERIFIED_ANSWER, many.summary(), "it")


def test_a_quarantine_notice_is_said_in_italian_and_in_english_as_before() -> None:
    held = told([{"name": "get_now", "version": "1.0.0", "origin": "seed", "check": "signature", "reason": "quarantined (no reason recorded)"}])
    outcome = SimpleNamespace(quarantined=held)
    assert telling.notices(outcome) == ["get_now 1.0.0 would have been offered for this request, but it is quarantined: quarantined "
                                        "(no reason recorded). `metnos executors show get_now` shows it; once its files verify again, "
                                        "`metnos executors rehabilitate get_now` returns it."]
    said = telling.notices(outcome, "it")[0]
    assert said.startswith("get_now 1.0.0 sarebbe stato offerto") and not english_left(said), said
    reply = telling.reply_text(SimpleNamespace(status="failed", failure={"message": "Non fatto"}, answer=None, quarantined=held), "it")
    assert said in reply


def test_where_a_target_came_from_and_what_a_call_would_carry_away_are_said_in_italian() -> None:
    """The domain says where a value came from in words (domain/provenance.py, which reads no catalogue): each of its
    sentences is one a ``turn.origin.*``, ``turn.role.*`` or ``turn.carried.*`` template makes, so the telling finds it."""
    origins = [prov.Provenance(kind) for kind in (prov.REQUEST, prov.DIALOG, prov.MODEL)]
    origins += [prov.Provenance(prov.SETTING, setting="mail.to")]
    origins += [prov.Provenance(prov.STEP, step=3, source=source) for source in sorted(prov._SOURCE_WORDS)]
    for origin in origins:
        found = i18n.error_template(origin.words(), family=i18n.TURN)
        assert found is not None and found[0].startswith("turn.origin."), origin.words()
        for role in (prov.RECIPIENT, prov.PATH, prov.URL, prov.COMMAND, prov.VALUE, "other"):
            for tainted in (None, prov.Seen(2, prov.WEB, {})):
                why = prov.target_origin(role, origin, tainted_by=tainted, argument="args.to")
                if why is not None:
                    said = i18n.said_words(i18n.english("turn.origin.for", name="send_message", reason=why), "it")
                    assert not english_left(said), said
    step = prov.Provenance(prov.STEP, step=1, source=prov.FILE)
    for carried in (prov.carries_file_or_secret({"body": step}, {}), prov.carries_file_or_secret({}, {"body": "-----BEGIN PRIVATE KEY-----"}),
                    "a private key", f"text of {step.words()} ('a line of it')"):
        refused = i18n.english("turn.exfiltration.target", name="send_message", carried=carried, role="recipient", path="to", origin=step.words())
        words = step_failure_words("send_message", {"ok": False, "error_class": "exfiltration", "error": refused})
        said = told_in(FailureKind.STEP_REFUSED, words, "it")
        # The role is the schema's name for the argument (``recipient``), as the call's arguments are: data.
        assert not english_left(said.replace("a line of it", "").replace("recipient", "")), said
    # Cut at 200 characters where it was made, the refusal is said whole from what is left of it.
    assert words.endswith("If you mean it…") and told_in(FailureKind.STEP_REFUSED, words, "en") == f"Not done: {words[:200]}…"
    assert "send_message rifiutato come esfiltrazione: del testo preso da ciò che conteneva il file letto al passo 1" in said, said


def test_the_terminal_asks_a_question_and_an_approval_with_its_reason_in_italian(monkeypatch, capsys) -> None:
    from metnos.adapters.cli.ask_cmd import approver_for, asker_for
    from metnos.runtime.step.dialog_tools import LOCATION_QUESTION
    from metnos.runtime.turn.remediation import REMEDIATIONS
    from metnos.runtime.step.shape import NEEDS_ACTION_TARGET
    monkeypatch.setattr("sys.stdin", SimpleNamespace(closed=False, isatty=lambda: True))
    monkeypatch.setattr("builtins.input", lambda prompt="": "n")
    flags = SimpleNamespace(yes=False, no=False)
    reason = guard.vaglio("delete_files", {"paths": ["~/a.md"]}, intent_text="delete ~/a.md", policy=GuardPolicy.core(HOME),
                          side_effects=True, idempotent=False).reason
    which = REMEDIATIONS[NEEDS_ACTION_TARGET].arg_builder(None, SimpleNamespace(executor="delete_files"))["question"]
    assert which == "Which files should I delete?"
    for language, said in (("it", ["delete_files cambia il mondo e non si può ripetere in sicurezza: serve la tua approvazione",
                                   "Dove sei? (una città", "Su quali files devo agire (delete)?", "Su cosa deve agire send_message?"]),
                           ("en", [reason, LOCATION_QUESTION, which, "What should send_message act on?"])):
        approver_for(flags, language)(1, "delete_files", {"paths": ["~/a.md"]}, reason)
        for question in (LOCATION_QUESTION, which, i18n.english("turn.question.what_target", name="send_message")):
            asker_for(flags, language)(Question(step=2, tool="get_inputs", question=question, channel="cli"))
        err = capsys.readouterr().err
        assert all(s in err for s in said), err


# Every template is found again by its English words, and no other template takes it ----------------------------

@pytest.mark.parametrize("key", sorted(k for k in SOURCE if k.startswith(i18n.TURN) and not k.startswith("turn.joined.")))
def test_every_turn_template_is_found_by_its_english_and_said_in_italian(key: str) -> None:
    values = {name: f"F{n}x" for n, name in enumerate(sorted(i18n.fields_of(SOURCE[key])))}
    english = i18n.english(key, **values)
    assert i18n.error_template(english, family=i18n.TURN) == (key, values)
    said = i18n.said_words(english, "it")
    assert said == ITALIAN[key].format(**values) and not english_left(said), said


def test_names_joined_by_the_runtime_are_joined_in_italian_and_data_with_or_in_it_is_not() -> None:
    assert i18n.said_words("delete_files or send_message and write_files", "it") == "delete_files or send_message and write_files"
    assert i18n.said_words("delete_files or send_message or write_files", "it") == "delete_files o send_message o write_files"
    assert i18n.said_words("No such file or directory", "it") == "No such file or directory"


# A person-facing text the runtime makes from a literal, outside the catalogue ------------------------------------

# Where a turn's detail, a step's problem, a refusal or a verdict's reason is made: (file, call, argument index or keyword).
_MADE_AT = {"End": 1, "EndTurn": 1, "turn_failure": 1, "_fail": 3, "Verdict": 2, "PlanFailed": 0, "_abandon": 5}
_SCANNED = [*sorted((ROOT / "metnos/runtime/turn").rglob("*.py")), ROOT / "metnos/runtime/step/vaglio.py"]


def _words_of_its_own(node: ast.AST) -> bool:
    """A literal, or an f-string, with words of its own (``f"{a}; {b}"`` joins texts made elsewhere)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(_WORD.search(node.value))
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.Constant) and _WORD.search(str(v.value)) for v in node.values)
    if isinstance(node, ast.IfExp):
        return _words_of_its_own(node.body) or _words_of_its_own(node.orelse)
    return False


def literal_texts(path: Path, root: Path = ROOT) -> list[str]:
    """Where ``path`` gives a person-facing text of the runtime's as a literal: ``file:line``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        made: list[ast.AST] = []
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            at = _MADE_AT.get(name)
            if name == "Verdict" and len(node.args) > 1 and ast.unparse(node.args[1]) == "ALLOW":
                continue  # an allowed call is not told: nobody is asked, nothing refused
            if isinstance(at, int) and len(node.args) > at:
                made.append(node.args[at])
            made += [k.value for k in node.keywords if k.arg == "reason" and name in ("replace", "Verdict")]
            if name in ("refuse", "reject") and node.args and isinstance(node.args[0], ast.Dict):
                made += [v for k, v in zip(node.args[0].keys, node.args[0].values) if isinstance(k, ast.Constant) and k.value == "error"]
        elif isinstance(node, ast.Assign) and any("problem" in ast.unparse(t) for t in node.targets):
            value = node.value.elts[0] if isinstance(node.value, ast.Tuple) and isinstance(node.value.elts[0], ast.Tuple) else node.value
            if isinstance(value, ast.Tuple) and len(value.elts) == 2:
                made.append(value.elts[1])
        found += [f"{path.relative_to(root)}:{m.lineno}" for m in made if _words_of_its_own(m)]
    return found


def test_no_person_facing_text_of_a_turn_is_made_outside_the_catalogue() -> None:
    assert [site for path in _SCANNED for site in literal_texts(path)] == []


def test_the_scan_finds_a_literal_detail_a_reason_and_a_problem(tmp_path: Path) -> None:
    made = tmp_path / "made.py"
    made.write_text('End(k, f"{name} is gone")\nstate.problem = (k, "it broke")\nVerdict(n, DENY, "not allowed", 1)\n'
                    'step.refuse({"ok": False, "error": f"{x} said no"}, a)\nEnd(k, i18n.english("turn.no_detail"))\n'
                    'state.problem, state.since_problem = (k, f"{a}; {b}"), []\nraise PlanFailed(f"no plan: {e}")\n'
                    '_abandon(loop, turn, state, request, pool, "gave up")\nVerdict(n, ALLOW, "approved", 1)\n')
    lines = sorted(int(site.rsplit(":", 1)[1]) for site in literal_texts(made, tmp_path))
    assert lines == [1, 2, 3, 4, 7, 8]


def test_a_side_effect_withheld_as_no_change_is_said_when_the_turn_did_not_answer() -> None:
    failed = SimpleNamespace(status="failed", failure={"message": "Not done"}, answer=None, quarantined=[],
                             withheld_changes=["delete_files", "move_files"])
    [said] = telling.notices(failed)
    assert said.startswith("not offered: delete_files, move_files; the request reads as changing nothing.")
    italian = telling.notices(failed, "it")[0]
    assert italian.startswith("non offerti: delete_files, move_files;") and not english_left(italian), italian
    assert italian in telling.reply_text(failed, "it")
    assert telling.outcome_json(SimpleNamespace(**vars(failed), turn_id="t", steps=0))["withheld_changes"] == ["delete_files", "move_files"]
    # An answered turn needed none of them: nothing to say.
    assert telling.notices(SimpleNamespace(status="answered", answer="ok", quarantined=[], withheld_changes=["delete_files"])) == []
