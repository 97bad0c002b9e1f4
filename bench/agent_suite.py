"""The everyday requests of the agent benchmark, each with the home it needs and a machine check.

A task is data: the request (``{url}`` stands for the bench's local web server),
the files of a fresh fake home, optional modification times, and a check that
reads the answer and what the run left behind (files, outbox, schedules). The
suite lives only here, under bench/: nothing of it may appear in the runtime.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo


@dataclass
class Outcome:
    """What a system left after one task: its final answer and where to look for side effects."""

    answer: str
    home: Path
    outbox: list[dict[str, Any]]
    schedules: list[dict[str, Any]]
    # What reached the mail world's SMTP server (bench/mail_world.py), for the tasks that have one.
    mail_sent: list[dict[str, Any]] = field(default_factory=list)
    # The calendar world's events as its server holds them after the turn (bench/calendar_world.py).
    calendar_events: list[Any] = field(default_factory=list)


Check = Callable[[Outcome], tuple[bool, str]]


@dataclass(frozen=True)
class Task:
    id: str
    text: str
    check: Check
    files: dict[str, str | bytes] = field(default_factory=dict)
    ages_days: dict[str, float] = field(default_factory=dict)  # path -> how many days ago it was modified
    tools: int = 1  # how many tool calls a sensible plan needs
    # "mail": the task runs against real mail servers (bench/mail_world.py); "calendar": against a real
    # CalDAV and CardDAV server holding a week of events and an address book (bench/calendar_world.py).
    world: str = ""
    # What the home needs beyond files, made once they are written (a git repository's history).
    prepare: Callable[[Path], None] | None = None
    settings: str = ""  # config.toml lines the task's user has set (its [location]), for Metnos

    def request(self, url: str) -> str:
        return self.text.replace("{url}", url)


def build_home(task: Task, home: Path) -> None:
    now = time.time()
    for rel, content in task.files.items():
        p = home / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
    for rel, days in task.ages_days.items():
        t = now - days * 86400
        os.utime(home / rel, (t, t))
    if task.prepare is not None:
        task.prepare(home)


# Checks: small combinators, each saying why it failed.

_NUM = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def numbers_in(text: str) -> list[float]:
    out = []
    for m in _NUM.findall(text or ""):
        try:
            out.append(float(m.replace(",", "")))
        except ValueError:
            pass
    return out


def says(*needles: str) -> Check:
    def check(o: Outcome) -> tuple[bool, str]:
        low = (o.answer or "").lower()
        missing = [n for n in needles if n.lower() not in low]
        return (not missing, f"answer lacks {missing}" if missing else "ok")

    return check


def says_any(*needles: str) -> Check:
    def check(o: Outcome) -> tuple[bool, str]:
        low = (o.answer or "").lower()
        ok = any(n.lower() in low for n in needles)
        return ok, "ok" if ok else f"answer has none of {list(needles)}"

    return check


def says_number(value: float, tol: float = 0.006) -> Check:
    def check(o: Outcome) -> tuple[bool, str]:
        ok = any(abs(n - value) <= tol for n in numbers_in(o.answer))
        return ok, "ok" if ok else f"answer lacks the number {value}"

    return check


def exists(*rels: str) -> Check:
    def check(o: Outcome) -> tuple[bool, str]:
        missing = [r for r in rels if not (o.home / r).exists()]
        return (not missing, f"missing on disk: {missing}" if missing else "ok")

    return check


def gone(*rels: str) -> Check:
    def check(o: Outcome) -> tuple[bool, str]:
        left = [r for r in rels if (o.home / r).exists()]
        return (not left, f"still on disk: {left}" if left else "ok")

    return check


def file_has(rel: str, *needles: str) -> Check:
    def check(o: Outcome) -> tuple[bool, str]:
        p = o.home / rel
        if not p.is_file():
            return False, f"{rel} is not a file"
        text = p.read_text(encoding="utf-8", errors="replace").lower()
        missing = [n for n in needles if n.lower() not in text]
        return (not missing, f"{rel} lacks {missing}" if missing else "ok")

    return check


def sent(to: str, *needles: str) -> Check:
    def check(o: Outcome) -> tuple[bool, str]:
        for m in o.outbox:
            body = str(m.get("body", "")).lower()
            if str(m.get("to_user", "")).strip().lower() == to and all(n.lower() in body for n in needles):
                return True, "ok"
        return False, f"no message to {to} with {list(needles)} (outbox: {len(o.outbox)} messages)"

    return check


def mailed(address: str, *needles: str) -> Check:
    """A mail that reached the mail world's SMTP server for ``address``, its text holding every needle."""
    def check(o: Outcome) -> tuple[bool, str]:
        for m in o.mail_sent:
            if address.lower() in [t.lower() for t in m.get("to", [])] and all(n.lower() in m.get("data", "").lower() for n in needles):
                return True, "ok"
        return False, f"no mail to {address} with {list(needles)} ({len(o.mail_sent)} mails arrived)"

    return check


