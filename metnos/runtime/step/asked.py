"""Which side effects a request asks for, read from its words by rules.

An executor with side effects is offered only when the request names its
action (metnos/runtime/turn/shortlist.py): one of its action tags
(:func:`metnos.runtime.step.prefilter.action_tags`) or the verb of its name. A tag's
word is met in any of its forms (:mod:`metnos.runtime.step.wording`: "removing",
"cancellare", "mandami", "delte"); a tag of several words is met only whole.
A tag's "someone" (:data:`PERSON_WORDS`) is met by a name: a capitalised word
right after the word that met the tag's verb, or after "to" or "a" that
follows it ("tell Ginevra", "scrivi a Tobia"), or after "to" or "a" later in
the clause the verb opens ("message the total to Ugo"); "tell me" names
nobody. A someone between two words of its tag is met by any word that is
not a function word ("let ottavio know"; not "let me know"). A verb that also
names what a reader reads ("message": read_messages reads messages) asks for
a message when it opens its clause and a person follows it ("message me the
list"): a reply is not a message, as it is what "tell me" asks for.

These readings of the request keep a named action from counting:

* what the request names as a path or URL is a name, not a word of it
  ("read ~/notes/delete_me.txt" asks for nothing to be deleted);
* a plural of an English gerund names a thing, not an action: "settings"
  is not "set", "savings" not "save";
* the first word of a hyphenated compound is a noun ("a send-off", "the
  run-time"), and so is a word after a quantifier ("each move", "ogni
  invio"); "add up" is a sum, not an append;
* a past participle says what was done or names a thing, and a form in -s
  what something does or a plural, never an instruction: "the deleted
  photos", "what's written there", "cosa ho mandato a Ugo", "il file
  eliminato", "what it runs" (an imperative has neither);
* an action word right after a negation or a first-person subject, within
  :data:`CONTEXT_WORDS` words, is not asked of the runtime: "don't delete
  anything", "senza eliminare", "before I send it", "prima di spedirla";
* in a clause that opens with a question word, an action word after an
  article, a possessive or a demonstrative and a word of order ("the last")
  names a thing, not an instruction: "who wrote the latest commit?";
* an action word after an auxiliary of what someone did or does, with its
  subject between, within :data:`REPORTED_WORDS` words, is what that someone
  did, not an instruction: "what did the landlord write me", "has Luisa sent
  the file", "cosa mi ha scritto il padrone di casa". An instruction is an imperative
  or goes through a modal ("can you send"), never through these.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from metnos.runtime.step.intent import without_named_targets
from metnos.runtime.step.text import STOPWORDS, tokens
from metnos.runtime.step.wording import Lexicon

CONTEXT_WORDS = 2
# Negations, English and Italian: a closed class of function words ("don't" is tokenised "don", "t").
NEGATIONS: frozenset[str] = frozenset("not no never without don dont doesn won non senza mai".split())
# An action word after these is not asked of the runtime: the negations, those that report ("didn't"), the
# auxiliaries in -n't, and first-person subjects ("prima di" is "before").
NOT_ASKED_AFTER: frozenset[str] = NEGATIONS | frozenset(
    "didn isn aren wasn weren hasn haven hadn shouldn wouldn couldn cannot i we before prima".split()
)

# Auxiliaries that report what someone did or does ("did", "has", Italian "ha", "hanno"): a closed
# class. "do" and "have" are left out: "do send it", "I have to send it" are instructions.
REPORTED_AFTER: frozenset[str] = frozenset("did does has had ha hanno aveva avevano".split())
REPORTED_WORDS = 4
# Words that start another clause between an auxiliary and a verb: "the file Luisa has, and send it".
CLAUSE_JOINS: frozenset[str] = frozenset("and then or but e poi o ma".split())

# Articles, possessives and demonstratives, English and Italian, and the few adjectives of order
# that stand between them and a noun ("the last commit", "l'ultimo invio"): a closed class. In a
# question, an action word after one of them and a word of order names a thing, not an instruction
# ("who wrote the latest commit" asks for no commit). Outside a question it may name the action's
# object, which some executors take as their tag ("forward the last message").
DETERMINERS: frozenset[str] = frozenset(
    "the a an my your his her its our their this that these those "
    "il lo la l i gli le un uno una mio mia miei mie tuo tua suo sua questo questa quel quello quella "
    # Italian articles joined to a preposition ("dell'ultimo commit", "nella cartella").
    "del dello della dell dei degli delle al allo alla all ai agli alle dal dallo dalla dall dai dagli dalle "
    "nel nello nella nell nei negli nelle sul sullo sulla sull sui sugli sulle".split()
)
ORDER_WORDS: frozenset[str] = frozenset("last first latest previous next ultimo ultima primo prossimo prossima".split())
# The words a question opens with, English and Italian: a closed class.
QUESTION_WORDS: frozenset[str] = frozenset(
    "what which who whom whose when where why how cosa che qual quale quali chi quando dove perche come quanto quanta quanti quante".split()
)

# In a tag, the word that stands for a person ("tell someone"): met by a name, a capitalised word
# right after the tag's verb or after "to" or "a" that follows it ("tell Ginevra", "scrivi a Tobia").
PERSON_WORDS: frozenset[str] = frozenset("someone somebody qualcuno".split())
_ADDRESSEE = re.compile(r"(?=\b([^\W\d_]+)[ \t]+(?:(?:to|a|ad)[ \t]+)?([^\W\d_][^\W_]*))")
# The words that mark whom something goes to, after the verb in its clause ("message the total to Ugo").
TO_PERSON: frozenset[str] = frozenset("to a ad".split())
# Object pronouns of a person, English and Italian: a closed class ("message me", "scrivimi" is a clitic).
PERSON_PRONOUNS: frozenset[str] = frozenset("me us him her them mi ci gli le".split())
_CLAUSE_BREAK = re.compile(r"[?!;:,]|\.(?=\s|$)")


def _name(word: str) -> bool:
    return word[:1].isupper() and word.casefold() not in STOPWORDS


def _addressed(request_text: str, media: frozenset[str] = frozenset()) -> frozenset[str]:
    """The request's words followed by a name (or, for ``media``, by a person), as :func:`tokens` gives them."""
    text = without_named_targets(request_text)
    found = set()
    for m in _ADDRESSEE.finditer(text):
        verb, name = m.group(1), m.group(2)
        if _name(name):
            found.update(tokens(verb))
    for clause in _clauses(text):
        opener = tokens(clause[0])
        if not opener:
            continue
        later = list(zip(clause[1:], clause[2:]))
        if any(marker.casefold() in TO_PERSON and _name(name) for marker, name in later):
            found.update(opener)
        if set(opener) & media and len(clause) > 1 and (clause[1].casefold() in PERSON_PRONOUNS or _name(clause[1])):
            found.update(opener)
    return frozenset(found)


