"""The texts catalogue: English and Italian complete, stale translations, the request's language."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from types import SimpleNamespace

from metnos.mechanisms.executors.install import seed_sources
from metnos.mechanisms.executors.manifest import ManifestError, load_manifest, parse_manifest
from metnos.runtime.executor_texts import key, said, with_executors
from metnos.runtime.turn.failures import FailureKind, turn_failure
from metnos.runtime.turn.telling import reply_text, unverified_lines
from metnos.settings import i18n
from metnos.settings.i18n.detect import language_of


def _with_seeds(catalogue: i18n.Catalogue) -> i18n.Catalogue:
    """The catalogue with the shipped seed executors' summaries and descriptions, as a workspace that installed them has."""
    seeds = {src.name: SimpleNamespace(manifest=load_manifest(src / "manifest.toml")) for src in seed_sources()}
    return with_executors(catalogue, seeds)


def test_english_and_italian_are_complete_and_keep_every_field() -> None:
    catalogue = _with_seeds(i18n.load())
    assert catalogue.languages() == ["en", "it"]
    assert any(k.startswith("executor.read_files.") for k in catalogue.source)
    assert catalogue.missing("it") == [] and catalogue.stale("it") == []
    assert set(catalogue.translations["it"]) == set(catalogue.source)
    for key, english in catalogue.source.items():
        assert i18n.fields_of(catalogue.translations["it"][key]["text"]) == i18n.fields_of(english), key


def test_an_executor_description_is_said_translated_only_while_its_english_is_the_one_translated() -> None:
    seed = next(src for src in seed_sources() if src.name == "read_files")
    manifest = load_manifest(seed / "manifest.toml")
    english, italian = manifest.description["en"], manifest.description["it"]
    catalogue = with_executors(i18n.load(), {"read_files": SimpleNamespace(manifest=manifest)})
    assert said(catalogue, "read_files", "description", "it", english) == italian
    assert said(catalogue, "read_files", "description", "en", english) == english
    assert said(catalogue, "read_files", "summary", "it", "") == "Legge il testo di uno o più file."

    # The English changed and the manifest still names the hash of the old one: English is said, and owed.
    changed = manifest.model_copy(update={"description": {"en": english + " Changed.", "it": italian}})
    catalogue = with_executors(i18n.load(), {"read_files": SimpleNamespace(manifest=changed)})
    assert said(catalogue, "read_files", "description", "it", english + " Changed.") == english + " Changed."
    assert key("read_files", "description") in catalogue.missing("it") and key("read_files", "description") in catalogue.stale("it")

    # A translation that names no English at all is not taken as fresh either.
    unnamed = manifest.model_copy(update={"translated_from": {}})
    catalogue = with_executors(i18n.load(), {"read_files": SimpleNamespace(manifest=unnamed)})
    assert key("read_files", "description") in catalogue.missing("it")

    # A translation promoted into the workspace's catalogue is said when the manifest's is stale; braces stay literal.
    braces = manifest.model_copy(update={"description": {"en": "Read {paths} files.", "it": italian}})
    promoted = i18n.Catalogue(source={}, translations={"it": {key("read_files", "description"): {
        "text": "Legge i file {{paths}}.", "source_hash": i18n.source_hash("Read {{paths}} files.")}}})
    catalogue = with_executors(promoted, {"read_files": SimpleNamespace(manifest=braces)})
    assert said(catalogue, "read_files", "description", "it", "Read {paths} files.") == "Legge i file {paths}."


def test_a_manifest_names_only_translations_it_has_and_as_source_hashes() -> None:
    seed = next(src for src in seed_sources() if src.name == "get_now")
    data = (seed / "manifest.toml").read_text()
    with pytest.raises(ManifestError, match="translated_from names \\['fr'\\]"):
        parse_manifest(data.replace("[translated_from]\n", '[translated_from]\nfr = "sha256:0123456789abcdef"\n').encode())
    with pytest.raises(ManifestError, match="is not a source hash"):
        parse_manifest(re.sub(r'(\[translated_from\]\nit = )"[^"]+"', r'\1"md5:x"', data).encode())


def test_every_way_a_turn_ends_has_its_text() -> None:
    source = i18n.load().source
    assert [k.value for k in FailureKind if f"failure.{k.value}" not in source] == []


def test_a_translation_goes_stale_when_its_english_changes() -> None:
    old, new = "Not done: {detail}", "Nothing was done: {detail}"
    catalogue = i18n.Catalogue(source={"k": new}, translations={"it": {"k": {"text": "Non fatto: {detail}", "source_hash": i18n.source_hash(old)}}})
    assert catalogue.stale("it") == ["k"] and catalogue.missing("it") == ["k"]
    assert catalogue.text("k", "it", detail="x") == "Nothing was done: x"  # English until a fresh one is promoted
    catalogue.translations["it"]["k"]["source_hash"] = i18n.source_hash(new)
    assert catalogue.text("k", "it", detail="x") == "Non fatto: x" and catalogue.stale("it") == []


