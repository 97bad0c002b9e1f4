ICS = """BEGIN:VCALENDAR\r
VERSION:2.0\r
PRODID:-//Metnos//birth//EN\r
BEGIN:VEVENT\r
UID:physio\r
DTSTAMP:20300101T000000Z\r
DTSTART:20300502T070000Z\r
DTEND:20300502T080000Z\r
SUMMARY:Physio\r
END:VEVENT\r
BEGIN:VEVENT\r
UID:standup\r
DTSTAMP:20300101T000000Z\r
DTSTART:20300429T070000Z\r
DTEND:20300429T071500Z\r
RRULE:FREQ=DAILY;COUNT=5\r
SUMMARY:Standup\r
END:VEVENT\r
END:VCALENDAR\r
"""


# A time without a zone is the user's (ctx.now's offset): these births fix ctx.now at UTC, so they
# hold on a machine in any zone (the runner's clock carries the machine's offset).
UTC_NOW = "2030-04-28T12:00:00+00:00"


def _in_utc(run):
    return lambda args, **overrides: run(args, **{"now": UTC_NOW, **overrides})


def birth_delete_by_uid(run, tmp):
    run = _in_utc(run)
    (tmp / "cal.ics").write_text(ICS)
    out = run({"file": "~/cal.ics", "uids": ["standup"]})
    assert out["ok"], out
    assert out["entries"][0]["deleted"] is True and "RRULE:FREQ=DAILY;COUNT=5" in out["entries"][0]["previous"]
    text = (tmp / "cal.ics").read_text()
    assert "UID:standup" not in text and "UID:physio" in text


def birth_unknown_uid_changes_nothing(run, tmp):
    run = _in_utc(run)
    (tmp / "cal.ics").write_text(ICS)
    out = run({"file": "~/cal.ics", "uids": ["nope"]})
    assert out["ok"] is False and out["entries"][0]["error"]["class"] == "NotFound", out
    assert (tmp / "cal.ics").read_bytes() == ICS.encode()
    out = run({"calendar": "work", "uids": ["x"]})
    assert out["error"]["class"] == "UnknownCalendar", out


def birth_found_by_its_words_on_a_day_said(run, tmp):
    # ctx.now is Sunday 2030-04-28: "thursday" is 2030-05-02.
    run = _in_utc(run)
    (tmp / "cal.ics").write_text(ICS)
    out = run({"file": "~/cal.ics", "find": "physio", "on": "wednesday"})
    assert out["error"]["class"] == "NotFound", out
    # A recurring event is deleted by uid only: its occurrences are not one event.
    out = run({"file": "~/cal.ics", "find": "standup"})
    assert out["error"]["class"] == "Ambiguous" and "uid" in out["error"]["message"], out
    out = run({"file": "~/cal.ics", "find": "physio", "on": "thursday"})
    assert out["ok"] and out["entries"][0]["uid"] == "physio", out
    text = (tmp / "cal.ics").read_text()
    assert "UID:physio" not in text and "UID:standup" in text, text
    assert run({"file": "~/cal.ics"})["error"]["class"] == "InvalidArgument"