def _clauses(text: str) -> list[list[str]]:
    """The words of each clause of ``text``, as written: split at punctuation and at a word that joins clauses."""
    out: list[list[str]] = []
    for part in _CLAUSE_BREAK.split(text):
        clause: list[str] = []
        for word in re.findall(r"[^\W_]+", part):
            if word.casefold() in CLAUSE_JOINS:
                if clause:
                    out.append(clause)
                clause = []
            else:
                clause.append(word)
        if clause:
            out.append(clause)
    return out


def _framed(words: list[str], tag: Iterable[str]) -> bool:
    """The tag's words, two or more, stand in the request in a run with one more word among them, not a function
    word: the tag's someone ("let ottavio know")."""
    wanted = [w for w in tag if w not in PERSON_WORDS]
    if len(wanted) < 2:
        return False
    span = len(wanted) + 1
    for start in range(len(words) - span + 1):
        run = words[start:start + span]
        if run[0] not in wanted or run[-1] not in wanted:
            continue
        inside = run[1:-1]
        others = [w for w in inside if w not in wanted]
        if len(others) == 1 and others[0] not in STOPWORDS and set(wanted) <= set(run):
            return True
    return False


# The quantifiers before a noun, English and Italian: a word right after one is a noun ("each move",
# "ogni invio"), never an imperative. Other determiners are left out: some tags are nouns
# the request names after one ("in my calendar", "on telegram"), and the Italian "la", "lo" are also
# pronouns before a verb ("la mandi a Ugo?").
QUANTIFIERS: frozenset[str] = frozenset("every each per ogni ciascun ciascuno ciascuna".split())
# English phrasal verbs whose particle makes another verb of a tag's word: "add up" is a sum, not an append.
OTHER_PHRASAL: frozenset[tuple[str, str]] = frozenset({("add", "up")})
_COMPOUND_FIRST = re.compile(r"([^\W\d_]+)-(?=[^\W\d_])")


def _compound_firsts(text: str) -> Counter[str]:
    """How often each word stands first in a hyphenated compound ("a send-off", "the run-time"): a noun there."""
    return Counter(tokens(" ".join(_COMPOUND_FIRST.findall(text))))


