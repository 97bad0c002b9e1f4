"""The host's result frame, ``<length>\\n<payload>``, as the runtime reads it."""

from __future__ import annotations

import pytest

from metnos.mechanisms.invocation import frame


def test_a_frame_round_trips_and_is_whole_only_when_every_byte_is_there():
    payload = b'{"lines": ["a\\nb"]}'
    framed = frame.frame(payload)
    assert framed == b"%d\n" % len(payload) + payload
    assert frame.unframe(framed) == payload
    assert frame.whole(bytearray(framed))
    for cut in range(len(framed)):
        assert not frame.whole(framed[:cut]), cut
        assert frame.unframe(framed[:cut]) is None


def test_an_empty_payload_is_a_frame():
    assert frame.unframe(b"0\n") == b""


@pytest.mark.parametrize("raw", [
    b"not json",                  # no header at all (an executor writing to the channel itself)
    b"\n{}",                      # an empty length
    b"-2\n{}",                    # a sign is not a digit
    b"2 \n{}",                    # nor is a space
    b"9" * 30 + b"\n",            # a header longer than any the host writes
    b"2\n{}{}",                   # more than the header says
])
def test_anything_else_on_the_channel_is_no_frame(raw):
    assert not frame.whole(raw)
    assert frame.unframe(raw) is None