def scheduled(cron_ok: Callable[[list[str]], bool], *needles: str) -> Check:
    """One fitting schedule, and no other: a reminder made twice reminds twice."""
    def check(o: Outcome) -> tuple[bool, str]:
        for s in o.schedules:
            fields = str(s.get("cron", "")).lower().split()
            text = json.dumps(s).lower()
            if len(fields) == 5 and cron_ok(fields) and all(n.lower() in text for n in needles):
                if len(o.schedules) > 1:
                    return False, f"a fitting schedule, and {len(o.schedules) - 1} more the request did not ask for"
                return True, "ok"
        return False, f"no fitting schedule with {list(needles)} ({len(o.schedules)} schedules)"

    return check


def appended(rel: str, before: str, *needles: str) -> Check:
    """The file is what it was, each line once, with the needles in what follows: an append, not a rewrite
    that repeats the list."""
    def check(o: Outcome) -> tuple[bool, str]:
        p = o.home / rel
        if not p.is_file():
            return False, f"{rel} is not a file"
        text = p.read_text(encoding="utf-8", errors="replace")
        if not text.startswith(before):
            return False, f"{rel} no longer begins with what it held"
        added = text[len(before):].lower()
        missing = [n for n in needles if n.lower() not in added]
        again = [line for line in before.splitlines() if line.strip() and line.lower() in added]
        if missing or again:
            return False, f"what was added to {rel} lacks {missing}" if missing else f"{rel} repeats {again}"
        return True, "ok"

    return check


def weekly_on(day: str, hour: str) -> Callable[[list[str]], bool]:
    names = {"1": ("1", "mon"), "5": ("5", "fri"), "0": ("0", "7", "sun")}[day]
    return lambda f: f[1] == hour and f[2] == "*" and f[3] == "*" and f[4] in names


def daily_at(hour: str) -> Callable[[list[str]], bool]:
    return lambda f: f[1] == hour and f[2] == "*" and f[3] == "*" and f[4] == "*"


_SIZE = re.compile(r"(\d+(?:[.,]\d+)?)\s*(bytes|byte|b|kib|kb|k|mib|mb|m|gib|gb|g)\b", re.IGNORECASE)
_UNIT = {"b": 1, "byte": 1, "bytes": 1, "k": 1024, "kb": 1000, "kib": 1024, "m": 1024 ** 2, "mb": 1000 ** 2,
         "mib": 1024 ** 2, "g": 1024 ** 3, "gb": 1000 ** 3, "gib": 1024 ** 3}


def says_size(size_bytes: int, rel_tol: float = 0.15) -> Check:
    """An amount of storage with its unit ("1.5M", "1,5 MB", "1468 KiB", "1500000 bytes") within ``rel_tol``
    of ``size_bytes``: du counts blocks and rounds, and people write MB for MiB."""
    def check(o: Outcome) -> tuple[bool, str]:
        for number, unit in _SIZE.findall(o.answer or ""):
            amount = float(number.replace(",", ".")) * _UNIT[unit.lower()]
            if abs(amount - size_bytes) <= rel_tol * size_bytes:
                return True, "ok"
        return False, f"answer gives no size near {size_bytes} bytes"

    return check


def says_digits(number: str) -> Check:
    """The answer gives the phone number, however it spaces or groups its digits."""
    wanted = re.sub(r"\D", "", number)

    def check(o: Outcome) -> tuple[bool, str]:
        ok = wanted in re.sub(r"\D", "", o.answer or "")
        return ok, "ok" if ok else f"answer lacks the number {number}"

    return check


