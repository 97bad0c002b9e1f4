"""The calendars of read_events, set_events and delete_events: CalDAV collections and local .ics files.

One file, copied byte for byte into each of the three executors' folders (an
executor cannot import another's code; tests/unit/test_calendar_executors.py
fails when the copies differ). caldav, icalendar and recurring_ical_events are
the runtime's installed packages (``python:site-packages``). In the sandbox
the only way out is the egress proxy the host names in ``http_proxy``; the
password of a server source comes from ``METNOS_DAV_SECRETS`` (a JSON map
filled from the vault for this call alone), never from args or ctx, and no
error carries it. What an event says is data: nothing in it is acted upon.
"""

import json
import os
import re
import uuid
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from urllib.parse import urlsplit

import icalendar
import recurring_ical_events

SECRETS_ENV = "METNOS_DAV_SECRETS"


class Refused(Exception):
    """Carries an error class and a message that names the cause and the fix."""

    def __init__(self, cls, message):
        super().__init__(message)
        self.cls = cls


def resolve(path, ctx):
    """``~``, ``$HOME`` and ``$WORKSPACE`` expanded as the runtime does (executors cannot import it)."""
    ws = ctx["workspace"]
    for prefix, base in (("~", ws["home"]), ("$HOME", ws["home"]), ("$WORKSPACE", ws["root"])):
        if path == prefix or path.startswith(prefix + "/"):
            path = base + path[len(prefix):]
            break
    if not os.path.isabs(path):
        raise Refused("InvalidArgument", f"{path!r} is not absolute (use /..., ~/... or $WORKSPACE/...)")
    return os.path.normpath(path)


# --- time -------------------------------------------------------------------------------------------

def local_zone(ctx):
    """The user's offset, as ctx.now carries it: what a time without a zone means."""
    now = datetime.fromisoformat(ctx["now"])
    return now.tzinfo or timezone.utc


WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# The parts of a day a person names ("thursday afternoon"), as [from, to) hours.
DAY_PARTS = {"morning": (6, 12), "mattina": (6, 12), "mattino": (6, 12), "afternoon": (12, 18), "pomeriggio": (12, 18),
             "evening": (18, 24), "sera": (18, 24), "night": (18, 24), "tonight": (18, 24), "stasera": (18, 24)}
_PART = re.compile(r"\b(" + "|".join(DAY_PARTS) + r")\b", re.IGNORECASE)
# "at 10", "alle 10", "ore 10": an hour alone, which the parser would read as a day of the month.
_BARE_HOUR = re.compile(r"\b(at|alle|ore|h)\s+(\d{1,2})(?![\d:.])", re.IGNORECASE)
WORDS_HINT = ("a date (YYYY-MM-DD), a date-time (YYYY-MM-DDTHH:MM) or a day as people say it "
              "(\"tomorrow\", \"thursday 14:00\", \"friday at 10\", \"thursday afternoon\")")


@dataclass(frozen=True)
class When:
    """A moment read from an argument, and what it named: a time, a whole day, or a part of a day."""

    moment: datetime
    kind: str  # "time" | "day" | "part"
    until: datetime  # where what it named ends: the moment itself for a time, the day's or the part's end
    spoken: bool = False  # said in words ("tomorrow"), not written as a date


def _iso(text, zone):
    if len(text) == 10:
        day = date.fromisoformat(text)
        start = datetime.combine(day, time(0), tzinfo=zone)
        return When(start, "day", start + timedelta(days=1))
    moment = datetime.fromisoformat(text)
    moment = moment if moment.tzinfo else moment.replace(tzinfo=zone)
    return When(moment, "time", moment)


def _words(text, ctx, zone):
    """A day as people say it, read against the turn's recorded now (never the wall clock); a weekday
    means its next date after today, as "on Thursday" does."""
    from dateparser.date import DateDataParser  # noqa: E402 - only days in words need it

    part = _PART.search(text)
    rest = _PART.sub(" ", text) if part else text
    rest = _BARE_HOUR.sub(lambda m: f"{m.group(1)} {m.group(2)}:00", rest).strip() or "today"
    base = datetime.fromisoformat(ctx["now"]).astimezone(zone).replace(tzinfo=None)
    parser = DateDataParser(languages=["en", "it"], settings={
        "RELATIVE_BASE": base, "PREFER_DATES_FROM": "future", "RETURN_TIME_AS_PERIOD": True,
        # The base is already the user's wall clock: no zone lookup inside the sandbox.
        "TIMEZONE": "UTC", "RETURN_AS_TIMEZONE_AWARE": False})
    found = parser.get_date_data(rest)
    if found is None or found.date_obj is None:
        return None
    moment = found.date_obj.replace(tzinfo=zone)
    if found.period == "time" and not part:
        return When(moment, "time", moment, spoken=True)
    day = datetime.combine(moment.date(), time(0), tzinfo=zone)
    if part:
        begin, end = DAY_PARTS[part.group(1).lower()]
        return When(day + timedelta(hours=begin), "part", day + timedelta(hours=end), spoken=True)
    return When(day, "day", day + timedelta(days=1), spoken=True)


