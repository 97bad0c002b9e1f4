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


def test_one_slip_of_typing_meets_a_long_word_and_a_short_one_only_swapped() -> None:
    lexicon = Lexicon(["rename", "delete", "overwrite", "move", "send"])
    assert lexicon.meets("renmae") == {"rename"}  # two neighbours swapped
    assert lexicon.meets("delte") == {"delete"}  # a letter missing
    assert lexicon.meets("overwirte") == {"overwrite"}
    # Four letters: two neighbours swapped is a slip; a letter changed, missing or added is as often another word.
    assert lexicon.meets("mvoe") == {"move"}
    assert lexicon.meets("sned") == {"send"}
    assert lexicon.meets("mode") == frozenset()
    assert lexicon.meets("sent") == frozenset()
    assert lexicon.meets("vmo") == frozenset()
    assert lexicon.meets("sned", typos=False) == frozenset()
    assert lexicon.meets("deletes") == {"delete"}
    assert lexicon.meets("renmae", typos=False) == frozenset()
    assert lexicon.meets("dlt") == frozenset()