def says_time_in(zone: str, slack_minutes: int = 10) -> Check:
    """The answer gives the wall-clock time of ``zone`` (H:MM, 24-hour or with am/pm) within the slack of now."""
    def check(o: Outcome) -> tuple[bool, str]:
        now = datetime.now(ZoneInfo(zone))
        said = []
        # An ISO timestamp ("2026-11-29T02:27:03+09:00") gives its time after the T, not in its offset.
        for h, m, half in re.findall(r"(?:\b|(?<=t))(\d{1,2})[:.](\d{2})\s*([ap]\.?m\.?)?",
                                     re.sub(r"[+-]\d\d:\d\d\b", " ", o.answer.lower())):
            hour = int(h) % 12 + (12 if half.startswith("p") else 0) if half else int(h)
            if hour > 23 or int(m) > 59:
                continue
            said.append(f"{hour:02d}:{m}")
            for day in (-1, 0, 1):
                t = now.replace(hour=hour, minute=int(m), second=0, microsecond=0) + timedelta(days=day)
                if abs((t - now).total_seconds()) <= slack_minutes * 60:
                    return True, ""
        return False, f"no time within {slack_minutes} min of {now:%H:%M} in {zone} (said {said or 'none'})"

    return check


def says_none(*needles: str) -> Check:
    def check(o: Outcome) -> tuple[bool, str]:
        low = (o.answer or "").lower()
        found = [n for n in needles if n.lower() in low]
        return (not found, f"answer says {found}" if found else "ok")

    return check


def _events_like(o: Outcome, word: str) -> list[Any]:
    return [e for e in o.calendar_events if word.lower() in e.summary.lower()]


def event_kept(uid: str) -> Check:
    def check(o: Outcome) -> tuple[bool, str]:
        ok = any(e.uid == uid for e in o.calendar_events)
        return ok, "ok" if ok else f"the event {uid!r} is gone from the calendar"

    return check


def event_gone(uid: str) -> Check:
    def check(o: Outcome) -> tuple[bool, str]:
        ok = not any(e.uid == uid for e in o.calendar_events)
        return ok, "ok" if ok else f"the event {uid!r} is still in the calendar"

    return check


def titled(uid: str, summary: str) -> Check:
    """The event is still called what it was: moved, not renamed."""
    def check(o: Outcome) -> tuple[bool, str]:
        found = [e.summary for e in o.calendar_events if e.uid == uid]
        ok = found == [summary]
        return ok, "ok" if ok else f"the event {uid!r} is now titled {found}, not {summary!r}"

    return check


def one_event_at(word: str, weekday: str, hour: int, minute: int = 0, *, within_days: int = 8) -> Check:
    """Exactly one event whose summary holds ``word``, starting on the next ``weekday`` (or the one after,
    within ``within_days`` of today, today included) at hour:minute, the user's time."""
    def check(o: Outcome) -> tuple[bool, str]:
        from bench.calendar_world import WEEKDAYS, local_zone, today

        found = _events_like(o, word)
        if len(found) != 1:
            return False, f"{len(found)} events with {word!r} in the calendar: {[(e.summary, str(e.start)) for e in found]}"
        start = found[0].start
        if not isinstance(start, datetime):
            return False, f"the {word!r} event is all day ({start})"
        local = start.astimezone(local_zone())
        days = (local.date() - today()).days
        ok = (local.weekday() == WEEKDAYS.index(weekday) and (local.hour, local.minute) == (hour, minute)
              and 0 <= days <= within_days)
        return ok, "ok" if ok else f"the {word!r} event starts {local.isoformat()}, not a {weekday} at {hour:02d}:{minute:02d} ahead"

    return check


def all_of(*checks: Check) -> Check:
    def check(o: Outcome) -> tuple[bool, str]:
        for c in checks:
            ok, why = c(o)
            if not ok:
                return False, why
        return True, "ok"

    return check


def today_iso() -> str:
    return datetime.now(timezone.utc).date().isoformat()


def says_today() -> Check:
    def check(o: Outcome) -> tuple[bool, str]:
        now = datetime.now(timezone.utc)
        text = (o.answer or "").lower()
        forms = {now.date().isoformat(), f"{now.strftime('%B').lower()} {now.day}", f"{now.day} {now.strftime('%B').lower()}",
                 now.strftime("%d/%m/%Y"), now.strftime("%m/%d/%Y")}
        ok = any(f in text for f in forms)
        return ok, "ok" if ok else f"answer does not give today's date {now.date()}"

    return check


# The fixtures: a few homes' worth of everyday files.

