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
END:VCALENDAR\r
"""


# A time without a zone is the user's (ctx.now's offset): these births fix ctx.now at UTC, so they
# hold on a machine in any zone (the runner's clock carries the machine's offset).
UTC_NOW = "2030-04-28T12:00:00+00:00"


def _in_utc(run):
    return lambda args, **overrides: run(args, **{"now": UTC_NOW, **overrides})


def birth_move_keeps_the_length(run, tmp):
    run = _in_utc(run)
    (tmp / "cal.ics").write_text(ICS)
    out = run({"file": "~/cal.ics", "events": [{"uid": "physio", "start": "2030-05-03T10:00"}]})
    assert out["ok"], out
    entry = out["entries"][0]
    assert entry["action"] == "changed" and "DTSTART:20300502T070000Z" in entry["previous"]
    assert (entry["event"]["start"], entry["event"]["end"]) == ("2030-05-03T10:00+00:00", "2030-05-03T11:00+00:00"), entry
    text = (tmp / "cal.ics").read_text()
    assert "DTSTART:20300503T100000Z" in text and "SEQUENCE:1" in text and "20300502T070000Z" not in text, text


def birth_create_in_a_new_file_and_an_existing_one(run, tmp):
    run = _in_utc(run)
    out = run({"file": "~/new.ics", "events": [{"summary": "Lunch with Sofia", "start": "2030-05-07T13:00",
                                                 "location": "Bar Roma"}]})
    assert out["ok"], out
    uid = out["entries"][0]["uid"]
    assert out["entries"][0]["action"] == "created" and uid.endswith("@metnos")
    text = (tmp / "new.ics").read_text()
    assert "SUMMARY:Lunch with Sofia" in text and "DTEND:20300507T140000Z" in text and uid in text
    (tmp / "cal.ics").write_text(ICS)
    out = run({"file": "~/cal.ics", "events": [{"summary": "Trip", "start": "2030-06-01", "end": "2030-06-03", "all_day": True}]})
    assert out["entries"][0]["event"]["all_day"] is True and out["entries"][0]["event"]["end"] == "2030-06-03"
    assert "UID:physio" in (tmp / "cal.ics").read_text()


def birth_refusals(run, tmp):
    run = _in_utc(run)
    (tmp / "cal.ics").write_text(ICS)
    out = run({"file": "~/cal.ics", "events": [{"uid": "nope", "start": "2030-05-03T10:00"}, {"start": "2030-05-03T10:00"},
                                                {"uid": "physio", "start": "2030-05-03T10:00", "end": "2030-05-03T09:00"}]})
    assert [e["error"]["class"] for e in out["entries"]] == ["NotFound", "InvalidArgument", "InvalidArgument"], out
    assert (tmp / "cal.ics").read_bytes() == ICS.encode()
    # A configured file must come as file, so its before-image is kept for undo.
    out = run({"calendar": "home", "events": [{"summary": "x", "start": "2030-05-03T10:00"}]},
              config={"calendar": {"sources": {"home": {"path": "~/cal.ics"}}, "default": "home"}})
    assert out["error"]["class"] == "InvalidArgument" and "give it as file" in out["error"]["message"], out


def birth_found_by_its_words_and_moved_to_a_day_said(run, tmp):
    # ctx.now is Sunday 2030-04-28: "friday at 10" is 2030-05-03 10:00.
    run = _in_utc(run)
    (tmp / "cal.ics").write_text(ICS)
    out = run({"file": "~/cal.ics", "events": [{"find": "the physio", "start": "friday at 10"}]})
    assert out["ok"], out
    assert (out["entries"][0]["uid"], out["entries"][0]["event"]["start"], out["entries"][0]["event"]["end"]) == \
        ("physio", "2030-05-03T10:00+00:00", "2030-05-03T11:00+00:00"), out
    out = run({"file": "~/cal.ics", "events": [{"find": "piano lesson", "start": "friday at 11"}]})
    assert out["error"]["class"] == "NotFound" and "read_events" in out["error"]["message"], out


def birth_a_date_written_in_the_past_is_refused_with_today(run, tmp):
    # ctx.now is Sunday 2030-04-28: a model that does not know it writes a date of its training.
    run = _in_utc(run)
    (tmp / "cal.ics").write_text(ICS)
    out = run({"file": "~/cal.ics", "events": [{"summary": "Lunch", "start": "2023-06-06T13:00"}]})
    assert out["error"]["class"] == "InvalidArgument" and "Sunday 2030-04-28" in out["error"]["message"], out
    # Said in words, a past day is what was meant.
    out = run({"file": "~/cal.ics", "events": [{"summary": "Lunch", "start": "yesterday 13:00"}]})
    assert out["ok"] and out["entries"][0]["event"]["start"] == "2030-04-27T13:00+00:00", out


def birth_when_is_the_start_said(run, tmp):
    # ctx.now is Sunday 2030-04-28: "tuesday 13:00" is 2030-04-30 13:00.
    run = _in_utc(run)
    out = run({"file": "~/new.ics", "events": [{"summary": "Lunch", "when": "tuesday 13:00"}]})
    assert out["ok"] and out["entries"][0]["event"]["start"] == "2030-04-30T13:00+00:00", out
    out = run({"file": "~/new.ics", "events": [{"summary": "Lunch", "when": "tuesday 13:00", "start": "2030-05-01T13:00"}]})
    assert out["error"]["class"] == "InvalidArgument" and "not both" in out["error"]["message"], out


def birth_a_find_that_only_repeats_the_new_title_creates(run, tmp):
    run = _in_utc(run)
    (tmp / "cal.ics").write_text(ICS)
    out = run({"file": "~/cal.ics", "events": [{"find": "lunch with Sara", "summary": "Lunch with Sara", "when": "tuesday 13:00"}]})
    assert out["ok"] and out["entries"][0]["action"] == "created", out
    # A find that matches nothing and is not the new title is refused: no event is made up.
    out = run({"file": "~/cal.ics", "events": [{"find": "physio appointment", "summary": "Physio", "when": "friday 10:00"}]})
    assert out["error"]["class"] == "NotFound", out
