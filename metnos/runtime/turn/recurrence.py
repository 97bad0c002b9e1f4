"""Whether a request asks for something to happen again and again ("every Friday at 17:00").

Such a request is done by a schedule, not by doing the thing now: the 1.5B, asked to send the
first line of a note every Friday, sent it once and answered that it had. Read from the form
of the request alone (en, it).
"""

from __future__ import annotations

import re

_UNITS = (r"day|morning|evening|night|afternoon|week|weekday|weekend|month|year|hour|minute|"
          r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|\d+\s+(?:minutes?|hours?|days?|weeks?|months?)")
_IT_UNITS = (r"giorno|mattina|sera|notte|pomeriggio|settimana|mese|anno|ora|lunedì|martedì|mercoledì|giovedì|venerdì|"
             r"sabato|domenica|\d+\s+(?:minuti|ore|giorni|settimane|mesi)")
_RECURRING = re.compile(rf"\b(?:every|each)\s+(?:other\s+)?(?:{_UNITS})s?\b|(?<!\bthe )(?<!\bmy )(?<!\ba )(?<!\byour )\b(?:daily|weekly|monthly|hourly|nightly)\b(?!\s+(?:report|summary|digest|plan|meeting|news|update)s?\b)"
                        rf"|\bogni\s+(?:{_IT_UNITS})\b|\btutt[ie]\s+(?:i|le)\s+(?:giorni|mattine|sere|settimane)\b",
                        re.IGNORECASE)


def asks_for_recurrence(request: str) -> str | None:
    """The words by which the request asks for a recurring task, or None."""
    m = _RECURRING.search(request)
    return m.group(0) if m else None


def recurrences(request: str) -> list[str]:
    """Each phrase by which the request asks for a recurring task ("every Monday ... and every Friday ...": two)."""
    return [m.group(0) for m in _RECURRING.finditer(request)]


# Where a request's next step starts: "then", "after that", "poi", "dopo", "quindi", a semicolon, a sentence's end.
_NEXT_STEP = re.compile(r"\b(?:then|after\s+that|afterwards|poi|dopo|quindi)\b|;|[.!?](?=\s)", re.IGNORECASE)


def recurring_part(request: str) -> str:
    """What the request asks to happen each time: from the start of the step its recurrence is in to the end.

    "read <page>, then every night at 3 delete ~/Backups" reads the page now; what fires each night is the
    delete. The request's whole text when it asks for no recurrence."""
    m = _RECURRING.search(request)
    if m is None:
        return request
    starts = [step.end() for step in _NEXT_STEP.finditer(request, 0, m.start())]
    return request[max(starts, default=0):]


# An end the request gives its schedule: a date or a span it stops at, a number of times.
_END = re.compile(r"\b(?:until|till|through|expir\w*|ending|ends?\s+(?:on|at|in|after)|stop\w*\s+(?:on|at|in|after)|"
                  r"for\s+(?:the\s+(?:next|coming)\s+)?(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|twelve)\s+"
                  r"(?:days?|weeks?|months?|years?|times?|firings?|runs?)|\d+\s+times|once|twice|"
                  r"fino|finché|entro|scad\w*|per\s+(?:i\s+prossimi\s+|le\s+prossime\s+)?(?:\d+|un[ao]?|due|tre|quattro|cinque|sei|dieci)\s+"
                  r"(?:giorn[oi]|settiman[ae]|mes[ei]|ann[oi]|volt[ae])|\d+\s+volte|una\s+volta)\b", re.IGNORECASE)


def says_an_end(request: str) -> bool:
    """The request says when, or after how many times, its schedule stops ("until June", "for two weeks", "3 times")."""
    return _END.search(request) is not None


_NOW = re.compile(r"\b(?:now|right away|immediately|at once|today|subito|adesso|oggi|anche ora)\b", re.IGNORECASE)


def asks_for_now(request: str) -> bool:
    """The request also asks for the thing at once ("delete it, and every hour from now on")."""
    return _NOW.search(request) is not None