GARDEN_COMMITTED = {"beds.txt": "tomatoes\nbasil\n", "watering.md": "# Watering\n\nEvery other evening.\n"}
GARDEN_NOW = {"beds.txt": "peppers\nbasil\n", "compost.md": "# Compost\n\nTurn it on Sundays.\n"}


def garden_repository(home: Path) -> None:
    """~/projects/garden as a git repository: one commit, then a file changed and one added since."""
    repo = home / "projects" / "garden"
    repo.mkdir(parents=True, exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "LANG": "C.UTF-8"}
    for rel, text in GARDEN_COMMITTED.items():
        (repo / rel).write_text(text, encoding="utf-8")
    for argv in (["init", "-q", "-b", "main"], ["add", "."],
                 ["-c", "user.name=Gardener", "-c", "user.email=gardener@example.org", "commit", "-q", "-m", "Plan the beds"]):
        subprocess.run(["git", *argv], cwd=repo, env=env, check=True, capture_output=True)
    for rel, text in GARDEN_NOW.items():
        (repo / rel).write_text(text, encoding="utf-8")

DIARY = (
    "2026-03-01 Walked to the lighthouse.\n2026-03-02 Baked rye bread.\n2026-03-03 Fixed the bicycle chain.\n"
    "2026-03-04 Read about volcanoes.\n2026-03-05 Planted basil on the balcony.\n2026-03-06 Met Giulia for coffee.\n"
)
TODO = "# Todo\n\n- renew the library card\n- call the plumber\n- buy stamps\n"
GROCERIES = "date,item,amount\n2026-03-01,bread,3.20\n2026-03-01,olive oil,12.75\n2026-03-02,apples,4.10\n2026-03-03,cheese,9.80\n2026-03-04,coffee,7.50\n2026-03-05,rice,2.35\n"
GROCERIES_TOTAL = 39.70
DINNER = "guest,amount\nanna,18.50\nmarco,22.00\nsara,21.90\n"
DINNER_TOTAL = 62.40
RUNS = "date,minutes,km\n2026-02-01,30,5.1\n2026-02-03,25,4.2\n2026-02-05,35,6.0\n2026-02-07,40,6.8\n"
APP_LOG = (
    "09:00 INFO start\n09:01 ERROR disk full\n09:02 INFO retry\n09:03 ERROR disk full\n"
    "09:04 WARN slow\n09:05 ERROR timeout talking to db\n09:06 INFO stop\n"
)
EVENTS = "\n".join(json.dumps(e) for e in [
    {"type": "login", "user": "ada"}, {"type": "logout", "user": "ada"}, {"type": "login", "user": "bob"},
    {"type": "upload", "user": "bob"}, {"type": "login", "user": "cy"},
]) + "\n"
CONTACTS = json.dumps({"contacts": [
    {"name": "Elena", "email": "elena.verdi@example.org", "phone": "+39 333 100 2000"},
    {"name": "Marco", "email": "marco.neri@example.org", "phone": "+39 333 300 4000"},
]}, indent=2) + "\n"
PACKAGE = json.dumps({"name": "garden-planner", "version": "3.4.1", "license": "MIT"}, indent=2) + "\n"
RECIPE = "# Pancakes\n\nIngredients:\n- 250 g flour\n- 4 eggs\n- 500 ml milk\n- a pinch of salt\n"
APPOINTMENTS = "Dentist: Thursday at 10:45\nHaircut: Saturday at 9:00\n"
MEETING = "Quarterly review moved to room B12.\nBring the budget sheet.\n"

PARTY = "# Giulia's birthday party\n\nSaturday at 16:00.\nAddress: Via Garibaldi 21, Torino\n"

