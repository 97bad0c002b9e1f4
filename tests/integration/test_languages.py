"""Languages on a real workspace: adding one, the nightly drafts through a scripted model on a real
HTTP server, review and promote at the CLI, stale translations, and a turn told in its request's language."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson
import pytest

from domain.digest import digest_id
from domain.schedule import builtin_schedule_id
from metnos.adapters.cli import main
from metnos.runtime.booted import Runtime
from metnos.runtime.executor_texts import key, with_executors
from metnos.runtime.scheduler.clock import ManualClock
from metnos.runtime.scheduler.service import ScheduleService
from metnos.runtime.scheduler.tick import Scheduler
from metnos.services import wiring
from metnos.settings import i18n
from metnos.settings.workspace import Workspace
from tests.support.layouts import LAYOUTS
from tests.support.scripted_llm import ScriptedLLM, call, malformed, text

NOW = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(days=1)


@pytest.fixture
def layout() -> str:
    return LAYOUTS[0]


def cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def french(source: dict[str, str], keys: list[str]) -> dict[str, str]:
    """A scripted model's French: each text marked, its fields kept; the first one loses its fields."""
    drafts = {k: "FR " + source[k] for k in keys}
    broken = next(k for k in keys if i18n.fields_of(source[k]))
    drafts[broken] = "FR sans champs"
    return drafts


@pytest.fixture
def rt(home: Path) -> Iterator[Runtime]:
    with Runtime.boot(Workspace.from_env(), birth=False, clock=ManualClock(NOW)) as runtime:
        ScheduleService(runtime).install_builtin_jobs()
        yield runtime