# English nouns made from a verb's -ing form, in the plural ("settings", "savings", "meetings").
_NAMED_THINGS = "ings"
# The endings of a past participle: English (regular, and "-en" as in "written", "taken") and Italian
# (masculine and feminine, singular and plural: "salvato", "eliminata", "spediti"); a closed class of
# grammar. The Italian "-ate" and "-ite" are left out: they are also a plural imperative ("cancellate").
_EN_PARTICIPLE = ("ed", "d", "en", "n")  # "-d" after an "e": "moved", "saved"
_IT_PARTICIPLE = re.compile(r"(?:at|it|ut)[oai]$")


def _not_an_instruction(word: str, met: frozenset[str], lexicon: Lexicon) -> bool:
    """``word`` meets ``met`` as a participle or a form in -s of it, which an imperative never is: the tag
    word itself (a tag may well be "commands") is not taken out, nor a slip of typing ("sedn")."""
    if word in met:
        return False
    for ending in (*_EN_PARTICIPLE, "s", "es"):
        base = word[:-len(ending)]
        if word.endswith(ending) and len(base) >= 2 and (
                base in met or base + "e" in met or lexicon.meets(base, typos=False, short_stems=False) & met):
            return True
    return bool(_IT_PARTICIPLE.search(word)) and not any(_IT_PARTICIPLE.search(tag) for tag in met)


@dataclass(frozen=True)
class AskedAction:
    name: str
    words: tuple[str, ...]  # the request's words that named it
    tag: tuple[str, ...]  # the tag (or name verb) they met


class ActionWords:
    """The action tags of a catalogue's executors with side effects, ready to meet a request."""

    def __init__(self, tags: Mapping[str, Iterable[frozenset[str]]], media: Iterable[str] = (),
                 known: Iterable[str] = ()) -> None:
        """``media``: the words of person tags that also name what a reader reads ("message"); ``known``:
        the catalogue's words, each of which is itself, not a slip of typing of another ("posta" is
        read_messages's mail, not "sposta" mistyped)."""
        self.tags = {name: tuple(tuple(sorted(tag)) for tag in found) for name, found in tags.items()}
        self.lexicon = Lexicon(word for found in self.tags.values() for tag in found for word in tag)
        self.media = frozenset(media)
        self.known = frozenset(known)

    def asked(self, request_text: str) -> dict[str, AskedAction]:
        """The executors with side effects whose action the request asks for, each with why."""
        meant = self._meant_words(request_text)
        addressed: frozenset[str] | None = None
        plain: list[str] | None = None
        found: dict[str, AskedAction] = {}
        for name, tags in self.tags.items():
            for tag in tags:
                words = [word for word in tag if word not in PERSON_WORDS]
                used = [next((w for w, met in meant if word in met), None) for word in words]
                if not all(u is not None for u in used):
                    continue
                if len(words) < len(tag):
                    # The tag's own word ("tell someone"), or a name after one of the words that met it.
                    person = next((w for w, met in meant if met & PERSON_WORDS), None)
                    addressed = _addressed(request_text, self.media) if addressed is None else addressed
                    if person is None and not addressed & set(used):
                        plain = tokens(without_named_targets(request_text)) if plain is None else plain
                        if not _framed(plain, tag):
                            continue
                found[name] = AskedAction(name, tuple(u for u in used if u is not None), tag)
                break
        return found

    def meant(self, request_text: str) -> frozenset[str]:
        """The request's words that meet a tag as an instruction would: not negated, reported, a participle..."""
        return frozenset(word for word, _ in self._meant_words(request_text))

    def _meant_words(self, request_text: str) -> list[tuple[str, frozenset[str]]]:
        text = without_named_targets(request_text)
        words = tokens(text)
        compounds = _compound_firsts(text)
        out = []
        for i, word in enumerate(words):
            if word in STOPWORDS or NOT_ASKED_AFTER & set(words[max(0, i - CONTEXT_WORDS):i]):
                continue
            if _reported(words, i) or _named_thing(words, i):
                continue
            if compounds[word] and compounds[word] >= words.count(word):
                continue
            if i >= 1 and words[i - 1] in QUANTIFIERS:
                continue
            if i + 1 < len(words) and (word, words[i + 1]) in OTHER_PHRASAL:
                continue
            if word.endswith(_NAMED_THINGS):
                continue
            met = self.lexicon.meets(word, typos=word not in self.known, short_stems=False)
            if met and not _not_an_instruction(word, met, self.lexicon):
                out.append((word, met))
        return out