def read_when(text, ctx):
    """An argument's date, date-time or day in words, in the user's zone."""
    zone = local_zone(ctx)
    try:
        return _iso(text, zone)
    except ValueError:
        pass
    found = _words(text, ctx, zone)
    if found is None:
        raise Refused("InvalidArgument", f"{text!r} is not {WORDS_HINT}")
    return found


def parse_when(text, ctx, *, end_of_day=False):
    """An argument's moment as an aware datetime in the user's zone; ``end_of_day``: a day (or a part of
    one) given as an end means its end."""
    when = read_when(text, ctx)
    return when.until if end_of_day else when.moment


def show(value, ctx):
    """A DTSTART/DTEND value as the user reads it: a date, or a time in the user's zone (floating ones as they are)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.isoformat(timespec="minutes")
        return value.astimezone(local_zone(ctx)).isoformat(timespec="minutes")
    return value.isoformat()


def _aware(value, ctx):
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=local_zone(ctx))
    return datetime.combine(value, time(0), tzinfo=local_zone(ctx))


# --- events -----------------------------------------------------------------------------------------

def _text(component, key):
    value = component.get(key)
    return str(value) if value is not None else ""


def occurrence(component, ctx, source, recurring=None):
    """One event (or one occurrence of a recurring one) as the executors return it."""
    start = component.decoded("DTSTART")
    end = component.decoded("DTEND") if component.get("DTEND") is not None else None
    if end is None:
        length = component.decoded("DURATION") if component.get("DURATION") is not None else None
        end = start + (length if length is not None else (timedelta(days=1) if not isinstance(start, datetime) else timedelta(0)))
    # The weekday beside the date: a small model cannot tell which date is "Thursday".
    local_start = start.astimezone(local_zone(ctx)) if isinstance(start, datetime) and start.tzinfo else start
    entry = {"uid": _text(component, "UID"), "summary": _text(component, "SUMMARY"),
             "start": show(start, ctx), "end": show(end, ctx), "weekday": WEEKDAYS[local_start.weekday()],
             "all_day": not isinstance(start, datetime),
             "location": _text(component, "LOCATION"), "description": _text(component, "DESCRIPTION"),
             "recurring": bool(recurring) or component.get("RRULE") is not None or component.get("RDATE") is not None,
             "calendar": source.name}
    if source.file:
        entry["file"] = source.file
    entry["_span"] = (_aware(start, ctx), _aware(end, ctx))
    return entry


def expand(calendar, start, end, ctx, source):
    """Every occurrence between start and end, recurrences expanded."""
    # An occurrence no longer carries its rule: what recurs is told by its master's.
    repeating = {str(c.get("UID", "")) for c in calendar.walk("VEVENT") if c.get("RRULE") is not None or c.get("RDATE") is not None}
    return [occurrence(c, ctx, source, str(c.get("UID", "")) in repeating)
            for c in recurring_ical_events.of(calendar).between(start, end)]


def master(calendar, uid):
    """The VEVENT with that UID that is not an exception of a recurrence."""
    for component in calendar.walk("VEVENT"):
        if str(component.get("UID", "")) == uid and component.get("RECURRENCE-ID") is None:
            return component
    return None


# Words that name no event ("my physio appointment" is found by "physio appointment").
_FILLER = frozenset({"the", "my", "our", "a", "an", "of", "on", "at", "to", "il", "lo", "la", "le", "gli", "i", "un", "una",
                     "mio", "mia", "miei", "mie", "di", "del", "della", "con"})
# How far ahead an event named by its words is looked for, when no day is given.
FIND_DAYS = 92


def _words_of(text):
    return [w for w in re.findall(r"\w+", text.lower()) if w not in _FILLER]


def _holds(event, words):
    said = " ".join(event[k] for k in ("summary", "location", "description")).lower()
    return all(re.search(r"\b" + re.escape(w), said) for w in words)


def find_event(source, text, on, ctx):
    """The one event whose summary, location or description holds every word of ``text``: on the day
    ``on`` names, or from today through the next FIND_DAYS days. None, or several, is refused with
    what was found and how to say which."""
    words = _words_of(text)
    if not words:
        raise Refused("InvalidArgument", f"find {text!r} has no word to look for (give the event's title, e.g. \"physio\")")
    zone = local_zone(ctx)
    if on:
        when = read_when(on, ctx)
        start = when.moment if when.kind != "time" else datetime.combine(when.moment.date(), time(0), tzinfo=zone)
        end = when.until if when.kind != "time" else start + timedelta(days=1)
        where = f"on {on}"
    else:
        start = datetime.fromisoformat(ctx["now"]).astimezone(zone).replace(hour=0, minute=0, second=0, microsecond=0)
        end = start + timedelta(days=FIND_DAYS)
        where = f"in the next {FIND_DAYS} days"
    found = {}
    for event in source.read(start, end, ctx):
        if _holds(event, words):
            found.setdefault(event["uid"], event)
    if not found:
        raise Refused("NotFound", f"no event with {text!r} in calendar {source.name!r} {where} "
                                  "(read_events lists them; on names another day)")
    if len(found) > 1:
        listed = "; ".join(f"{e['summary']} at {e['start']} (uid {uid})" for uid, e in found.items())
        raise Refused("Ambiguous", f"{len(found)} events match {text!r} {where}: {listed}; say which by its day (on) or its uid")
    uid, event = next(iter(found.items()))
    if event["recurring"]:
        raise Refused("Ambiguous", f"{event['summary']!r} is a recurring event: give its uid ({uid}) to change the whole series")
    return uid


def new_uid():
    return f"{uuid.uuid4()}@metnos"


def stamp(ctx):
    return datetime.fromisoformat(ctx["now"]).astimezone(timezone.utc)


# --- sources ----------------------------------------------------------------------------------------

class IcsFile:
    """A local .ics file: read whole, written whole (beside and swapped), so undo restores it byte for byte."""

    def __init__(self, name, path):
        self.name, self.file = name, path

    def calendar(self):
        try:
            with open(self.file, "rb") as fh:
                return icalendar.Calendar.from_ical(fh.read())
        except FileNotFoundError:
            raise Refused("NotFound", f"{self.file} does not exist") from None
        except PermissionError:
            raise Refused("PermissionDenied", f"cannot read {self.file}") from None
        except ValueError as exc:
            raise Refused("InvalidCalendar", f"{self.file} is not an iCalendar file: {exc}") from None

    def read(self, start, end, ctx):
        return expand(self.calendar(), start, end, ctx, self)

    def find(self, uid):
        """(the event's iCalendar text, the file's calendar) or (None, calendar)."""
        cal = self.calendar()
        found = master(cal, uid)
        return (found.to_ical().decode("utf-8") if found is not None else None), cal

    def write(self, cal):
        tmp = self.file + ".metnos-tmp"
        try:
            with open(tmp, "wb") as fh:
                fh.write(cal.to_ical())
            os.replace(tmp, self.file)
        except PermissionError:
            raise Refused("PermissionDenied", f"cannot write {self.file}") from None


class CalDav:
    """A CalDAV calendar collection, reached through the egress proxy."""

    def __init__(self, name, conf):
        self.name, self.file = name, None
        self.url, self.conf = conf["url"], conf
        self._calendar = None

    def _password(self):
        try:
            held = json.loads(os.environ.get(SECRETS_ENV) or "{}")
        except ValueError:
            held = {}
        password = held.get(f"calendar.{self.name}")
        if not password:
            raise Refused("Unauthorized", f"no password for calendar {self.name!r} in the vault: "
                                          f"store it with `metnos calendar password {self.name}`")
        return password

    def _collection(self):
        if self._calendar is None:
            import caldav  # noqa: E402 - only server sources need it (and its HTTP stack)

            proxy = os.environ.get("https_proxy" if self.url.startswith("https:") else "http_proxy")
            client = caldav.DAVClient(self.url, username=self.conf.get("username") or None, password=self._password(),
                                      proxy=proxy or None, timeout=int(self.conf.get("timeout_s") or 15),
                                      enable_rfc6764=False, require_tls=False)
            self._calendar = client.calendar(url=self.url)
        return self._calendar

    def call(self, what, *args, **kwargs):
        """One request to the server, its failures told as the source's, with the fix."""
        from caldav.lib import error as dav_error  # noqa: E402 - as in _collection

        host = urlsplit(self.url)
        where = f"{host.hostname}:{host.port or (443 if host.scheme == 'https' else 80)}"
        try:
            return what(*args, **kwargs)
        except Refused:
            raise
        except dav_error.AuthorizationError:
            raise Refused("Unauthorized", f"calendar {self.name!r}: the server refused the user name or password; "
                                          f"store the right one with `metnos calendar password {self.name}`") from None
        except dav_error.NotFoundError:
            raise Refused("NotFound", f"calendar {self.name!r}: not found on the server") from None
        except dav_error.DAVError as exc:
            text = str(exc)
            if "403" in text and "proxy" in text.lower():
                raise Refused("NetworkDenied", f"calendar {self.name!r}: {where} is not allowed; "
                                               "add it to [network] allow in config.toml") from None
            raise Refused("Network", f"calendar {self.name!r}: the server answered {type(exc).__name__}") from None
        except OSError as exc:
            text = str(exc)
            if "403" in text or "Forbidden" in text:
                raise Refused("NetworkDenied", f"calendar {self.name!r}: {where} is not allowed; "
                                               "add it to [network] allow in config.toml") from None
            raise Refused("Network", f"calendar {self.name!r}: cannot reach {where} ({type(exc).__name__})") from None

    def _objects(self, start, end):
        cal = self._collection()
        return cal.search(event=True, start=start, end=end, expand=False)

    def read(self, start, end, ctx):
        out = []
        for obj in self.call(self._objects, start, end):
            out.extend(expand(icalendar.Calendar.from_ical(obj.data), start, end, ctx, self))
        return out

    def _by_uid(self, uid):
        from caldav.lib import error as dav_error  # noqa: E402 - as in _collection

        try:
            return self._collection().event_by_uid(uid)
        except dav_error.NotFoundError:
            return None

    def find(self, uid):
        """(the event's iCalendar text, its resource) or (None, None)."""
        obj = self.call(self._by_uid, uid)
        if obj is None:
            return None, None
        return obj.data, obj

    def save(self, resource, cal):
        if resource is None:
            return self.call(lambda: self._collection().save_event(cal.to_ical().decode("utf-8")))
        resource.data = cal.to_ical().decode("utf-8")
        return self.call(resource.save)

    def delete(self, resource):
        return self.call(resource.delete)