def test_a_language_added_is_drafted_at_night_reviewed_and_promoted(rt: Runtime, capsys, monkeypatch) -> None:
    code, out, _ = cli(capsys, "i18n", "add", "fr")
    source = with_executors(i18n.load(), rt.report.defaults).source
    assert key("read_files", "description") in source and key("read_files", "summary") in source
    assert code == 0 and out.startswith(f"fr: added; {len(source)} texts to translate")
    assert cli(capsys, "i18n", "add", "fr")[2] == "metnos: fr is already known; see `metnos i18n status`\n"
    assert "is not a language code" in cli(capsys, "i18n", "add", "French")[2]
    rows = {r["language"]: r for r in orjson.loads(cli(capsys, "i18n", "status", "--json")[1])}
    assert rows["it"]["missing"] == 0 and rows["fr"]["missing"] == len(source) and rows["fr"]["drafts"] == 0

    # The night: one request for French, at most `limit` texts; one draft lost its fields and is refused.
    sid = str(builtin_schedule_id("i18n_translate_pending"))
    # The job drafts the first texts owed in the order of their keys: enough of them that one has fields to lose.
    keys = sorted(source)
    limit = max(5, next(n for n, k in enumerate(keys, 1) if i18n.fields_of(source[k])))
    ScheduleService(rt).modify(sid, {"args": {"limit": limit}})
    owed = keys[:limit]
    with ScriptedLLM([text("```json\n" + json.dumps(french(source, owed), ensure_ascii=False) + "\n```")]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        record = Scheduler(rt, models=wiring.llm_router(rt.workspace).for_tier).run_now(sid)
    assert record["ok"], record
    assert len(llm.requests) == 1 and '"language": "fr"' in llm.requests[0].messages[-1]["content"]
    written = [e for e in rt.log.events.get(digest_id("i18n_translate_pending"))][-1]
    broken = next(k for k in owed if i18n.fields_of(source[k]))
    assert written.figures["drafted"] == {"fr": sorted(set(owed) - {broken})}
    assert list(written.figures["refused"]["fr"]) == [broken]

    # Drafts are not in use until promoted.
    assert with_executors(i18n.load(rt.workspace.i18n_dir), rt.report.defaults).missing("fr") == sorted(source)
    code, out, _ = cli(capsys, "i18n", "review", "fr")
    assert code == 0 and f"  draft: FR {source[owed[1]] if owed[1] != broken else source[owed[2]]}" in out
    code, out, _ = cli(capsys, "i18n", "promote", "fr")
    assert code == 0 and out == f"fr: {limit - 1} promoted\n"
    promoted = with_executors(i18n.load(rt.workspace.i18n_dir), rt.report.defaults)
    first = next(k for k in owed if k != broken)
    assert promoted.fresh(first, "fr") == "FR " + source[first]
    assert len(promoted.missing("fr")) == len(source) - (limit - 1)
    assert cli(capsys, "i18n", "review", "fr")[1].startswith("no drafts for fr")

    # French is still owed its other texts: without a model the job fails, and says why.
    again = Scheduler(rt).run_now(sid)
    assert not again["ok"] and again["kind"] == "NoModel"


def test_an_executor_summary_and_description_are_drafted_promoted_and_said_in_the_command_language(rt: Runtime, capsys, monkeypatch) -> None:
    assert cli(capsys, "i18n", "add", "fr")[0] == 0
    catalogue = with_executors(i18n.load(), rt.report.defaults)
    owed = [key("read_files", "description"), key("read_files", "summary")]
    assert set(owed) <= set(catalogue.missing("fr"))
    pending = {k: {"text": "FR " + catalogue.source[k], "source_hash": i18n.source_hash(catalogue.source[k]), "model": "scripted"} for k in owed}
    i18n.write_pending(rt.workspace.i18n_dir, "fr", pending)
    monkeypatch.setenv("METNOS_LANGUAGE", "fr")
    code, out, _ = cli(capsys, "executors", "show", "read_files")
    assert code == 0 and "\n  FR " not in out  # a draft is not in use
    assert cli(capsys, "i18n", "promote", "fr", *owed) == (0, "fr: 2 promoted\n", "")
    code, out, _ = cli(capsys, "executors", "show", "read_files")
    english = rt.report.defaults["read_files"].manifest
    assert code == 0 and f"\n  FR {english.description['en']}\n" in out and f"\n  FR {english.executor.summary}\n" in out
    row = next(line for line in cli(capsys, "executors", "list")[1].splitlines() if line.startswith("read_files "))
    assert row.endswith(f"FR {english.executor.summary}")
    monkeypatch.setenv("METNOS_LANGUAGE", "it")
    code, out, _ = cli(capsys, "executors", "show", "read_files")
    assert f"\n  {english.description['it']}\n" in out and "\n  Legge il testo di uno o più file.\n" in out
    monkeypatch.setenv("METNOS_LANGUAGE", "en")
    code, out, _ = cli(capsys, "executors", "show", "read_files")
    assert f"\n  {english.description['en']}\n" in out and f"\n  {english.executor.summary}\n" in out


def test_adding_a_language_owes_every_text_prompts_included_and_one_night_drafts_them(rt: Runtime, capsys, monkeypatch) -> None:
    assert cli(capsys, "i18n", "add", "de")[0] == 0
    source = with_executors(i18n.load(), rt.report.defaults).source
    assert with_executors(i18n.load(rt.workspace.i18n_dir), rt.report.defaults).missing("de") == sorted(source)
    assert any(k.startswith("prompt.") for k in source)
    sid = str(builtin_schedule_id("i18n_translate_pending"))
    ScheduleService(rt).modify(sid, {"args": {"limit": len(source)}})
    drafts = {k: "DE " + v for k, v in source.items()}
    drafts["prompt.planner"] = "DE {{stepN.field} halb verdoppelt"  # a lone brace: it cannot be filled
    with ScriptedLLM([text(json.dumps(drafts, ensure_ascii=False))]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        record = Scheduler(rt, models=wiring.llm_router(rt.workspace).for_tier).run_now(sid)
    assert record["ok"], record
    assert set(orjson.loads(llm.requests[0].messages[-1]["content"])["texts"]) == set(source)
    written = [e for e in rt.log.events.get(digest_id("i18n_translate_pending"))][-1]
    assert written.figures["drafted"] == {"de": sorted(set(source) - {"prompt.planner"})}
    assert "braces do not parse" in written.figures["refused"]["de"]["prompt.planner"]
    rows = {r["language"]: r for r in orjson.loads(cli(capsys, "i18n", "status", "--json")[1])}
    assert rows["de"]["drafts"] == len(source) - 1 and rows["de"]["missing"] == len(source)


def test_a_translation_whose_english_changed_is_stale_and_english_is_said(rt: Runtime, capsys) -> None:
    text_key = "failure.step_refused"
    path = rt.workspace.i18n_dir / "it.json"
    i18n.write(path, "it", {text_key: {"text": "Rifiutato: {detail}", "source_hash": i18n.source_hash("an older English")}})
    rows = {r["language"]: r for r in orjson.loads(cli(capsys, "i18n", "status", "--json")[1])}
    assert rows["it"]["stale"] == 1 and rows["it"]["missing"] == 1
    catalogue = i18n.load(rt.workspace.i18n_dir)
    assert catalogue.text(text_key, "it", detail="x") == "Not done: x"


def test_a_turn_in_italian_is_told_in_italian(home: Path, capsys, monkeypatch) -> None:
    for request, said in (("trova i file pdf nella cartella documenti", "Il modello linguistico ha dato una risposta che non ho potuto usare"),
                          ("find the pdf files in my documents folder", "The language model gave a reply I could not use")):
        with ScriptedLLM([malformed(), malformed(), malformed()]) as llm:
            monkeypatch.setenv("METNOS_LLM_URL", llm.url)
            monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
            code, _, err = cli(capsys, "ask", request)
        assert code != 0 and f"metnos: {said}" in err, err


def test_a_request_not_in_english_asks_the_answer_in_its_language_and_replays_exactly(home: Path, capsys, monkeypatch) -> None:
    """The model is asked to answer in the request's language by a line after the request, only when it is not English
    (an English request is sent byte for byte as before); the language is recorded, the approval the turn could not ask
    is said in it, and the turn replays exactly."""
    asking = {"it": "Answer me in Italian, the language of my request."}
    no_terminal = {"it": "metnos: passo 1: write_files chiede la tua approvazione e non c'è un terminale su cui chiederla",
                   "en": "metnos: step 1: write_files needs your approval and there is no terminal to ask on"
                         " (standard input is closed or not a terminal); taken as no. --yes approves, --no declines.\n"}
    refused = {"it": "Non fatto: write_files non è stato approvato: l'utente non ha approvato write_files; non va ritentato",
               "en": "Not done: write_files was not approved: the user did not approve write_files; do not retry it"}
    recorded = {"it": "Non fatto: write_files was not approved: the user did not approve write_files; do not retry it",
                "en": refused["en"]}
    for language, request in (("it", "salva una nota nel file todo.md: compra il latte domani mattina"),
                              ("en", "save a note to the file todo.md: buy milk tomorrow morning")):
        script = [call("write_files", {"files": [{"path": str(home / "todo.md"), "content": "- milk\n"}]}), text("ok")]
        with ScriptedLLM(script) as llm:
            monkeypatch.setenv("METNOS_LLM_URL", llm.url)
            monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
            code, out, err = cli(capsys, "ask", request, "--json", "--no-cache")
        sent = llm.requests[0].messages[1]
        assert sent["role"] == "user"
        assert sent["content"] == (f"{request}\n\n{asking[language]}" if language in asking else request), sent
        assert no_terminal[language] in err, err
        told = orjson.loads(out)
        assert told["failure"]["message"] == refused[language], told["failure"]
        turn_id = told["turn_id"]
        events = [orjson.loads(line) for line in cli(capsys, "events", "--json", "--aggregate", turn_id)[1].splitlines()]
        assert events[0]["state"]["language"] == language
        # The event keeps the refusal's English words, as it always did: only the person is told them in Italian.
        failed = next(e for e in events if e["topic"].endswith("TurnFailed"))
        assert failed["state"]["message"] == recorded[language], failed
        code, out, _ = cli(capsys, "replay", turn_id, "--json")
        assert code == 0, out


def test_a_command_speaks_the_configured_or_locale_language_and_english_is_unchanged(home: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    monkeypatch.delenv("METNOS_LANGUAGE", raising=False)
    argv = ("schedule", "add", "every morning at 8", "--executor", "get_now", "--channel", "none")
    said = {
        "C.UTF-8": ("'every morning at 8' reads as cron '0 8 * * *' in ",
                    "metnos: a cadence in words is used only once confirmed: run again with --yes, or give --cron\n"),
        "it_IT.UTF-8": ("'every morning at 8' si legge come cron '0 8 * * *' in ",
                        "metnos: una cadenza a parole si usa solo una volta confermata: esegui di nuovo con --yes, o dai --cron\n"),
    }
    for locale, (reading, refusal) in said.items():
        monkeypatch.setenv("LANG", locale)
        code, _, err = cli(capsys, *argv)
        assert code != 0 and err.startswith(reading) and err.endswith(refusal), err
    # Metnos's own setting wins over the locale; a language with no catalogue is English.
    monkeypatch.setenv("METNOS_LANGUAGE", "it")
    assert i18n.command_language() == "it"
    monkeypatch.setenv("METNOS_LANGUAGE", "fr")
    assert i18n.command_language() == "en"


def test_an_online_plan_for_an_italian_request_is_asked_in_italian_and_replays_exactly(home: Path, capsys, monkeypatch) -> None:
    (home / "note").mkdir()
    (home / "note" / "latte.md").write_text("comprare il latte")
    request = "trova i file markdown nella cartella delle note"
    planned = orjson.dumps({"steps": [{"executor": "find_files", "args": {"base_path": "~/note", "pattern": "*.md"}}],
                            "answer": "Trovato: {{step1.entries.0.path}}"}).decode()
    with ScriptedLLM([text(planned)]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out, err = cli(capsys, "ask", request, "--json", "--no-cache", "--mode", "online")
    assert code == 0, (out, err)
    assert llm.requests[0].messages[-1]["content"] == f"{request}\n\nAnswer me in Italian, the language of my request."
    code, replayed, _ = cli(capsys, "replay", orjson.loads(out)["turn_id"], "--json")
    assert code == 0, replayed


def test_who_answered_is_said_in_the_request_language_whatever_the_command_language(home: Path, capsys, monkeypatch) -> None:
    """`ask`'s "answered by" line, and the line for each step off a terminal, are the turn's words: in
    the request's language (Italian for an Italian request, English for an English one even under
    METNOS_LANGUAGE=it)."""
    monkeypatch.setenv("METNOS_LANGUAGE", "it")
    (home / "notes").mkdir()
    (home / "notes" / "todo.txt").write_text("buy milk")
    said = {
        "leggi la mia lista delle cose da fare in ~/notes/todo.txt":
            ("metnos: passo 1: read_files\nmetnos: sto pensando (giro 1) …\n",
             "metnos: ha risposto scripted-model (livello wise, 2 chiamate come proposer)\n"),
        "read my todo list in ~/notes/todo.txt":
            ("metnos: step 1: read_files\nmetnos: thinking (round 1) …\n",
             "metnos: answered by scripted-model (wise tier, 2 calls as proposer)\n"),
    }
    for request, (step, by) in said.items():
        with ScriptedLLM([call("read_files", {"paths": ["~/notes/todo.txt"]}), text("todo.txt: buy milk")]) as llm:
            monkeypatch.setenv("METNOS_LLM_URL", llm.url)
            monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
            code, out, err = cli(capsys, "ask", request, "--no-cache")
        assert code == 0 and out == "todo.txt: buy milk\n", err
        assert err.startswith(step) and err.endswith(by), err


def test_synt_asks_at_its_gates_in_the_command_language(home: Path, capsys, monkeypatch) -> None:
    """Under METNOS_LANGUAGE=it synt asks its gates in Italian on a terminal and takes "s" for yes, and
    with no terminal says in Italian how to approve later."""
    from tests.integration.test_synt_generate import draft, spec_reply

    monkeypatch.setenv("METNOS_LANGUAGE", "it")

    class Terminal:
        closed = False

        def isatty(self) -> bool:
            return True

    prompts: list[str] = []
    replies = iter(["s", "n"])
    with monkeypatch.context() as terminal, ScriptedLLM([text(spec_reply()), text(draft())]) as llm:
        terminal.setattr("sys.stdin", Terminal())
        terminal.setattr("builtins.input", lambda prompt: prompts.append(prompt) or next(replies))
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out, _ = cli(capsys, "synt", "generate", "count the words of a text")
    # "s" approved the specification (the draft was written and tested), "n" declined the code.
    assert prompts == ["approvi la specifica? [s/N] ", "approvi il codice? [s/N] "], prompts
    assert code == 3 and "rejected" in out, out

    with ScriptedLLM([text(spec_reply(name="compute_lines"))]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        code, _, err = cli(capsys, "synt", "generate", "count the lines of a text")
    waiting = [p for p in orjson.loads(cli(capsys, "synt", "list", "--json")[1])["proposals"] if p["status"] == "awaiting_spec"]
    run_id = waiting[0]["run_id"]
    assert code == 0 and (f"metnos: la proposta {run_id} aspetta che approvi la specifica: `metnos synt approve {run_id}` "
                          f"o `metnos synt reject {run_id} --reason ...`\n") in err, err


def test_the_error_lines_of_every_command_are_said_in_the_command_language(home: Path, capsys, monkeypatch) -> None:
    """The lines `metnos` itself prints for an unexpected error and an interruption follow METNOS_LANGUAGE."""
    from metnos.adapters.cli import turns_cmd

    def broken(args):  # noqa: ANN001, ANN202 - a bug planted in a command
        return {}["missing"]

    def stopped(args):  # noqa: ANN001, ANN202 - Ctrl-C outside a turn
        raise KeyboardInterrupt

    monkeypatch.setattr(turns_cmd, "run_list", broken)
    monkeypatch.setenv("METNOS_LANGUAGE", "it")
    code, _, err = cli(capsys, "turns", "list")
    assert code == 70 and err == ("metnos: errore inatteso: KeyError: 'missing' (un difetto di Metnos; "
                                  "esegui con --debug o METNOS_DEBUG=1 per vedere dove)\n"), err
    monkeypatch.setattr(turns_cmd, "run_list", stopped)
    assert cli(capsys, "turns", "list")[1:] == ("", "metnos: interrotto\n")
    monkeypatch.setenv("METNOS_LANGUAGE", "en")
    assert cli(capsys, "turns", "list")[1:] == ("", "metnos: interrupted\n")


def test_with_metnos_language_it_the_help_a_listing_and_an_error_are_italian(home: Path, capsys, monkeypatch) -> None:
    """The command line's own words follow METNOS_LANGUAGE: argparse's (usage, options), every help line
    (from the catalogue's ``help.*``), a listing's header and an error raised in English; English is unchanged."""
    monkeypatch.setenv("METNOS_LANGUAGE", "it")
    with pytest.raises(SystemExit) as done:
        cli(capsys, "--help")
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert out.startswith("uso: metnos ") and "argomenti posizionali:" in out and "chiedi qualcosa a Metnos, a parole" in out, out
    with pytest.raises(SystemExit):
        cli(capsys, "schedule", "add", "--help")
    out = capsys.readouterr().out
    assert "  -h, --help            mostra questo aiuto ed esci" in out and "l'esecutore da eseguire a ogni scatto" in out, out
    code, out, _ = cli(capsys, "turns", "list")
    assert code == 0 and out.splitlines()[0] == f"{'TURNO':<36}  {'INIZIO (UTC)':<19}  {'STATO':<12} {'PASSI':>5}  RICHIESTA", out
    code, _, err = cli(capsys, "turns", "show", "zzzz")
    assert code == 2 and err == "metnos: nessun turno inizia con 'zzzz'; vedi `metnos turns list`\n", err
    code, _, err = cli(capsys, "i18n", "add", "Francese")
    assert code == 2 and err == ("metnos: 'Francese' non è un codice di lingua: scrivi il suo codice ISO 639-1, "
                                 "due lettere minuscole (fr, de, es)\n"), err
    monkeypatch.setenv("METNOS_LANGUAGE", "en")
    code, out, _ = cli(capsys, "turns", "list")
    assert out.splitlines()[0].startswith("TURN ") and "STARTED (UTC)" in out
    code, _, err = cli(capsys, "turns", "show", "zzzz")
    assert err == "metnos: no turn starts with 'zzzz'; see `metnos turns list`\n", err
    with pytest.raises(SystemExit):
        cli(capsys, "--help")
    assert capsys.readouterr().out.startswith("usage: metnos ")


def test_errors_real_commands_raise_are_said_in_italian_and_english_is_byte_identical(home: Path, capsys, monkeypatch) -> None:
    """Errors raised in English by real commands (an unknown turn, a bad cron, a schedule that does not exist, a
    wrong METNOS_* setting, a flag out of range) are said by their error.* templates under METNOS_LANGUAGE=it,
    a field that is a message of its own included (an invalid setting's reason); without it they are the raised
    English, byte for byte (tests/unit/test_error_catalogue.py holds every raise site to its template)."""
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
    cases = [
        ({}, ("replay", "zzzz"),
         "no turn starts with 'zzzz'; see `metnos turns list`",
         "nessun turno inizia con 'zzzz'; vedi `metnos turns list`"),
        ({}, ("schedule", "add", "--cron", "nope", "--executor", "get_now", "--channel", "none"),
         "'nope' is not a cron expression (five fields, e.g. '*/5 * * * *', or @daily; optionally followed by a week rule such as /2w@2026-12-01)",
         "'nope' non è un'espressione cron (cinque campi, per es. '*/5 * * * *', o @daily; seguiti se vuoi da una regola di settimana come /2w@2026-12-01)"),
        ({}, ("schedule", "pause", "zz99"),
         "no schedule 'zz99'; see `metnos schedule list`",
         "nessuna pianificazione 'zz99'; vedi `metnos schedule list`"),
        ({}, ("mnestome", "list", "--limit", "0"),
         "--limit must be at least 1",
         "--limit deve essere almeno 1"),
        ({"METNOS_CAP_STEPS": "5000"}, ("turns", "list"),
         "METNOS_CAP_STEPS='5000' is invalid: must be an integer in [1, 1000]",
         "METNOS_CAP_STEPS='5000' non è valido: deve essere un intero in [1, 1000]"),
        ({"METNOS_SANDBOX": "maybe"}, ("turns", "list"),
         "the sandbox cannot run executors: METNOS_SANDBOX='maybe' is not a setting it knows; set METNOS_SANDBOX to on "
         "(the default, also 1, yes, true) or off (also 0, no, false), or unset it",
         "la sandbox non può eseguire gli esecutori: METNOS_SANDBOX='maybe' non è un valore che conosce; imposta METNOS_SANDBOX "
         "a on (il predefinito, anche 1, yes, true) o off (anche 0, no, false), o toglila"),
    ]
    for env, argv, english, italian in cases:
        with monkeypatch.context() as setting:
            for name, value in env.items():
                setting.setenv(name, value)
            setting.delenv("METNOS_LANGUAGE", raising=False)
            code, _, err = cli(capsys, *argv)
            assert code == 2 and err == f"metnos: {english}\n", err
            setting.setenv("METNOS_LANGUAGE", "en")
            assert cli(capsys, *argv)[2] == f"metnos: {english}\n"
            setting.setenv("METNOS_LANGUAGE", "it")
            code, _, err = cli(capsys, *argv)
            assert code == 2 and err == f"metnos: {italian}\n", err
