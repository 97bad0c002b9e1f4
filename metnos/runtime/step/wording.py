"""When a word of a request is a word of the catalogue, written another way.

People write "removing", "cancellare", "mandami" and "renmae" where a
manifest says "remove", "cancella", "manda" and "rename". A request word
meets a catalogue word when:

* they share a Snowball stem, English or Italian (each word is stemmed in
  both: requests mix the languages, and a stem shorter than three letters
  is no evidence; where a match asks for an action, one of three only when
  it is one of the words itself);
* the request word is an Italian imperative or infinitive with a clitic
  pronoun attached ("manda"+"mi", "salva"+"lo", "spedir"+"la"), and what is
  left meets it;
* both are at least :data:`TYPO_MIN_LETTERS` letters long and one is the
  other with one slip of typing: a letter missing, added or changed, or two
  neighbours swapped (optimal string alignment distance 1, rapidfuzz);
  words of four letters only with two neighbours swapped ("sedn", "saev"):
  a letter changed in so short a word is as often another word.

No word list of any request is here: stems come from the Snowball
algorithms, the clitic pronouns are the closed class of Italian grammar.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

import snowballstemmer
from rapidfuzz import process
from rapidfuzz.distance import OSA

TYPO_MIN_LETTERS = 5
SWAP_MIN_LETTERS = 4
MIN_STEM = 3

_STEMMERS = (snowballstemmer.stemmer("english"), snowballstemmer.stemmer("italian"))
# Italian clitic pronouns, alone and combined, attached to an imperative
# ("mandami") or to an infinitive that drops its final e ("spedirla").
_CLITIC = re.compile(r"^(?P<verb>\w{3,}?(?:[aei]|ar|er|ir))(?:(?:me|te|ce|ve|se|glie)(?:lo|la|li|le|ne)|mi|ti|ci|vi|si|lo|la|li|le|gli|ne)$")


@lru_cache(maxsize=8192)
def keys(word: str) -> frozenset[str]:
    """The forms under which ``word`` meets another: itself and its stems."""
    forms = {word}
    clitic = _CLITIC.match(word)
    if clitic:
        forms.add(clitic.group("verb"))
    found = set(forms)
    for form in forms:
        for stemmer in _STEMMERS:
            stem = stemmer.stemWord(form)
            if len(stem) >= MIN_STEM:
                found.add(stem)
    return frozenset(found)


class Lexicon:
    """A set of catalogue words, looked up by a request word's forms."""

    __slots__ = ("words", "_by_key", "_long", "_short")

    def __init__(self, words: Iterable[str]) -> None:
        self.words = frozenset(words)
        by_key: dict[str, set[str]] = {}
        for word in self.words:
            for key in keys(word):
                by_key.setdefault(key, set()).add(word)
        self._by_key = by_key
        self._long = sorted(w for w in self.words if len(w) >= TYPO_MIN_LETTERS)
        self._short = frozenset(w for w in self.words if SWAP_MIN_LETTERS <= len(w) < TYPO_MIN_LETTERS)

    def meets(self, word: str, *, typos: bool = True, short_stems: bool = True) -> frozenset[str]:
        """The catalogue words ``word`` is, in another form or (``typos``) with a slip of typing."""
        found: set[str] = set()
        for key in keys(word):
            # Without ``short_stems``, a stem of three letters is evidence only when it is one of the two words
            # itself ("run" for "running"): two words whose stems are the same three letters may share nothing else.
            found |= {w for w in self._by_key.get(key, ()) if short_stems or len(key) > MIN_STEM or key in (word, w)}
        if typos and not found and len(word) >= TYPO_MIN_LETTERS and self._long:
            for match, _, _ in process.extract(word, self._long, scorer=OSA.distance, score_cutoff=1, limit=None):
                found.add(match)
        elif typos and not found and SWAP_MIN_LETTERS <= len(word) < TYPO_MIN_LETTERS:
            found |= {swapped for k in range(len(word) - 1)
                      if (swapped := word[:k] + word[k + 1] + word[k] + word[k + 2:]) in self._short and swapped != word}
        return frozenset(found)
