"""The kind of file a request names, and the sources of an action outside it."""

from __future__ import annotations

import pytest

from metnos.runtime.turn.kinds import kinds_named, outside_kind
from metnos.runtime.turn.names import name_conditions, outside_names


@pytest.mark.parametrize("request_text, expected", [
    ("Move every .txt file in ~/notes/archive into ~/notes/old.", {"txt"}),
    ("delete all *.tmp under ~/projects", {"tmp"}),
    ("Find the PDF files in ~/Downloads and move them into ~/Documents/pdfs.", {"pdf"}),
    ("move the JPGs to ~/Pictures", {"jpg", "jpeg"}),
    ("sposta i file PDF in ~/Documenti", {"pdf"}),
    ("move the .jpg and .png files off the desktop", {"jpg", "jpeg", "png"}),
    # A path's extension names that file, not a kind.
    ("Delete ~/Downloads/old_installer.iso.", set()),
    ("Rename ~/Documents/draft.txt to ~/Documents/final.txt.", set()),
    ("Find the largest file in ~/Downloads and delete it.", set()),
    ("delete the logs in ~/logs", set()),
])
def test_the_kind_a_request_names(request_text: str, expected: set[str]) -> None:
    assert kinds_named(request_text) == expected


def test_photos_are_the_image_formats() -> None:
    kinds = kinds_named("move my photos into ~/Pictures")
    assert {"jpg", "png", "heic"} <= kinds and "txt" not in kinds


def test_sources_outside_the_kind_are_named_and_destinations_are_not() -> None:
    ask = "Move every .txt file in ~/notes/archive into ~/notes/old."
    assert outside_kind(ask, {"paths": ["~/notes/archive/a.txt", "~/notes/archive/keep.md"], "dest_dir": "~/notes/old"})[1] \
        == ["~/notes/archive/keep.md"]
    assert outside_kind(ask, {"entries": [{"path": "/h/notes/archive/b.TXT"}, {"path": "/h/notes/archive/pic.png"}]})[1] \
        == ["/h/notes/archive/pic.png"]
    assert outside_kind(ask, {"moves": [{"src": "~/a.txt", "dst": "~/old/a.md"}]})[1] == []
    assert outside_kind("Delete ~/Downloads/old_installer.iso.", {"paths": ["~/Downloads/old_installer.iso"]})[1] == []


@pytest.mark.parametrize("request_text, when", [
    ("Every Friday at 17:00 send me the first line of ~/notes/meeting.md.", "Every Friday"),
    ("every day at 8 remind me of the vitamins", "every day"),
    ("ogni lunedì alle 9 mandami il promemoria", "ogni lunedì"),
    ("send me the weekly report now", None),
    ("remind me daily to stretch", "daily"),
    ("move every .txt file into ~/old", None),
    ("delete each file in ~/tmp", None),
])
def test_a_request_for_a_recurring_task_is_read_from_its_words(request_text: str, when: str | None) -> None:
    from metnos.runtime.turn.recurrence import asks_for_recurrence
    assert asks_for_recurrence(request_text) == when


def test_a_request_that_also_asks_for_now_is_read_as_such() -> None:
    from metnos.runtime.turn.recurrence import asks_for_now
    assert asks_for_now("delete precious.txt, and every hour from now on")
    assert not asks_for_now("Every Friday at 17:00 send me the first line of ~/notes/meeting.md.")
    assert not asks_for_now("ogni ora controlla la posta")


@pytest.mark.parametrize(("request_text", "expected"), [
    ("Move the files in ~/scans whose name starts with draft_ into ~/old.", {("starts", "draft_")}),
    ('delete the files starting with "tmp-" in ~/x', {("starts", "tmp-")}),
    ("move the reports whose names end in _old.", {("ends", "_old")}),
    ("delete files whose names contain backup", {("contains", "backup")}),
    ("move files with 2023 in their name to ~/a", {("contains", "2023")}),
    ("cancella i file il cui nome inizia con prova_", {("starts", "prova_")}),
    ("elimina i file che finiscono con .bak", {("ends", ".bak")}),
    ("sposta i file con bozza nel nome in ~/vecchi", {("contains", "bozza")}),
    # What a file holds, an extension as a kind, and no condition at all.
    ("delete the log files that start with a header", set()),
    ("Move every .txt file in ~/notes/archive into ~/notes/old.", set()),
    ("delete ~/tmp/a.txt", set()),
])
def test_the_name_conditions_a_request_puts(request_text: str, expected: set[tuple[str, str]]) -> None:
    assert {(c.how, c.text) for c in name_conditions(request_text)} == expected


def test_sources_whose_names_miss_a_condition_are_named_and_destinations_are_not() -> None:
    args = {"moves": [{"src": "~/s/draft_a.txt", "dst": "~/o/final.txt"}, {"src": "~/s/final.txt", "dst": "~/o/draft_x.txt"}],
            "paths": ["~/s", "~/s/DRAFT_c.md"]}
    conditions, outside = outside_names("move the files whose name starts with draft_ into ~/o", args)
    assert [c.words() for c in conditions] == ["whose name starts with draft_"]
    assert outside == ["~/s", "~/s/final.txt"]
    assert outside_names("move everything in ~/s into ~/o", args) == ((), [])