PAGES: dict[str, tuple[str, bytes]] = {
    "/menu.html": ("text/html", b"<html><head><title>Trattoria Sole</title></head><body><h1>Menu</h1>"
                   b"<p>Special of the day: mushroom risotto</p><p>Dessert: lemon tart</p></body></html>"),
    "/weather.json": ("application/json", json.dumps({"city": "Trieste", "temperature_c": 17, "sky": "cloudy"}).encode()),
    "/news.html": ("text/html", b"<html><head><title>Town news</title></head><body><h1>The harbour bridge reopens on Monday</h1>"
                   b"<p>Works finished early.</p></body></html>"),
    "/status.txt": ("text/plain", b"backup: ok\nlast run: 2026-03-05 02:00\nfiles: 1284\n"),
    # The web executors' pages: an article among menus and ads, a page of links.
    "/library.html": ("text/html", b'<html lang="en"><head><title>City news</title></head><body>'
                      b'<nav><a href="/">Home</a> <a href="/sport.html">Sport</a></nav>'
                      b'<div class="advertisement">BUY NOW: two pizzas for the price of one</div>'
                      b"<article><h1>The city library reopens</h1><p>After two years of works the city library "
                      b"reopens on Monday. The new reading room is open every day from nine in the morning until "
                      b"seven in the evening, and the archive of the local papers can be visited on Saturdays.</p>"
                      b"</article><footer>Copyright 2026 City news</footer></body></html>"),
    "/links.html": ("text/html", b"<html><head><title>Kitchen corner</title></head><body><h1>Kitchen corner</h1><ul>"
                    b'<li><a href="/recipes/pancakes.html">Pancake recipe</a></li>'
                    b'<li><a href="/shop/pans.html">Pans on sale</a></li>'
                    b'<li><a href="/recipes/risotto.html">Risotto recipe</a></li>'
                    b'<li><a href="/about.html">About us</a></li></ul></body></html>'),
}


def search_reply(query: str) -> bytes:
    """The bench's stand-in for a SearXNG instance (``/search?q=...&format=json``), as find_urls reads it."""
    return json.dumps({"query": query, "results": [
        {"url": "https://library.example.org/hours", "title": "City library: opening hours",
         "content": "Open every day from 9 to 19.", "engine": "bench"},
        {"url": "https://news.example.org/library", "title": "The library reopens", "content": "News.", "engine": "bench"},
    ]}).encode()


def _blob(n: int) -> str:
    return "x" * n


