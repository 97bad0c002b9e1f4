"""delete_events: delete events by uid from a CalDAV calendar or a local .ics file.

On a .ics file (``file``) the runtime keeps the file's before-image, so undo
puts it back byte for byte; on CalDAV each entry carries the deleted event's
iCalendar text (``previous``), which the log keeps.
"""

from calendars import Refused, failure, find_event, finish, open_source


def _delete_one(source, uid, cal):
    previous, holder = source.find(uid) if cal is None else (None, None)
    if source.file:
        kept, gone = [], []
        for c in cal.subcomponents:
            (gone if c.name == "VEVENT" and str(c.get("UID", "")) == uid else kept).append(c)
        if not gone:
            raise Refused("NotFound", f"no event with uid {uid!r} in {source.file} (read_events gives the uids)")
        previous = "".join(c.to_ical().decode("utf-8") for c in gone)
        cal.subcomponents[:] = kept
    else:
        if previous is None:
            raise Refused("NotFound", f"no event with uid {uid!r} in calendar {source.name!r} (read_events gives the uids)")
        source.delete(holder)
    return {"uid": uid, "deleted": True, "previous": previous}


def run(args, ctx):
    try:
        source = open_source(args, ctx, writing=True)
        cal = source.calendar() if source.file else None
    except Refused as exc:
        return failure(exc)
    uids = list(args.get("uids") or [])
    if args.get("find"):
        try:
            uids.append(find_event(source, args["find"], args.get("on"), ctx))
        except Refused as exc:
            return failure(exc)
    if not uids:
        return failure(Refused("InvalidArgument", "name the events to delete: uids (read_events gives them) or find "
                                                  "(words of the event's title, e.g. \"physio\", with on for its day)"))
    entries = []
    for uid in uids:
        try:
            entries.append(_delete_one(source, uid, cal))
        except Refused as exc:
            entries.append({"uid": uid, "error": {"class": exc.cls, "message": str(exc)}})
    if source.file and any("error" not in e for e in entries):
        try:
            source.write(cal)
        except Refused as exc:
            return failure(exc)
    return finish(entries)
