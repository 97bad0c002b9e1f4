"""`metnos pair` draws the device's command as a QR code on a terminal, and only there."""

from __future__ import annotations

import io

import segno

from metnos.adapters.cli import qr


class _Pipe(io.StringIO):
    encoding = "utf-8"


class _Terminal(_Pipe):
    def isatty(self) -> bool:
        return True


def test_a_qr_code_is_drawn_only_on_a_terminal_that_can_show_one() -> None:
    assert qr.can_show(_Terminal(), {"TERM": "xterm-256color"})
    assert not qr.can_show(_Pipe(), {"TERM": "xterm-256color"})  # piped or redirected
    assert not qr.can_show(io.StringIO(), {"TERM": "xterm-256color"})
    assert not qr.can_show(_Terminal(), {"TERM": "dumb"})
    assert not qr.can_show(_Terminal(), {})
    latin = _Terminal()
    latin.encoding = "latin-1"
    assert not qr.can_show(latin, {"TERM": "xterm"})  # no block characters to draw with


def test_the_drawing_is_the_command_as_segno_encodes_it_two_rows_a_line() -> None:
    command = "metnos pair ABCD2345 --server https://127.0.0.1:40123"
    drawn = qr.rendered(command).splitlines()
    code = segno.make(command, error="m", micro=False)
    width, height = code.symbol_size(border=4)
    assert len(drawn) == (height + 1) // 2 and all(len(line) == width for line in drawn)
    assert set("".join(drawn)) <= set(" ▀▄█")
