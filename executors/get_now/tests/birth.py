import time
from datetime import datetime


def birth_utc_by_default(run, tmp):
    before = time.time()
    out = run({})
    assert out["ok"] is True
    stamp = datetime.fromisoformat(out["content"])
    assert stamp.utcoffset().total_seconds() == 0
    assert before - 1 <= out["metadata"]["epoch"] <= time.time() + 1
    assert abs(stamp.timestamp() - out["metadata"]["epoch"]) < 1


def birth_named_zone(run, tmp):
    out = run({"timezone": "Europe/Rome"})
    assert out["ok"] is True, out
    assert out["metadata"]["utc_offset"] in ("+01:00", "+02:00")
    assert out["content"].endswith(out["metadata"]["utc_offset"])


def birth_unknown_zone_is_an_error(run, tmp):
    out = run({"timezone": "Mars/Olympus_Mons"})
    assert out["ok"] is False
    assert out["error"]["class"] == "UnknownTimezone"
