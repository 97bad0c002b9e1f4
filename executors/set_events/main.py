"""set_events: create events, or change one found by its uid ("move my physio appointment to Friday at 10").

On a local .ics file (the ``file`` argument) the runtime keeps the file's
before-image, so undo puts it back byte for byte. On a CalDAV calendar the
change is the server's: each entry carries the event's iCalendar text as it
was (``previous``), which the log keeps; undo lists the step as one it cannot
put back (docs/executors.md, "Calendars and contacts").
"""

import re
from datetime import date, datetime, timedelta, timezone

import icalendar

from calendars import Refused, failure, find_event, finish, local_zone, master, new_uid, occurrence, open_source, read_when, stamp

_FIELDS = {"summary": "SUMMARY", "location": "LOCATION", "description": "DESCRIPTION"}


def _moment(text, ctx, all_day, zone):
    when = read_when(text, ctx)
    _not_written_in_the_past(text, when, ctx)
    if all_day:
        return when.moment.date()
    if zone is not None and when.kind == "time" and _wall_clock(text):
        return when.moment.replace(tzinfo=zone)
    when = when.moment
    # A fixed offset has no VTIMEZONE to name it: kept in UTC, which every client reads.
    return when.astimezone(timezone.utc)


def _not_written_in_the_past(text, when, ctx):
    """A date written out (not said: "yesterday" may be meant) before today is refused, with today's
    date: a small model that does not know the date writes one from its training (2023-06-06)."""
    today = datetime.fromisoformat(ctx["now"]).astimezone(local_zone(ctx)).date()
    if not when.spoken and when.moment.astimezone(local_zone(ctx)).date() < today:
        raise Refused("InvalidArgument", f"{text!r} is before today ({today:%A} {today.isoformat()}): give the day as the "
                                         "user said it (\"monday 9:30\", \"tomorrow 18:00\") or a date from today on")


def _wall_clock(text):
    """Whether a time was given without a zone (a wall-clock time, as every time said in words is)."""
    try:
        return datetime.fromisoformat(text).tzinfo is None
    except ValueError:
        return True


def _put(component, key, value):
    if key in component:
        del component[key]
    component.add(key, value)


def _apply(component, spec, ctx, creating):
    if "when" in spec:
        # when is start by the name a person uses ("when is it?"); given both, they must agree.
        if "start" in spec and spec["start"] != spec["when"]:
            raise Refused("InvalidArgument", "give the start once: when or start, not both")
        spec = {**spec, "start": spec["when"]}
    old_start = component.decoded("DTSTART") if "DTSTART" in component else None
    old_end = component.decoded("DTEND") if "DTEND" in component else None
    all_day = spec.get("all_day", isinstance(old_start, date) and not isinstance(old_start, datetime))
    # A bare time in an event kept in a named zone (TZID) means that zone's wall clock; else the user's.
    named = "DTSTART" in component and component["DTSTART"].params.get("TZID") and isinstance(old_start, datetime)
    zone = old_start.tzinfo if named and old_start.tzinfo is not None else None
    if "start" in spec:
        start = _moment(spec["start"], ctx, all_day, zone)
    elif creating:
        raise Refused("InvalidArgument", "a new event needs a start")
    else:
        start = old_start
    if "end" in spec:
        end = _moment(spec["end"], ctx, all_day, zone)
    elif old_start is not None and old_end is not None and type(old_start) is type(start):
        end = start + (old_end - old_start)  # moved: the length stays
    else:
        end = start + (timedelta(days=1) if all_day else timedelta(minutes=spec.get("duration_minutes", 60)))
    if "duration_minutes" in spec and "end" not in spec and not all_day:
        end = start + timedelta(minutes=spec["duration_minutes"])
    if end <= start:
        raise Refused("InvalidArgument", f"the end ({end}) is not after the start ({start})")
    _put(component, "DTSTART", start)
    if "DURATION" in component:
        del component["DURATION"]
    _put(component, "DTEND", end)
    for name, key in _FIELDS.items():
        if name in spec:
            _put(component, key, spec[name])
    _put(component, "DTSTAMP", stamp(ctx))
    if not creating:
        sequence = int(component.get("SEQUENCE", 0)) + 1
        _put(component, "SEQUENCE", sequence)


def _new_calendar():
    cal = icalendar.Calendar()
    cal.add("PRODID", "-//Metnos//set_events//EN")
    cal.add("VERSION", "2.0")
    return cal


def _found(source, spec, ctx):
    """The uid of the event find names; none when nothing matches and find only repeats the new event's
    own summary (the 1.5B gave a new lunch its title in both), which is then created."""
    try:
        return find_event(source, spec["find"], spec.get("on"), ctx)
    except Refused as exc:
        title = spec.get("summary", "").lower()
        if exc.cls == "NotFound" and title and all(w in title for w in re.findall(r"\w+", spec["find"].lower())):
            return ""
        raise


def _set_one(source, spec, ctx):
    uid = spec.get("uid") or (_found(source, spec, ctx) if spec.get("find") else "")
    if uid:
        previous, holder = source.find(uid)
        if previous is None:
            raise Refused("NotFound", f"no event with uid {uid!r} in calendar {source.name!r} (read_events gives the uids)")
        cal = holder if source.file else icalendar.Calendar.from_ical(previous)
        component = master(cal, uid)
        _apply(component, spec, ctx, creating=False)
        if source.file:
            source.write(cal)
        else:
            source.save(holder, cal)
        entry = {"uid": uid, "action": "changed", "previous": previous}
    else:
        if "summary" not in spec:
            raise Refused("InvalidArgument", "a new event needs a summary")
        uid = new_uid()
        component = icalendar.Event()
        component.add("UID", uid)
        _apply(component, spec, ctx, creating=True)
        if source.file:
            try:
                cal = source.calendar()
            except Refused as exc:
                if exc.cls != "NotFound":
                    raise
                cal = _new_calendar()
            cal.add_component(component)
            source.write(cal)
        else:
            cal = _new_calendar()
            cal.add_component(component)
            source.save(None, cal)
        entry = {"uid": uid, "action": "created"}
    event = occurrence(component, ctx, source)
    del event["_span"]
    entry["event"] = event
    return entry


def run(args, ctx):
    try:
        source = open_source(args, ctx, writing=True)
    except Refused as exc:
        return failure(exc)
    entries = []
    for spec in args["events"]:
        try:
            entries.append(_set_one(source, spec, ctx))
        except Refused as exc:
            entries.append({"uid": spec.get("uid", ""), "error": {"class": exc.cls, "message": str(exc)}})
    return finish(entries)