# The verbs that say any change at all, English and Italian, in their stems: a closed class. After one of
# the NEGATIONS: "don't touch it", "non modificare nulla".
CHANGE_VERBS = Lexicon("change modify touch alter edit cambiare modificare toccare alterare".split())
# What "change nothing" says its object is: anything, or what the request named (a pronoun); closed classes.
ANY_OBJECT: frozenset[str] = frozenset("anything nothing it them niente nulla alcunche".split())
_CLITIC_OBJECT = re.compile(r"(?:ar|er|ir)(?:lo|la|li|le)$")


def forbids_change(request_text: str) -> bool:
    """Whether the request says to change nothing: a negation right before a verb of any change, within
    :data:`CONTEXT_WORDS` words, whose object is anything or what was named ("only look, don't change
    it", "senza modificare niente"), or that ends its clause. "don't change the other files" names what to
    leave alone, not that nothing may change."""
    for part in _CLAUSE_BREAK.split(without_named_targets(request_text)):
        words = tokens(part)
        for j, word in enumerate(words):
            if word not in NEGATIONS:
                continue
            for k in range(j + 1, min(len(words), j + 1 + CONTEXT_WORDS)):
                if CHANGE_VERBS.meets(words[k], typos=False, short_stems=False) and (
                        k + 1 == len(words) or words[k + 1] in ANY_OBJECT or _CLITIC_OBJECT.search(words[k])):
                    return True
    return False


# A sentence ends at ? ! ; or a full stop before a space (a path's dots are taken out before).
_SENTENCES = re.compile(r"[^?!;]*?(?:[?!;]|\.(?=\s|$)|$)")
# Words that turn a question into a request ("can you send it?", "puoi cancellarlo?"): a closed class.
ASKING_WORDS: frozenset[str] = frozenset("can could would will puoi potresti potete riesci riusciresti".split())
# A question's first word when it asks yes or no ("is there a file called x?").
YES_NO_OPENERS: frozenset[str] = frozenset("am is are was were do does did has have any anything e ci c".split())


def asks_only_questions(request_text: str) -> bool:
    """Whether every clause of the request asks a question and none asks for something to be done.

    A clause asks a question when it opens with a question word ("what", "how much", "quale") or,
    as its sentence's first clause, ends with a question mark; a clause with "can", "could",
    "puoi"... in it asks for something to be done ("can you send it to Luca?"), and so does one
    that opens with a verb ("which is the largest? delete it"). An executor with side effects
    offered for a question is a means ("how much space does the folder take": a command), not
    what was asked: the answer in words may stand."""
    text = without_named_targets(request_text)
    clauses = 0
    for sentence in _SENTENCES.findall(text):
        marked = sentence.strip().endswith("?")
        words = tokens(sentence)
        chunks: list[list[str]] = [[]]
        for k, word in enumerate(words):
            # "qual è", its accent folded away, is "qual e": that "e" is the verb, not "and".
            if word in CLAUSE_JOINS and not (word == "e" and k >= 1 and words[k - 1] in QUESTION_WORDS):
                chunks.append([])
            else:
                chunks[-1].append(word)
        for n, chunk in enumerate(c for c in chunks if c):
            clauses += 1
            if ASKING_WORDS & set(chunk):
                return False
            if not (chunk[0] in QUESTION_WORDS or (n == 0 and marked and chunk[0] in YES_NO_OPENERS)):
                return False
    return clauses > 0


def _named_thing(words: list[str], i: int) -> bool:
    """``words[i]``, in a clause that asks a question, is a noun: after a determiner and a word of
    order ("the last", "l'ultimo"). A determiner alone is not enough: the tags of some executors
    are nouns ("which is my repository" may well want a command run)."""
    start = max((j + 1 for j in range(i) if words[j] in CLAUSE_JOINS), default=0)
    # "qual è", its accent folded away, reads as "qual e": the "e" there is the verb, not "and".
    if start >= 2 and words[start - 1] == "e" and words[start - 2] in QUESTION_WORDS:
        start -= 2
    if words[start] not in QUESTION_WORDS:
        return False
    return i >= 2 and words[i - 1] in ORDER_WORDS and words[i - 2] in DETERMINERS


def _reported(words: list[str], i: int) -> bool:
    """``words[i]`` is what a subject did, after an auxiliary in the same clause."""
    for back in range(i - 1, max(-1, i - REPORTED_WORDS - 1), -1):
        if words[back] in CLAUSE_JOINS:
            return False
        if words[back] in REPORTED_AFTER:
            return True
    return False
