"""The invocation host's result channel: ``<length>\\n<payload>``.

The host (host.py, which imports nothing of metnos) writes the frame as its
last act before ``os._exit(0)``. A whole frame tells the runtime the result
is complete without waiting for end-of-file, which a sandbox delivers only
once bwrap's own processes (the namespace's init, bwrap itself) have exited
after the host: about a millisecond and a half of teardown per call.

Anything else on the channel (an executor writing to it directly, a host
killed half-way) is not a frame: the runtime then reads to the end of the
stream as before and reports what it got.
"""

from __future__ import annotations

# The length of the longest header the runtime waits for: digits and the
# newline. A channel that has this much without a newline holds no frame.
HEADER_MAX = 21


def frame(payload: bytes) -> bytes:
    return b"%d\n" % len(payload) + payload


def payload_length(buf: bytes | bytearray) -> tuple[int, int] | None:
    """(header length, payload length) of the frame ``buf`` begins with, or
    None while it begins with no complete, well-formed header."""
    end = buf.find(b"\n", 0, HEADER_MAX)
    if end <= 0 or not buf[:end].isdigit():
        return None
    return end + 1, int(buf[:end])


def whole(buf: bytes | bytearray) -> bool:
    """``buf`` is exactly one complete frame."""
    n = payload_length(buf)
    return n is not None and len(buf) == n[0] + n[1]


def unframe(buf: bytes) -> bytes | None:
    """The payload of ``buf`` when it is exactly one frame, else None."""
    n = payload_length(buf)
    if n is None or len(buf) != n[0] + n[1]:
        return None
    return buf[n[0]:]
