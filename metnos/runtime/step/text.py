"""Tokenisation shared by the pre-filter and the judge.

seeds/002 ch. 5: "lowercase, alphanumeric words, no accents". Accents are
removed by NFKD decomposition (``città`` -> ``citta``), so an Italian query
typed without accents still meets an accented description. Words are runs
of letters or digits in any script; ``_``, ``-``, ``.`` and ``/`` split
words, so ``read_files`` gives ``read`` and ``files`` and a URL gives its
host parts.
"""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"[^\W_]+")

# Function words of the two languages the seed manifests are written in.
# They carry no signal for choosing an executor and would otherwise match
# nearly every description.
STOPWORDS: frozenset[str] = frozenset(
    """
    a an the and or but if of to in on at by for from with without into onto
    as is are was were be been being it its this that these those there here
    i me my mine you your yours we our us he she him her they them their what
    which who whom whose when where why how all any some no not only just so
    than then too very can could should would will shall may might must do
    does did please also about over under up down out off again each other
    il lo la i gli le un uno una di da del dello della dei degli delle al
    allo alla ai agli alle dal dalla dai dagli dalle nel nello nella nei negli
    nelle sul sulla sui sugli sulle con per tra fra e ed o oppure ma se che
    chi cui non come dove quando quale quali quanto quanti sono sei siamo
    siete ho hai ha abbiamo avete hanno mi ti ci vi si ne mio mia miei mie tuo
    tua tuoi tue suo sua suoi sue nostro nostra vostro vostra questo questa
    questi queste quello quella quelli quelle anche solo gia ancora piu
    """.split()
)


def strip_accents(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def tokens(text: str) -> list[str]:
    """All words of ``text`` in order, folded (duplicates kept)."""
    return _WORD.findall(strip_accents(text).casefold())


def content_tokens(text: str) -> set[str]:
    """The distinct words of ``text`` that are not stopwords."""
    return {t for t in tokens(text) if t not in STOPWORDS}