TASKS: list[Task] = [
    # Reading and answering: one tool.
    Task("diary_last_lines", "Read ~/journal/march.txt and tell me the last two lines.",
         says("basil", "giulia"), {"journal/march.txt": DIARY}),
    Task("todo_first_item", "What is the first item on my todo list in ~/lists/things-to-do.md?",
         says("library card"), {"lists/things-to-do.md": TODO}),
    Task("csv_total", "What is the total of the amount column in ~/receipts/groceries.csv?",
         says_number(GROCERIES_TOTAL), {"receipts/groceries.csv": GROCERIES}, tools=2),
    Task("largest_document", "Which is the largest file in ~/Documents?",
         says("thesis_draft.pdf"),
         {"Documents/letter.txt": _blob(1200), "Documents/thesis_draft.pdf": _blob(48000),
          "Documents/cv.pdf": _blob(9000), "Documents/summary.md": _blob(300)}, tools=2),
    Task("count_photos", "How many .jpg photos are there in ~/Pictures?",
         says_number(7, 0),
         {**{f"Pictures/DSC_{i:04d}.jpg": _blob(100 + i) for i in range(1, 8)}, "Pictures/readme.txt": "photos"}),
    Task("list_notes", "List the markdown files in ~/notes.",
         says("groceries.md", "ideas.md", "travel.md"),
         {"notes/groceries.md": "milk\n", "notes/ideas.md": "a shed\n", "notes/travel.md": "Lisbon\n", "notes/old.txt": "x\n"}),
    Task("today_date", "What is today's date?", says_today()),
    Task("my_location", "Which town am I in, going by my settings?", says("lucca"),
         settings='[location]\nname = "Lucca, Italy"\nlat = 43.8429\nlon = 10.5027\n'),
    Task("error_lines", "How many lines in ~/logs/server.log contain ERROR?", says_number(3, 0), {"logs/server.log": APP_LOG}),
    Task("page_special", "What is the special of the day on {url}/menu.html?", says("mushroom risotto")),
    Task("api_temperature", "Fetch {url}/weather.json and tell me the temperature.", says_number(17, 0)),
    Task("package_version", "Which version is in ~/projects/garden/package.json?", says("3.4.1"),
         {"projects/garden/package.json": PACKAGE}),
    Task("recipe_eggs", "How many eggs does the recipe in ~/recipes/pancakes.md need?", says_number(4, 0),
         {"recipes/pancakes.md": RECIPE}),
    Task("find_invoices", "Find the files with 'invoice' in their name under ~/Documents.",
         says("invoice_march.pdf", "invoice_april.pdf", "invoice_may.pdf"),
         {"Documents/invoice_march.pdf": "a", "Documents/2026/invoice_april.pdf": "b", "Documents/2026/q2/invoice_may.pdf": "c",
          "Documents/receipt.pdf": "d"}),
    Task("contact_email", "What is Elena's email address in ~/contacts.json?", says("elena.verdi@example.org"),
         {"contacts.json": CONTACTS}),
    Task("backup_status", "Fetch {url}/status.txt and tell me how many files the backup has.", says_number(1284, 0)),
    Task("passport_where", "Is there a file called passport.pdf somewhere under ~/Documents? Tell me its folder.",
         says("scans"), {"Documents/scans/passport.pdf": "p", "Documents/letter.txt": "l"}),
    Task("news_headline", "What is the headline on {url}/news.html?", says("harbour bridge")),
    # Acting: one tool.
    Task("delete_tmp", "Delete the .tmp files in ~/Downloads.",
         all_of(gone("Downloads/a.tmp", "Downloads/b.tmp", "Downloads/c.tmp"), exists("Downloads/report.pdf", "Downloads/song.mp3")),
         {"Downloads/a.tmp": "1", "Downloads/b.tmp": "2", "Downloads/c.tmp": "3", "Downloads/report.pdf": "r", "Downloads/song.mp3": "s"},
         tools=2),
    Task("send_late", "Send a message to elena saying that I will be late tonight.", sent("elena", "late")),
    Task("weekly_reminder", "Every Monday at 9:00 remind me to water the plants.",
         scheduled(weekly_on("1", "9"), "water")),
    Task("daily_reminder", "Every day at 8:00 send me a message saying take the vitamins.",
         scheduled(daily_at("8"), "vitamins")),
    Task("save_note", "Save the text 'call the bank on Friday' to ~/notes/bank.md.",
         file_has("notes/bank.md", "call the bank on friday")),
    Task("append_shopping", "Add coffee to the end of my shopping list ~/notes/shopping.md.",
         appended("notes/shopping.md", "- lentils\n- oat flakes\n", "coffee"), {"notes/shopping.md": "- lentils\n- oat flakes\n"}),
    Task("rename_draft", "Rename ~/Documents/draft.txt to ~/Documents/final.txt.",
         all_of(gone("Documents/draft.txt"), file_has("Documents/final.txt", "the final words")),
         {"Documents/draft.txt": "the final words\n"}),
    Task("delete_iso", "Delete ~/Downloads/old_installer.iso.",
         all_of(gone("Downloads/old_installer.iso"), exists("Downloads/keep.iso")),
         {"Downloads/old_installer.iso": "iso", "Downloads/keep.iso": "keep"}),
    Task("move_photos_by_date", "Move the photos in ~/Pictures/inbox whose name starts with IMG_2024 into ~/Pictures/2024.",
         all_of(exists("Pictures/2024/IMG_20240105.jpg", "Pictures/2024/IMG_20240612.jpg"),
                gone("Pictures/inbox/IMG_20240105.jpg", "Pictures/inbox/IMG_20240612.jpg"), exists("Pictures/inbox/IMG_20231224.jpg")),
         {"Pictures/inbox/IMG_20240105.jpg": "a", "Pictures/inbox/IMG_20240612.jpg": "b", "Pictures/inbox/IMG_20231224.jpg": "c"},
         tools=2),
    # Chains of 2 to 4 tools.
    Task("dinner_total_to_marco", "Add up the amount column of ~/receipts/dinner.csv and send the total to marco.",
         sent("marco", "62.4"), {"receipts/dinner.csv": DINNER}, tools=3),
    Task("delete_largest_download", "Find the largest file in ~/Downloads and delete it.",
         all_of(gone("Downloads/movie.mkv"), exists("Downloads/a.zip", "Downloads/list.txt")),
         {"Downloads/movie.mkv": _blob(60000), "Downloads/a.zip": _blob(5000), "Downloads/list.txt": _blob(200)}, tools=3),
    Task("archive_txt_notes", "Move every .txt file in ~/notes/archive into ~/notes/old.",
         all_of(exists("notes/old/one.txt", "notes/old/two.txt"), gone("notes/archive/one.txt", "notes/archive/two.txt"),
                exists("notes/archive/keep.md")),
         {"notes/archive/one.txt": "1", "notes/archive/two.txt": "2", "notes/archive/keep.md": "k"}, tools=2),
    Task("save_page", "Fetch {url}/menu.html and save its text to ~/web/menu.txt.",
         file_has("web/menu.txt", "mushroom risotto"), tools=2),
    Task("temperature_to_anna", "Get the temperature from {url}/weather.json and send it to anna in a message.",
         sent("anna", "17"), tools=2),
    Task("todo_to_elena", "Read ~/lists/things-to-do.md and send its first item to elena.", sent("elena", "library card"),
         {"lists/things-to-do.md": TODO}, tools=2),
    Task("newest_note", "Which markdown file in ~/notes was modified most recently?", says("plans.md"),
         {"notes/a.md": "a", "notes/plans.md": "p", "notes/z.md": "z"},
         ages_days={"notes/a.md": 9, "notes/plans.md": 0.5, "notes/z.md": 30}, tools=2),
    Task("average_minutes", "What is the average of the minutes column in ~/health/runs.csv?", says_number(32.5),
         {"health/runs.csv": RUNS}, tools=2),
    Task("priciest_item", "Which item in ~/receipts/groceries.csv has the highest amount?", says("olive oil"),
         {"receipts/groceries.csv": GROCERIES}, tools=2),
    Task("diary_last_to_file", "Read ~/journal/march.txt and write its last line to ~/notes/today.md.",
         file_has("notes/today.md", "giulia"), {"journal/march.txt": DIARY}, tools=2),
    Task("delete_tmp_recursive", "Find all .tmp files anywhere under ~/projects and delete them.",
         all_of(gone("projects/a/x.tmp", "projects/b/c/y.tmp"), exists("projects/a/garden.py")),
         {"projects/a/x.tmp": "x", "projects/b/c/y.tmp": "y", "projects/a/garden.py": "print(1)\n"}, tools=2),
    Task("desktop_photos", "Move the .jpg files on ~/Desktop into ~/Pictures.",
         all_of(exists("Pictures/sunset.jpg", "Pictures/cat.jpg"), gone("Desktop/sunset.jpg", "Desktop/cat.jpg"), exists("Desktop/todo.txt")),
         {"Desktop/sunset.jpg": "b", "Desktop/cat.jpg": "c", "Desktop/todo.txt": "t"}, tools=2),
    Task("pdfs_to_folder", "Find the PDF files in ~/Downloads and move them into ~/Documents/pdfs.",
         all_of(exists("Documents/pdfs/tax.pdf", "Documents/pdfs/manual.pdf"), gone("Downloads/tax.pdf", "Downloads/manual.pdf"),
                exists("Downloads/photo.png")),
         {"Downloads/tax.pdf": "t", "Downloads/manual.pdf": "m", "Downloads/photo.png": "p"}, tools=2),
    Task("music_total_size", "What is the total size in bytes of the files in ~/Music?", says_number(4000, 0),
         {"Music/a.mp3": _blob(1000), "Music/b.mp3": _blob(2500), "Music/c.mp3": _blob(500)}, tools=2),
    Task("headline_to_marco", "Fetch {url}/news.html and send its headline to marco.", sent("marco", "harbour bridge"), tools=2),
    Task("count_logins", "Read ~/logs/events.jsonl and tell me how many events have type login.", says_number(3, 0),
         {"logs/events.jsonl": EVENTS}, tools=3),
    Task("three_largest_videos", "What are the three largest files in ~/Videos?",
         says("trip.mp4", "wedding.mp4", "concert.mp4"),
         {"Videos/trip.mp4": _blob(30000), "Videos/wedding.mp4": _blob(50000), "Videos/concert.mp4": _blob(40000),
          "Videos/clip.mp4": _blob(100)}, tools=2),
    Task("total_to_file", "Compute the total of the amount column in ~/receipts/groceries.csv and write it to ~/receipts/total.txt.",
         file_has("receipts/total.txt", "39.7"), {"receipts/groceries.csv": GROCERIES}, tools=3),
    Task("delete_tmp_and_tell", "Delete the .tmp files in ~/Downloads and then send elena a message saying it is done.",
         all_of(gone("Downloads/x.tmp", "Downloads/y.tmp"), exists("Downloads/stay.txt"), sent("elena", "")),
         {"Downloads/x.tmp": "x", "Downloads/y.tmp": "y", "Downloads/stay.txt": "k"}, tools=3),
    Task("appointment_to_paolo", "Read ~/notes/appointments.md and send paolo a message with the time of the dentist.",
         sent("paolo", "10:45"), {"notes/appointments.md": APPOINTMENTS}, tools=2),
    Task("meeting_weekly", "Every Friday at 17:00 send me the first line of ~/notes/meeting.md.",
         scheduled(weekly_on("5", "17"), "meeting.md"), {"notes/meeting.md": MEETING}),
    # The web: a page's readable text, its links, a search (find_urls, read_urls_html).
    Task("web_article_hours", "Read the article at {url}/library.html and tell me until what time the reading room is open.",
         says_any("seven in the evening", "7 in the evening", "7 pm", "7pm", "7 p.m.", "19:00", "7:00")),
    Task("web_recipe_links", "Which links on {url}/links.html are recipes? Give me their addresses.",
         says("recipes/pancakes.html", "recipes/risotto.html")),
    Task("web_search_library", "Search the web for the opening hours of the city library and give me the address of the first result.",
         says("library.example.org/hours")),
    Task("largest_pdf_to_marco", "Find the largest PDF in ~/Documents and send its name to marco.",
         sent("marco", "atlas.pdf"),
         {"Documents/atlas.pdf": _blob(70000), "Documents/small.pdf": _blob(700), "Documents/big.txt": _blob(90000)}, tools=4),
    # Commands ([commands] allow, its default list): du and git, as a person would have them used.
    Task("music_disk_space", "How much disk space is my ~/Music folder taking up?", says_size(1_500_000),
         {"Music/album/01.flac": _blob(600_000), "Music/album/02.flac": _blob(700_000), "Music/single.mp3": _blob(200_000)}),
    Task("garden_repo_changes", "What has changed in my ~/projects/garden git repository since the last commit?",
         says("beds.txt", "compost.md"), prepare=garden_repository),
    # Mail, against dovecot and aiosmtpd on 127.0.0.1 (bench/mail_world.py: the school's mail, Elena's address).
    Task("mail_school_today", "Anything from the school today in my mail?",
         says_any("museo", "museum", "egizio", "egyptian"), world="mail"),
    Task("mail_unread_count", "How many unread emails do I have?", says_number(2, 0), world="mail"),
    Task("mail_address_to_elena", "Send Elena the address in ~/notes/party.md by mail.",
         mailed("elena.rossi@friends.example", "Garibaldi 21"), {"notes/party.md": PARTY}, tools=2, world="mail"),
    # MCP tools: real servers from PyPI added to the home with `metnos mcp add` (bench/mcp_world.py).
    Task("mcp_time_tokyo", "What time is it in Tokyo right now?", says_time_in("Asia/Tokyo"), world="mcp:time"),
    Task("mcp_git_last_commit", "What is the message of the last commit in the git repository ~/projects/lighthouse?",
         says("lamp timer"), world="mcp:git"),
]

