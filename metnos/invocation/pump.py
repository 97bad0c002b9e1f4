"""Feeding stdin and draining stdout/stderr of a child under caps.

One thread, one selector: stdin is written as the child reads it, stdout is
kept up to the cap and no further (one byte over is enough to know it is too
large), stderr keeps only its tail. Nothing is ever buffered whole.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from dataclasses import dataclass

_CHUNK = 65536


@dataclass
class Drained:
    stdout: bytes
    stderr_tail: bytes
    timed_out: bool
    too_large: bool


def drain(proc: subprocess.Popen, stdin_data: bytes, *, max_stdout: int, deadline: float, tail: int = 4096) -> Drained:
    out = bytearray()
    err = bytearray()
    sel = selectors.DefaultSelector()
    pending = memoryview(stdin_data)
    for f in (proc.stdin, proc.stdout, proc.stderr):
        os.set_blocking(f.fileno(), False)
    if pending:
        sel.register(proc.stdin, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    sel.register(proc.stdout, selectors.EVENT_READ)
    sel.register(proc.stderr, selectors.EVENT_READ)
    timed_out = too_large = False
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(min(left, 0.5)):
                f = key.fileobj
                if f is proc.stdin:
                    try:
                        n = os.write(f.fileno(), pending[:_CHUNK])
                        pending = pending[n:]
                    except BlockingIOError:
                        continue
                    except (BrokenPipeError, OSError):
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(f)
                        f.close()
                    continue
                try:
                    chunk = os.read(f.fileno(), _CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(f)
                    continue
                if f is proc.stdout:
                    out += chunk[: max_stdout + 1 - len(out)]
                    if len(out) > max_stdout:
                        too_large = True
                        return Drained(bytes(out[:max_stdout]), bytes(err[-tail:]), False, True)
                else:
                    err += chunk
                    if len(err) > 4 * tail:
                        del err[:-tail]
    finally:
        sel.close()
        if proc.stdin and not proc.stdin.closed:
            try:
                proc.stdin.close()
            except OSError:
                pass
    return Drained(bytes(out), bytes(err[-tail:]), timed_out, too_large)
