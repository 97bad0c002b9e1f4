"""The calendar world of the agent benchmark's calendar and contacts tasks: a real Radicale (CalDAV and
CardDAV) on 127.0.0.1, started the way tests/integration/test_calendar_contacts.py starts it, holding a
week of events around today and an address book; config.toml names both sources, their password is in
the vault.

The week is laid out by weekday from the day the task runs, so the requests can speak as a person does
("on Thursday", "tomorrow"): a weekday means its next date after today (``upcoming``). The tasks' checks
read the server's events back after the turn (``events``), never the runtime's own account of them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo
from pathlib import Path
from typing import Any

import icalendar

from tests.support.radicale_server import PASSWORD, USER, Radicale, radicale

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
ELENA_PHONE = "+39 347 555 0199"


def local_zone() -> tzinfo:
    """The zone the runtime gives executors (ctx.now's offset): this machine's."""
    zone = datetime.now().astimezone().tzinfo
    assert zone is not None
    return zone


def today() -> date:
    return datetime.now(local_zone()).date()


def upcoming(weekday: str, *, after: date | None = None) -> date:
    """The next date with that weekday after ``after`` (today): "on Thursday" said on a Thursday is next week's."""
    start = after or today()
    ahead = (WEEKDAYS.index(weekday) - start.weekday() - 1) % 7 + 1
    return start + timedelta(days=ahead)


def at(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime.combine(day, time(hour, minute), tzinfo=local_zone())


@dataclass(frozen=True)
class Seeded:
    uid: str
    summary: str
    start: datetime
    minutes: int
    location: str = ""

    def ical(self) -> str:
        cal = icalendar.Calendar()
        cal.add("PRODID", "-//agent bench//EN")
        cal.add("VERSION", "2.0")
        event = icalendar.Event()
        event.add("UID", self.uid)
        event.add("DTSTAMP", datetime(2026, 1, 1, tzinfo=local_zone()))
        event.add("DTSTART", self.start)
        event.add("DTEND", self.start + timedelta(minutes=self.minutes))
        event.add("SUMMARY", self.summary)
        if self.location:
            event.add("LOCATION", self.location)
        cal.add_component(event)
        return cal.to_ical().decode("utf-8")


def week() -> list[Seeded]:
    """A week around today: what the tasks ask about, and enough around it to be told apart."""
    t = today()
    tomorrow = t + timedelta(days=1)
    return [
        Seeded("yesterday-gym", "Gym", at(t - timedelta(days=1), 18), 60),
        Seeded("today-groceries", "Groceries at the market", at(t, 9), 45),
        # Tomorrow: what "what do I have tomorrow?" must list; the day after holds a haircut it must not.
        Seeded("tomorrow-plumber", "Plumber comes to fix the boiler", at(tomorrow, 9, 30), 60),
        Seeded("tomorrow-yoga", "Yoga class", at(tomorrow, 18), 60, "Palestra Centro"),
        Seeded("after-haircut", "Haircut", at(t + timedelta(days=2), 17), 30),
        Seeded("team-monday", "Team meeting", at(upcoming("monday"), 10), 60, "Room B12"),
        Seeded("team-wednesday", "Team meeting", at(upcoming("wednesday"), 10), 60, "Room B12"),
        Seeded("dentist", "Dentist appointment", at(upcoming("tuesday"), 16, 30), 45, "Studio Dr. Bassi, Via Roma 1"),
        # Thursday: a free morning but for a call, a busy afternoon.
        Seeded("thursday-bank", "Call with the bank", at(upcoming("thursday"), 9), 30),
        Seeded("thursday-review", "Project review with the client", at(upcoming("thursday"), 14), 120, "Room A3"),
    ]


def _card(uid: str, name: str, family: str, given: str, phone: str, email: str) -> str:
    return (f"BEGIN:VCARD\r\nVERSION:3.0\r\nUID:{uid}\r\nFN:{name}\r\nN:{family};{given};;;\r\n"
            f"TEL;TYPE=CELL:{phone}\r\nEMAIL;TYPE=INTERNET:{email}\r\nEND:VCARD\r\n")


CARDS = {
    "elena": _card("elena", "Elena Rossi", "Rossi", "Elena", ELENA_PHONE, "elena.rossi@friends.example"),
    "marco": _card("marco", "Marco Neri", "Neri", "Marco", "+39 347 7654321", "marco.neri@example.org"),
    "giulia": _card("giulia", "Giulia Bianchi", "Bianchi", "Giulia", "+39 320 5550000", "giulia@example.org"),
}


@dataclass(frozen=True)
class Event:
    """An event as the server holds it after the turn."""

    uid: str
    summary: str
    start: datetime | date
    end: datetime | date | None


@dataclass
class CalendarWorld:
    server: Radicale
    root: Path

    def allow(self) -> list[str]:
        return [self.server.pattern]

    def config(self) -> str:
        """config.toml's [calendar] and [contacts] tables, as a user sets them up: one login for both."""
        return (f'\n[calendar.sources.home]\nurl = "{self.server.calendar_url}"\nusername = "{USER}"\nsecret = "home-dav"\n'
                f'\n[contacts.sources.people]\nurl = "{self.server.contacts_url}"\nusername = "{USER}"\nsecret = "home-dav"\n')

    def store_passwords(self, env: dict[str, str]) -> None:
        """The one password both sources name (secret = "home-dav"), stored as the user would."""
        done = subprocess.run([sys.executable, "-m", "metnos", "calendar", "password", "home"], env=env, cwd=env["HOME"],
                              input=PASSWORD + "\n", capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"metnos calendar password home failed: {done.stderr.strip()[-300:]}")

    def prepare(self, env: dict[str, str]) -> None:
        """What the home needs once config.toml is written: the password in the vault."""
        self.store_passwords(env)

    def events(self) -> list[Event]:
        out = []
        for obj in self.server.calendar().events():
            for component in icalendar.Calendar.from_ical(obj.data).walk("VEVENT"):
                end = component.decoded("DTEND") if component.get("DTEND") is not None else None
                out.append(Event(str(component.get("UID", "")), str(component.get("SUMMARY", "")),
                                 component.decoded("DTSTART"), end))
        return out

    def outcome(self) -> dict[str, Any]:
        """What the tasks' checks read (bench/agent_suite.py's Outcome)."""
        return {"calendar_events": self.events()}


@contextmanager
def calendar_world() -> Iterator[CalendarWorld]:
    root = Path(tempfile.mkdtemp(prefix="agentbench-calendar-"))
    try:
        with radicale(root / "radicale") as server:
            for seeded in week():
                server.put_event(seeded.ical())
            for uid, card in CARDS.items():
                server.put_card(uid, card)
            yield CalendarWorld(server, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
