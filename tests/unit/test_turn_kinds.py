"""The kind of file a request names, and the sources of an action outside it."""

from __future__ import annotations

import pytest

from metnos.runtime.turn.kinds import kinds_named, outside_kind


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
