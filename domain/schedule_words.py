"""A schedule said in words, turned into a cron at creation (seeds/000 ch. 11).

"every morning at 8", "every other Tuesday at 18:30", "on the first of each
month", "tomorrow at 9", "in two hours", and the same in Italian ("ogni
mattina alle 8", "un martedì sì e uno no alle 18:30", "il primo di ogni
mese", "domani alle 9", "tra due ore"). A recurring phrase becomes a cron (with
a week rule where cron alone cannot say it: domain/due.py); a one-shot phrase
becomes the cron of that minute with ``count`` 1, so the schedule closes after
its one firing. Dates that the rules here do not name ("on 3 December",
"il 5 gennaio") are read by dateparser.

A pure function of the words, the time zone and ``now``: what it cannot read
it refuses, naming the shapes it knows, and nothing is scheduled.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta

from domain.due import BadSchedule, check_cron, next_slot, parse, stamp, with_rule, zone


class WordsNotUnderstood(BadSchedule):
    """Words that are not a schedule the rules (or dateparser) can read."""


@dataclass(frozen=True)
class Cadence:
    cron: str
    count: int | None  # 1 for a one-shot, None for a recurring cadence
    words: str


_NUMBERS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30,
    "due": 2, "tre": 3, "quattro": 4, "cinque": 5, "sei": 6, "sette": 7, "otto": 8,
    "nove": 9, "dieci": 10, "undici": 11, "dodici": 12, "quindici": 15, "venti": 20, "trenta": 30,
}
_ORDINALS = {"first": 1, "primo": 1, "second": 2, "secondo": 2, "third": 3, "terzo": 3, "fourth": 4, "quarto": 4,
             "fifth": 5, "quinto": 5, "tenth": 10, "decimo": 10, "fifteenth": 15, "quindicesimo": 15}
_WEEKDAYS = {
    "monday": 1, "tuesday": 2, "wednesday": 3, "thursday": 4, "friday": 5, "saturday": 6, "sunday": 0,
    "lunedi": 1, "martedi": 2, "mercoledi": 3, "giovedi": 4, "venerdi": 5, "sabato": 6, "domenica": 0,
}
_DAY_NAME = "|".join(sorted(_WEEKDAYS, key=len, reverse=True))
# Parts of the day: the hour said with them, and the hour when none is said.
_MORNING = r"morning|mattina|mattino"
_EVENING = r"afternoon|evening|night|tonight|pomeriggio|sera|stasera|notte"
_DEFAULT_HOUR = 9

_AT = re.compile(r"\b(?:at|alle|all'|ore)\s+(?P<h>\d{1,2})(?:[:.h](?P<m>\d{2}))?\s*(?P<ampm>am|pm)?\b"
                 r"|\b(?P<h2>\d{1,2})(?:[:.h](?P<m2>\d{2}))\b|\b(?P<h3>\d{1,2})\s*(?P<ampm3>am|pm)\b"
                 r"|\b(?P<noon>noon|midday|mezzogiorno)\b|\b(?P<midnight>midnight|mezzanotte)\b")
_IN = re.compile(r"^(?:in|tra|fra)\s+(?P<n>\d+|an?|un[oa]?|un')\s*(?P<unit>minutes?|mins?|hours?|days?|minut[oi]|or[ae]|giorn[oi])$")
_EVERY_N = re.compile(r"^(?:every|ogni)\s+(?:(?P<n>\d+)\s+)?(?P<unit>minutes?|mins?|hours?|minut[oi]|or[ae])$")


def _plain(text: str) -> str:
    text = unicodedata.normalize("NFKD", text.lower())
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = re.sub(r"[,;!?]", " ", text).replace("’", "'").replace("all'", "alle ")
    words = []
    for word in re.split(r"\s+", text.strip()):
        words.append(str(_NUMBERS[word]) if word in _NUMBERS else word)
    return " ".join(words)


def _time_of(text: str, default_hour: int) -> tuple[int, int, str]:
    """(hour, minute, the text without the time)."""
    found = _AT.search(text)
    if found is None:
        hour, minute = default_hour, 0
        if re.search(rf"\b(?:{_EVENING})\b", text) and default_hour == _DEFAULT_HOUR:
            hour = 19
        elif re.search(rf"\b(?:{_MORNING})\b", text) and default_hour == _DEFAULT_HOUR:
            hour = 8
        return hour, minute, text
    if found["noon"]:
        hour, minute = 12, 0
    elif found["midnight"]:
        hour, minute = 0, 0
    else:
        hour = int(found["h"] or found["h2"] or found["h3"])
        minute = int(found["m"] or found["m2"] or 0)
        ampm = found["ampm"] or found["ampm3"]
        if ampm == "pm" and hour < 12:
            hour += 12
        elif ampm == "am" and hour == 12:
            hour = 0
        elif ampm is None and hour < 12 and re.search(rf"\b(?:{_EVENING})\b", text):
            hour += 12
    if hour > 23 or minute > 59:
        raise WordsNotUnderstood(f"{hour}:{minute:02d} is not a time of day")
    rest = (text[: found.start()] + " " + text[found.end():]).strip()
    rest = re.sub(r"\b(?:in the|of the|della|del|di|la)\s*$", "", rest).strip()
    return hour, minute, re.sub(r"\s+", " ", rest)


def _minute(dt: datetime) -> str:
    return f"{dt.minute} {dt.hour} {dt.day} {dt.month} *"


def parse_words(words: str, *, timezone: str, now: datetime) -> Cadence:
    """The cadence ``words`` say, in ``timezone``, as of ``now``; WordsNotUnderstood otherwise."""
    if not isinstance(words, str) or not words.strip():
        raise WordsNotUnderstood("no words to read a schedule from")
    local_now = now.astimezone(zone(timezone))
    text = _plain(words)
    cron = _recurring(text, local_now)
    if cron is not None:
        return Cadence(check_cron(cron), None, words)
    when = _one_shot(text, local_now)
    if when is not None:
        if when <= local_now:
            raise WordsNotUnderstood(f"{words!r} is {stamp(when)}, already past")
        return Cadence(check_cron(_minute(when)), 1, words)
    raise WordsNotUnderstood(
        f"cannot read a schedule from {words!r}; say it as e.g. 'every morning at 8', 'every other Tuesday at 18:30', "
        "'on the first of each month', 'every 15 minutes', 'tomorrow at 9', 'in two hours' (or in Italian), "
        "or give a five-field cron instead")


def _recurring(text: str, now: datetime) -> str | None:
    every_n = _EVERY_N.match(text)
    if every_n:
        n = int(every_n["n"] or 1)
        if every_n["unit"].startswith("min"):
            return "* * * * *" if n == 1 else f"*/{n} * * * *"
        return "0 * * * *" if n == 1 else f"0 */{n} * * *"
    # Every other <weekday>: cron cannot count weeks, so a week rule keeps every second one.
    other = re.search(
        rf"\bevery (?:other|second|2nd|alternate) (?P<d1>{_DAY_NAME})s?\b|\bevery 2 weeks on (?P<d2>{_DAY_NAME})s?\b"
        rf"|\bogni 2 (?P<d3>{_DAY_NAME})\b|\bun[oa]? (?P<d4>{_DAY_NAME}) si e un[oa]? no\b"
        rf"|\b(?:i |il |ogni )?(?P<d5>{_DAY_NAME}) alterni\b|\bogni 2 settimane (?:il |di )?(?P<d6>{_DAY_NAME})\b", text)
    if other:
        said = next(d for d in other.groups() if d)
        day = _WEEKDAYS[said]
        hour, minute, _ = _time_of(text[: other.start()] + " " + text[other.end():], _DEFAULT_HOUR)
        cron = f"{minute} {hour} * * {day}"
        first = _first_slot(cron, now)
        return with_rule(cron, 2, first.date())
    hour, minute, rest = _time_of(text, _DEFAULT_HOUR)
    weekday = re.fullmatch(rf"(?:(?P<lead>every|each|ogni|tutti i|il|on)\s+)?(?P<d>{_DAY_NAME})(?P<plural>s)?"
                           rf"(?:\s+(?:{_MORNING}|{_EVENING}))?", rest)
    if weekday and (weekday["plural"] or weekday["lead"] not in (None, "on")):
        return f"{minute} {hour} * * {_WEEKDAYS[weekday['d']]}"
    if re.fullmatch(rf"(?:every|each|ogni|tutt[ie] (?:i|le))\s+(?:day|giorno|giorni|{_MORNING}|{_EVENING}|mattine|sere)"
                    rf"|daily|every day (?:in the )?(?:{_MORNING}|{_EVENING})|ogni giorno (?:di |la )?(?:{_MORNING}|{_EVENING})"
                    rf"|quotidianamente|tutti i giorni", rest):
        return f"{minute} {hour} * * *"
    if re.fullmatch(r"(?:every|on|each)\s+weekdays?|on weekdays|(?:nei|tutti i) giorni feriali|ogni giorno feriale"
                    r"|(?:from |da )?(?:monday|lunedi) (?:to|al|a) (?:friday|venerdi)", rest):
        return f"{minute} {hour} * * 1-5"
    if re.fullmatch(r"(?:every|on|each)\s+(?:the )?weekends?|(?:ogni|nel|nei) (?:fine settimana|weekend)", rest):
        return f"{minute} {hour} * * 0,6"
    monthly = re.fullmatch(
        r"(?:on |every month on |ogni mese )?(?:the |il |l')?(?P<n>\d{1,2}|" + "|".join(_ORDINALS) + r")(?:st|nd|rd|th)?"
        r"\s+(?:day\s+)?(?:of|di)\s+(?:each|every|the|ogni)\s+(?:month|mese)"
        r"|(?:every month|monthly|ogni mese)\s+(?:on\s+)?(?:the |il )?(?P<m>\d{1,2}|" + "|".join(_ORDINALS) + r")(?:st|nd|rd|th)?",
        rest)
    if monthly:
        said = monthly["n"] or monthly["m"]
        day = _ORDINALS.get(said) or int(said)
        if not 1 <= day <= 31:
            raise WordsNotUnderstood(f"{day} is not a day of the month")
        return f"{minute} {hour} {day} * *"
    return None


def _first_slot(cron: str, now: datetime) -> datetime:
    """The cron's first slot after ``now``, in ``now``'s zone (a ZoneInfo: see parse_words)."""
    return parse(next_slot(cron, str(now.tzinfo), now)).astimezone(now.tzinfo)


def _one_shot(text: str, now: datetime) -> datetime | None:
    relative = _IN.match(text)
    if relative:
        n, unit = int(relative["n"]) if relative["n"].isdigit() else 1, relative["unit"]
        delta = (timedelta(minutes=n) if unit.startswith("min") else timedelta(days=n) if unit.startswith(("day", "giorn"))
                 else timedelta(hours=n))
        return (now + delta).replace(second=0, microsecond=0)
    hour, minute, rest = _time_of(text, _DEFAULT_HOUR)
    rest = re.sub(rf"\b(?:{_MORNING}|{_EVENING})\b", "", rest).strip()
    rest = re.sub(r"^(?:il|on|the|l')\s+|\s*\b(?:a|at|alle)$", "", rest).strip()
    days = {"today": 0, "oggi": 0, "stasera": 0, "tonight": 0, "": 0, "tomorrow": 1, "domani": 1,
            "day after tomorrow": 2, "the day after tomorrow": 2, "dopodomani": 2}
    if rest in days:
        if rest == "" and not _AT.search(text):
            return None
        day = now.date() + timedelta(days=days[rest])
        when = datetime(day.year, day.month, day.day, hour, minute, tzinfo=now.tzinfo)
        # "at 9" alone, said after nine, is tomorrow's nine.
        return when + timedelta(days=1) if rest == "" and when <= now else when
    weekday = re.fullmatch(rf"(?:on |next |this |il |lunedi |prossimo |questo )?(?P<d>{_DAY_NAME})(?: prossimo| next)?", rest)
    if weekday:
        ahead = (_WEEKDAYS[weekday["d"]] - (now.isoweekday() % 7)) % 7
        day = now.date() + timedelta(days=ahead)
        when = datetime(day.year, day.month, day.day, hour, minute, tzinfo=now.tzinfo)
        return when + timedelta(days=7) if when <= now else when
    return _dateparser_day(rest, now, hour, minute)


def _dateparser_day(rest: str, now: datetime, hour: int, minute: int) -> datetime | None:
    if not rest or not re.search(r"\d|[a-z]{3}", rest):
        return None
    import dateparser  # only dates the rules do not name need it, and it is slow to import

    found = dateparser.parse(rest, languages=["en", "it"], settings={
        "RELATIVE_BASE": now.replace(tzinfo=None), "PREFER_DATES_FROM": "future", "REQUIRE_PARTS": ["day", "month"]})
    if found is None:
        return None
    return datetime(found.year, found.month, found.day, hour, minute, tzinfo=now.tzinfo)


def next_times(cron: str, timezone: str, now: datetime, *, count: int | None = None, how_many: int = 3) -> list[str]:
    """The next firings of a cadence, for the user to confirm (one for a one-shot)."""
    times: list[str] = []
    cursor: str | datetime = now
    for _ in range(min(how_many, count) if count else how_many):
        cursor = next_slot(cron, timezone, cursor)
        times.append(cursor)
    return times
