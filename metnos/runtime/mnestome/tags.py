"""The tags a newborn mnest takes from its turn (seeds/004 ch. 4).

seeds/004's tags name the application domain a flow lives in ("invoice",
"pdf", "photo"), so they are read from the request's own words: the content
words (no stopwords, no generic request verbs such as "read" or "show", no
bare numbers, at least three letters): the first four the user wrote. The
mnest keeps them sorted. The channel is not a tag: it says how the user spoke, not what
about. A turn without such words gives a mnest without tags.
"""

from __future__ import annotations

from metnos.runtime.step.prefilter import GENERIC_VERBS
from metnos.runtime.step.text import STOPWORDS, tokens

MAX_TAGS = 4
MIN_LENGTH = 3


def tags_from_context(text: str, *, limit: int = MAX_TAGS) -> list[str]:
    found: list[str] = []
    for word in tokens(text or ""):
        if len(word) < MIN_LENGTH or word.isdigit() or word in STOPWORDS or word in GENERIC_VERBS or word in found:
            continue
        found.append(word)
        if len(found) == limit:
            break
    return found