def open_source(args, ctx, *, writing=False):
    """The source the arguments name: ``file`` (a .ics path), or ``calendar`` (a configured source)."""
    conf = ctx["config"].get("calendar") or {}
    sources = conf.get("sources") or {}
    if args.get("file"):
        return IcsFile(os.path.basename(args["file"]), resolve(args["file"], ctx))
    name = args.get("calendar") or conf.get("default") or ""
    if not name:
        known = ", ".join(sorted(sources)) or "none configured"
        raise Refused("UnknownCalendar", f"name a calendar (known: {known}) or give an .ics file; "
                                         "sources go in [calendar.sources.NAME] of config.toml")
    source = sources.get(name)
    if source is None:
        known = ", ".join(sorted(sources)) or "none configured"
        raise Refused("UnknownCalendar", f"no calendar {name!r} (known: {known}); add [calendar.sources.{name}] to config.toml")
    if source.get("path"):
        path = resolve(source["path"], ctx)
        if writing:
            # A change to a file is undone from its before-image, which the runtime keeps only for a path argument.
            raise Refused("InvalidArgument", f"calendar {name!r} is the file {source['path']}: give it as file "
                                             f"({source['path']!r}) so the change can be undone")
        return IcsFile(name, path)
    return CalDav(name, source)


def finish(entries):
    failed = [e for e in entries if "error" in e]
    out = {"ok": not failed, "entries": entries,
           "metadata": {"ok_count": len(entries) - len(failed), "fail_count": len(failed)}}
    if failed:
        first = failed[0]["error"]
        out["error"] = {"class": first["class"],
                        "message": f"{len(failed)} of {len(entries)} failed; first: {first['message']}"}
    return out


def failure(exc):
    return {"ok": False, "error": {"class": exc.cls, "message": str(exc)}}
