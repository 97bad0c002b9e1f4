"""get_now: the one seed allowed to read the wall clock (time:read)."""

import time
from datetime import datetime, timezone


def _zone(name):
    if name in ("UTC", "Z", "Etc/UTC"):
        return timezone.utc
    # Imported lazily: UTC must work even where no zone database is bound.
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def run(args, ctx):
    name = args.get("timezone") or "UTC"
    tz = _zone(name)
    if tz is None:
        return {"ok": False, "error": {"class": "UnknownTimezone", "message": f"unknown time zone {name!r}"}}
    epoch = time.time()
    now = datetime.fromtimestamp(epoch, tz)
    iso = now.isoformat(timespec="seconds")
    offset = now.strftime("%z")
    return {
        "ok": True,
        "content": iso,
        "metadata": {
            "timezone": name,
            "iso8601": iso,
            "epoch": epoch,
            "weekday": now.strftime("%A"),
            "date": now.date().isoformat(),
            "utc_offset": offset[:3] + ":" + offset[3:],
        },
    }
