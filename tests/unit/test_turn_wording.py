"""A request word meets a catalogue word in another form (issue 30, item 6)."""

from __future__ import annotations

from metnos.runtime.step.wording import Lexicon, keys


def test_inflections_meet_by_their_stem_in_english_and_italian() -> None:
    lexicon = Lexicon(["remove", "cancella", "rename"])
    assert lexicon.meets("removing") == {"remove"}
    assert lexicon.meets("removed") == {"remove"}
    assert lexicon.meets("cancellare") == {"cancella"}
    assert lexicon.meets("cancellate") == {"cancella"}
    assert lexicon.meets("read") == frozenset()


def test_an_italian_clitic_pronoun_is_taken_off_the_verb() -> None:
    lexicon = Lexicon(["manda", "salva", "spedire"])
    assert lexicon.meets("mandami") == {"manda"}
    assert lexicon.meets("salvalo") == {"salva"}
    assert lexicon.meets("spedirla") == {"spedire"}
    # Not a verb with a pronoun: the rest does not end as an imperative or an infinitive does.
    assert "cartel" not in keys("cartella")


def test_one_slip_of_typing_meets_a_long_word_only() -> None:
    lexicon = Lexicon(["rename", "delete", "overwrite", "move"])
    assert lexicon.meets("renmae") == {"rename"}  # two neighbours swapped
    assert lexicon.meets("delte") == {"delete"}  # a letter missing
    assert lexicon.meets("overwirte") == {"overwrite"}
    assert lexicon.meets("mvoe") == frozenset()  # too short to tell a slip from another word
    assert lexicon.meets("deletes") == {"delete"}
    assert lexicon.meets("renmae", typos=False) == frozenset()
    assert lexicon.meets("dlt") == frozenset()
