"""Feeding stdin and draining stdout/stderr of a child under caps.

One thread, one selector: stdin is written as the child reads it, stdout is
kept up to the cap and no further (one byte over is enough to know it is too
large), stderr keeps only its tail. Nothing is ever buffered whole.

``run_contained`` is the whole life of a sandboxed child (spawn, drain, kill)
shared by invocations and birth tests, so both get the same caps.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from metnos.sandbox import cgroup

if TYPE_CHECKING:
    from metnos.sandbox.bwrap import WrappedCommand

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


@dataclass
class Contained:
    """How a contained child ended. ``returncode`` is None when it never started."""

    returncode: int | None
    stdout: bytes
    stderr_tail: bytes
    timed_out: bool
    too_large: bool
    pids_cgroup: bool
    spawn_error: str | None = None


def run_contained(wrapped: WrappedCommand, stdin_data: bytes, *, max_stdout: int, deadline: float,
                  max_pids: int, tail: int = 4096) -> Contained:
    """Spawn ``wrapped`` in its own session and pids cgroup, feed and drain it
    under the caps, and leave nothing of it running. Closes ``wrapped``."""
    try:
        cg = cgroup.PidsCgroup(max_pids)
    except OSError:
        cg = None
    try:
        proc = subprocess.Popen(
            wrapped.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=wrapped.env, pass_fds=wrapped.pass_fds, start_new_session=True, cwd="/",
            # cgroup v1 moves a process but not the children it already has,
            # so joining must happen in the child before it execs bwrap.
            preexec_fn=cg.attach_self if cg else None,
        )
    except (OSError, subprocess.SubprocessError) as e:
        if cg:
            cg.close()
        return Contained(None, b"", b"", False, False, cg is not None, str(e))
    finally:
        wrapped.close()
    try:
        d = drain(proc, stdin_data, max_stdout=max_stdout, deadline=deadline, tail=tail)
        timed_out = d.timed_out
        if not timed_out and not d.too_large:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        # The whole process group, then everything the cgroup still holds
        # (a child that called setsid left the group but not the cgroup).
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if cg:
            cg.close()
        proc.wait()
        for f in (proc.stdout, proc.stderr):
            if f:
                f.close()
    return Contained(proc.returncode, d.stdout, d.stderr_tail, timed_out, d.too_large, cg is not None)