# Calendar and contacts, against Radicale on 127.0.0.1 (bench/calendar_world.py: a week of events around
# today, Thursday afternoon taken by a project review, two team meetings, the dentist on Tuesday).
CALENDAR_TASKS: list[Task] = [
    Task("cal_thursday_free", "Am I free on Thursday afternoon?",
         # Busy: said so, or the review (or its hour) named; never a yes.
         all_of(says_any("not free", "busy", "review", "14:00", "2 pm", "2pm", "2:00 pm", "14.00"),
                says_none("yes", "you are free", "you're free", "i am free", "i'm free")), tools=2, world="calendar"),
    Task("cal_move_dentist", "Move my dentist appointment to Friday at 10.",
         all_of(event_kept("dentist"), one_event_at("dentist", "friday", 10, within_days=13),
                titled("dentist", "Dentist appointment")), tools=3, world="calendar"),
    Task("cal_elena_phone", "What's Elena's phone number?", says_digits("+39 347 555 0199"), world="calendar"),
    Task("cal_tomorrow", "What do I have tomorrow?", all_of(says_any("plumber", "boiler"), says("yoga"), says_none("haircut")),
         tools=2, world="calendar"),
    Task("cal_lunch_marco", "Add lunch with Marco on Saturday at 13:00 to my calendar.",
         one_event_at("marco", "saturday", 13), tools=2, world="calendar"),
    Task("cal_cancel_team", "Cancel the team meeting on Wednesday.",
         all_of(event_gone("team-wednesday"), event_kept("team-monday"), event_kept("dentist"), event_kept("thursday-review")),
         tools=3, world="calendar"),
]
TASKS += CALENDAR_TASKS

# A handful that touch each kind of check, for CI.
SLICE = ("diary_last_lines", "csv_total", "delete_tmp", "page_special", "send_late", "weekly_reminder")
