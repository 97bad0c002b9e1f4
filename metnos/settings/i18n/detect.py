"""Which language a request is written in, among those the catalogue speaks.

Lingua (a statistical detector that keeps its models in the wheel, nothing
downloaded) picks among the catalogue's languages only. A request too short
or too mixed to tell (the top language under ``MIN_CONFIDENCE``, or under
``MIN_CONFIDENCE_ONE_WORD`` for a single word) is answered
in English, the catalogue's source: a turn never switches language on a guess.
The same text always gives the same language, so a replayed turn says the
same fixed texts.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from metnos.settings.i18n import SOURCE

MIN_CONFIDENCE = 0.6
# One word is little to go on: Lingua gives "hello" to Italian at 0.69, "ciao" at 0.90.
MIN_CONFIDENCE_ONE_WORD = 0.8


@lru_cache(maxsize=4)
def _detector(languages: tuple[str, ...]) -> tuple[Any, dict[Any, str]]:
    # Imported here: a command that never detects a language does not load the detector.
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    # A language Lingua does not know is never detected; its users write to it in a language it knows.
    known = {Language.from_iso_code_639_1(getattr(IsoCode639_1, code.upper())): code
             for code in languages if hasattr(IsoCode639_1, code.upper())}
    if len(known) < 2:
        return None, {}
    return LanguageDetectorBuilder.from_languages(*known).build(), known


def language_name(code: str) -> str:
    """The English name of a language code (``it`` -> ``Italian``), as the model is told it; the code when Lingua has none."""
    # Imported here, as for detecting: only a turn in a language other than English needs the name.
    from lingua import IsoCode639_1, Language

    if not hasattr(IsoCode639_1, code.upper()):
        return code
    return Language.from_iso_code_639_1(getattr(IsoCode639_1, code.upper())).name.title()


def language_of(text: str, languages: list[str] | tuple[str, ...]) -> str:
    """The code (``en``, ``it``, ...) of ``text``'s language among ``languages``; English when unsure."""
    detector, names = _detector(tuple(sorted(set(languages) | {SOURCE})))
    if detector is None or not text.strip():
        return SOURCE
    values = detector.compute_language_confidence_values(text)
    bar = MIN_CONFIDENCE_ONE_WORD if len(text.split()) == 1 else MIN_CONFIDENCE
    if not values or values[0].value < bar:
        return SOURCE
    return names.get(values[0].language, SOURCE)
