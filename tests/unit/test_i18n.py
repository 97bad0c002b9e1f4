"""The texts catalogue: English and Italian complete, stale translations, the request's language."""

from __future__ import annotations

from types import SimpleNamespace

from metnos.runtime.turn.failures import FailureKind, turn_failure
from metnos.runtime.turn.telling import reply_text, unverified_lines
from metnos.settings import i18n
from metnos.settings.i18n.detect import language_of


def test_english_and_italian_are_complete_and_keep_every_field() -> None:
    catalogue = i18n.load()
    assert catalogue.languages() == ["en", "it"]
    assert catalogue.missing("it") == [] and catalogue.stale("it") == []
    assert set(catalogue.translations["it"]) == set(catalogue.source)
    for key, english in catalogue.source.items():
        assert i18n.fields_of(catalogue.translations["it"][key]["text"]) == i18n.fields_of(english), key


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
