"""An answer Metnos composes from the data (metnos/runtime/turn/composing.py): the fields the request names come with each entry."""

from __future__ import annotations

from metnos.runtime.turn.composing import compose_answer

CONTACT = {"ok": True, "entries": [{"name": "Dora Bellini", "emails": [{"value": "dora@example.org", "type": "home"}],
                                    "phones": [{"value": "+39 333 000 1111", "type": "cell"}], "note": ""}]}


def test_a_field_the_request_names_comes_with_the_entry() -> None:
    # The 0.5B read the contact, and the composed answer gave the name alone: `answered`, and wrong.
    assert compose_answer([CONTACT], "What's Dora's phone number?") == "Dora Bellini; phones: +39 333 000 1111 (cell)"
    assert compose_answer([CONTACT], "dora's email please") == "Dora Bellini; emails: dora@example.org (home)"


def test_an_entry_is_its_name_when_the_request_names_no_field() -> None:
    assert compose_answer([CONTACT], "who is in my address book?") == "Dora Bellini"
    assert compose_answer([CONTACT]) == "Dora Bellini"