def test_the_request_language_is_detected_and_english_when_unsure() -> None:
    languages = ["en", "it"]
    assert language_of("trova i file pdf nella cartella documenti", languages) == "it"
    assert language_of("che ore sono", languages) == "it"
    assert language_of("find the pdf files in my documents folder", languages) == "en"
    assert language_of("ok", languages) == "en"
    assert language_of("", languages) == "en"
    # One word is told only when the detector is sure: "hello" leans Italian (0.69) and stays English.
    assert language_of("hello", languages) == "en"
    assert language_of("grazie", languages) == "it"
    # A language with no catalogue is never chosen.
    assert language_of("trova i file pdf nella cartella documenti", ["en"]) == "en"


def test_a_turn_ending_and_its_status_lines_in_the_request_language() -> None:
    assert turn_failure(FailureKind.STEP_REFUSED, "move_files", "it").message == "Non fatto: move_files"
    assert turn_failure(FailureKind.STEP_REFUSED, "move_files").message == "Not done: move_files"
    failure = turn_failure(FailureKind.UNVERIFIED_ANSWER, "a figure", "it")
    outcome = SimpleNamespace(status="unverified", answer="Sono 12.", failure={**failure.to_json(), "unmatched": ["12"]}, quarantined=[])
    assert unverified_lines(outcome, "it") == [
        "non verificata: la risposta non regge al confronto con ciò che i passi hanno restituito (a figure).",
        'non trovato in nulla di ciò che i passi hanno restituito: "12"',
        "la risposta come l'ha scritta il modello, non verificata:", "Sono 12."]
    assert reply_text(outcome, "it").startswith("metnos: non verificata: la risposta")


FROZEN_PROMPTS = Path(__file__).parents[1] / "fixtures" / "prompts_en_frozen.json"


def test_the_prompts_built_from_the_catalogue_are_todays_bytes() -> None:
    """Recorded turns replay against the prompt's exact bytes: the English catalogue must rebuild them unchanged."""
    from metnos.runtime.turn import filler, intent_model, judge, online, prompt, summariser

    built = {
        "prompt.planner": prompt.PLANNER_PROMPT,
        "prompt.placeholder_correction": prompt.PLACEHOLDER_CORRECTION,
        "prompt.final_only": prompt.FINAL_ONLY,
        "prompt.answer_now": prompt.ANSWER_NOW,
        "prompt.answer_from_results": prompt.answer_from_results("REQUEST {x}"),
        "prompt.act_reminder": prompt.act_reminder(["a", "b"]),
        "prompt.answer_correction": prompt.answer_correction("REASON"),
        "prompt.online": online.ONLINE_PROMPT,
        "prompt.online_recovery": online.RECOVERY_PROMPT,
        "prompt.judge": judge.JUDGE_PROMPT,
        "prompt.intent": intent_model.INTENT_PROMPT,
        "prompt.summariser": summariser.SUMMARISER_PROMPT,
        "prompt.filler": filler.FILLER_PROMPT,
        "prompt.filler_rule": filler.FILLER_RULE,
    }
    frozen = json.loads(FROZEN_PROMPTS.read_text(encoding="utf-8"))
    # A text added since (the line asking for the answer in the request's language) is new, not today's.
    assert set(built) == set(frozen) == {k for k in i18n.load().source if k.startswith("prompt.")} - {"prompt.answer_in_language"}
    for key, text in built.items():
        assert text.encode() == frozen[key].encode(), key


def test_the_italian_prompts_keep_the_placeholders_the_model_must_write() -> None:
    catalogue = i18n.load()
    for key in (k for k in catalogue.source if k.startswith("prompt.")):
        values = {name: "X" for name in i18n.fields_of(catalogue.source[key])}
        english, italian = catalogue.text(key, **values), catalogue.text(key, "it", **values)
        assert italian != english, key
        for marker in ("{{step", "{{earlier", "${FILLER:", '"from_step"', '"score"', '"tools"', '"steps"'):
            assert english.count(marker) == italian.count(marker), (key, marker)


def test_the_cli_line_for_an_undecodable_record_gives_the_log_s_own_advice() -> None:
    # The catalogue holds the advice written out (so that it can be translated); it must stay the store's.
    from metnos.mechanisms.store.errors import LOG_DAMAGE_ADVICE

    assert i18n.load().text("cli.record_undecodable", error="E") == f"a record of the log cannot be decoded (E); {LOG_DAMAGE_ADVICE}"
