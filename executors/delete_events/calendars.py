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
import uuid
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


def parse_when(text, ctx, *, end_of_day=False):
    """An ISO date or date-time from the arguments, as an aware datetime in the user's zone."""
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            moment = datetime.combine(day + timedelta(days=1) if end_of_day else day, time(0))
        else:
            moment = datetime.fromisoformat(text)
    except ValueError:
        raise Refused("InvalidArgument", f"{text!r} is not a date (YYYY-MM-DD) or a date-time (YYYY-MM-DDTHH:MM)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=local_zone(ctx))


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
    entry = {"uid": _text(component, "UID"), "summary": _text(component, "SUMMARY"),
             "start": show(start, ctx), "end": show(end, ctx), "all_day": not isinstance(start, datetime),
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
