"""Feeding stdin and draining stdout/stderr of a child under caps.

One thread, one selector: stdin is written as the child reads it, stdout is
kept up to the cap and no further (one byte over is enough to know it is too
large), stderr keeps only its tail. Nothing is ever buffered whole.

``run_contained`` is the whole life of a sandboxed child (spawn, drain, kill)
shared by invocations and birth tests, so both get the same caps: a cgroup
for processes and memory, or a memory watchdog where no memory cgroup can be
used; the drain loop looks at the memory cap between reads.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from metnos.mechanisms.sandbox import cgroup
from metnos.mechanisms.sandbox.memwatch import MemoryWatchdog, descendants

if TYPE_CHECKING:
    from metnos.mechanisms.sandbox.bwrap import WrappedCommand

_CHUNK = 65536
# How often the memory cap is looked at: a cgroup only needs its OOM counter
# read (the kernel enforces the cap); the watchdog enforces it itself, so it
# looks more often.
_CGROUP_EVERY_S = 0.05
_WATCHDOG_EVERY_S = 0.02


@dataclass
class Drained:
    stdout: bytes
    stderr_tail: bytes
    timed_out: bool
    too_large: bool
    stopped: bool = False  # ``stop`` said so
    complete: bool = False  # ``complete`` said so of stdout before its end


def drain(proc: subprocess.Popen, stdin_data: bytes, *, max_stdout: int, deadline: float, tail: int = 4096,
          stop: Callable[[], bool] | None = None, stop_every: float = 0.5,
          complete: Callable[[bytearray], bool] | None = None) -> Drained:
    """Feed and read ``proc`` until its pipes close, the deadline passes, the
    output cap is reached, ``stop()`` (called about every ``stop_every``
    seconds) returns True, or ``complete(stdout so far)`` does; stderr is
    then read for what is already in its pipe."""
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
    next_look = time.monotonic() + stop_every
    try:
        while sel.get_map():
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                timed_out = True
                break
            if stop is not None and now >= next_look:
                next_look = now + stop_every
                if stop():
                    return Drained(bytes(out), bytes(err[-tail:]), False, False, True)
            for key, _ in sel.select(min(left, stop_every if stop is not None else 0.5)):
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
                    if complete is not None and complete(out):
                        err += _available(proc.stderr.fileno())
                        return Drained(bytes(out), bytes(err[-tail:]), False, False, complete=True)
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


def _available(fd: int, limit: int = 16 * _CHUNK) -> bytes:
    """What a non-blocking ``fd`` holds now (up to ``limit``: a writer still
    at it does not keep the reader here)."""
    data = bytearray()
    while len(data) < limit:
        try:
            chunk = os.read(fd, _CHUNK)
        except OSError:  # BlockingIOError: nothing more for now
            break
        if not chunk:
            break
        data += chunk
    return bytes(data)


class MemoryGuard(Protocol):
    memory_mechanism: str

    def memory_exceeded(self) -> bool: ...

    def memory_peak(self) -> int | None: ...


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
    # "cgroup-v2", "cgroup-v1" or "watchdog": what held the memory cap.
    memory_cap: str = ""
    memory_exceeded: bool = False
    memory_peak: int | None = None

    @property
    def layers(self) -> list[str]:
        """The caps in force, named as the invocation's layers."""
        out = ["pids-cgroup"] if self.pids_cgroup else []
        if self.memory_cap:
            out.append("memory-watchdog" if self.memory_cap == "watchdog" else "memory-cgroup")
        return out


def _read_until_eof(fd: int, deadline: float, limit: int = 65536) -> bytes:
    data = bytearray()
    while len(data) < limit:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return bytes(data)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _popen(wrapped: WrappedCommand, argv: list[str], pass_fds: tuple[int, ...],
           preexec_fn: Callable[[], None] | None = None) -> subprocess.Popen:
    """The child in a process group of its own (what ``_kill_group`` kills).

    A sandbox stays in the runtime's session: a setsid costs the kernel's
    autogroup work on every spawn (milliseconds under load), and the terminal
    it would keep out is already out of reach (no terminal device in the
    sandbox's /dev, stdio are pipes, seccomp refuses TIOCSTI; see
    metnos.mechanisms.sandbox.bwrap.dev_args). Without bwrap, where none of that holds,
    the child gets a session of its own here."""
    if wrapped.plan.active:
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=wrapped.env, pass_fds=pass_fds, cwd="/", process_group=0, preexec_fn=preexec_fn)
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=wrapped.env, pass_fds=pass_fds, cwd="/", start_new_session=True, preexec_fn=preexec_fn)


def _spawn_born_inside(wrapped: WrappedCommand, cg: cgroup.InvocationCgroup) -> subprocess.Popen:
    """Spawn with the calling thread inside ``cg``: the child, and everything
    it forks, is in the invocation's groups from its first instruction, and
    no process is moved. No preexec_fn either, so the spawn is a vfork.
    Raises OSError when the thread cannot go in or come back out; a child
    already spawned is then killed."""
    proc: subprocess.Popen | None = None
    try:
        try:
            cg.enter_this_thread()
        except OSError as e:
            raise OSError(f"could not put the sandbox in its cgroup: {e}") from e
        proc = _popen(wrapped, wrapped.argv, wrapped.pass_fds)
    finally:
        try:
            cg.leave_this_thread()
        except OSError as e:
            if proc is not None:
                _kill_group(proc)
                proc.wait()
                for f in (proc.stdin, proc.stdout, proc.stderr):
                    if f:
                        f.close()
            raise OSError(f"could not take the spawning thread out of the sandbox's cgroup: {e}") from e
    return proc


def _spawn_gated(wrapped: WrappedCommand, cg: cgroup.InvocationCgroup, deadline: float) -> subprocess.Popen:
    """Start bwrap and put its sandbox into ``cg`` before anything runs there,
    where the spawning thread cannot step into ``cg`` itself (cgroup v2).

    bwrap reports the pid of its sandbox child (``--info-fd``) and that child
    waits, with the sandbox built but nothing executed, for a byte on
    ``--block-fd``. bwrap itself is moved first: a cgroup move waits for an
    RCU grace period (~10 ms here) and this way the wait runs while bwrap
    builds the sandbox; the child's move right after is quick. It also spares
    the full fork of the runtime that a preexec_fn costs.

    The child reads end-of-file on the gate as a go too, so a child that is
    not released is killed first; until released it is still in bwrap's
    process group (it calls setsid after the gate). Raises OSError when the
    child cannot be moved.
    """
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    released = False
    proc: subprocess.Popen | None = None
    try:
        try:
            proc = _popen(wrapped, wrapped.gated_argv(info_w, block_r), (*wrapped.pass_fds, info_w, block_r))
        finally:
            os.close(info_w)
            os.close(block_r)
        try:
            try:
                cg.attach(proc.pid)
            except ProcessLookupError:
                pass  # bwrap already failed; its stderr says why
            info = _read_until_eof(info_r, deadline)
            # No info, or a child already gone: bwrap could not build the
            # sandbox and is exiting (its stderr says why), or the deadline
            # passed and the drain reports it.
            if info:
                cg.attach(int(json.loads(info)["child-pid"]))
                os.write(block_w, b"1")
                released = True
        except (ProcessLookupError, BrokenPipeError):
            pass
        except (OSError, ValueError, KeyError, TypeError) as e:
            _kill_group(proc)
            proc.wait()
            for f in (proc.stdin, proc.stdout, proc.stderr):
                if f:
                    f.close()
            proc = None  # reaped: its group id may belong to someone else now
            raise OSError(f"could not put the sandbox in its cgroup: {e}") from e
        return proc
    finally:
        if proc is not None and not released:
            _kill_group(proc)
        os.close(info_r)
        os.close(block_w)


def _finish(proc: subprocess.Popen, cg: cgroup.InvocationCgroup | None) -> None:
    """Reap the killed tree and remove its cgroup (which waits for the
    members to be gone)."""
    try:
        if cg:
            cg.close()
        proc.wait()
    finally:
        for f in (proc.stdout, proc.stderr):
            if f:
                f.close()


class _Finisher:
    """One thread that finishes killed sandboxes off the callers' path: the
    teardown of a sandbox (its processes exiting, bwrap reaped, the cgroup
    removed) takes about a millisecond and a half that no caller waits for.
    At exit, what is still queued is finished before the interpreter goes
    (within ``_FINISH_AT_EXIT_S``; the cgroup sweep takes anything left)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: list[tuple[subprocess.Popen, cgroup.InvocationCgroup | None]] = []
        self._busy = 0
        self._thread: threading.Thread | None = None

    def put(self, proc: subprocess.Popen, cg: cgroup.InvocationCgroup | None) -> None:
        with self._cond:
            if self._thread is None or not self._thread.is_alive():  # first use, or a forked child
                self._thread = threading.Thread(target=self._run, name="metnos-sandbox-finisher", daemon=True)
                self._thread.start()
            self._queue.append((proc, cg))
            self._busy += 1
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                proc, cg = self._queue.pop(0)
            try:
                _finish(proc, cg)
                if cg is not None:
                    # The next call's groups, while nothing waits for them.
                    cgroup.make_spare(cg.max_pids, cg.memory_bytes)
            except Exception:  # noqa: BLE001 - a finisher that stops leaves every later sandbox unreaped
                pass
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until everything queued is finished; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._busy == 0, timeout)


_FINISH_AT_EXIT_S = 5.0
_finisher = _Finisher()
atexit.register(_finisher.wait_idle, _FINISH_AT_EXIT_S)


def finish_later(proc: subprocess.Popen, cg: cgroup.InvocationCgroup | None) -> None:
    _finisher.put(proc, cg)


def finished(timeout: float = _FINISH_AT_EXIT_S) -> bool:
    """Every sandbox handed to the finisher is reaped and its cgroup gone."""
    return _finisher.wait_idle(timeout)


def run_contained(wrapped: WrappedCommand, stdin_data: bytes, *, max_stdout: int, deadline: float,
                  max_pids: int, max_memory_bytes: int, tail: int = 4096,
                  complete: Callable[[bytearray], bool] | None = None) -> Contained:
    """Spawn ``wrapped`` in its own session and cgroup, feed and drain it
    under the caps, and leave nothing of it running. Closes ``wrapped``.

    ``complete(stdout so far)`` True means the child has said all it will
    (a whole result frame, written just before the host exits 0): the tree
    is then killed instead of awaited, and the returncode is that 0."""
    try:
        cg = cgroup.for_invocation(max_pids, max_memory_bytes)
    except OSError:
        cg = None
    try:
        if cg is not None and cg.thread_moves:
            proc = _spawn_born_inside(wrapped, cg)
        elif cg is not None and wrapped.plan.active:
            proc = _spawn_gated(wrapped, cg, deadline)
        else:
            # The child joins before it execs (a process with children of
            # its own would leave them behind under v1).
            proc = _popen(wrapped, wrapped.argv, wrapped.pass_fds, preexec_fn=cg.attach_self if cg else None)
    except (OSError, subprocess.SubprocessError) as e:
        if cg:
            cg.close()
        return Contained(None, b"", b"", False, False, cg is not None and cg.caps_pids, str(e))
    finally:
        wrapped.close()
    guard: MemoryGuard
    if cg is not None and cg.caps_memory:
        guard, every = cg, _CGROUP_EVERY_S
    else:
        members = cg.pids if cg is not None and cg.caps_pids else (lambda: descendants(proc.pid))
        guard, every = MemoryWatchdog(max_memory_bytes, members), _WATCHDOG_EVERY_S
    d: Drained | None = None
    try:
        d = drain(proc, stdin_data, max_stdout=max_stdout, deadline=deadline, tail=tail,
                  stop=guard.memory_exceeded, stop_every=every, complete=complete)
        timed_out = d.timed_out
        if not (timed_out or d.too_large or d.stopped or d.complete):
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        # A sandbox whose result is whole is killed, not waited for: every
        # member gets SIGKILL and runs no more code, and its pid namespace
        # dies with its init (no fork succeeds there once the init is gone).
        # Without bwrap there is no such namespace: the tree is waited out.
        quick = d is not None and d.complete and wrapped.plan.active
        # The whole process group, then everything the cgroup still holds
        # (a child that called setsid left the group but not the cgroup).
        _kill_group(proc)
        if cg and quick:
            cg.kill_members()
        elif cg:
            cg.kill_all()
        # Looked at once more when it is all over: the kernel may have
        # killed a child for memory while the rest carried on and finished.
        exceeded = guard.memory_exceeded()
        peak = guard.memory_peak() if exceeded else None  # said only of a call the cap ended
        if quick:
            finish_later(proc, cg)
        else:
            _finish(proc, cg)
    return Contained(0 if d.complete else proc.returncode, d.stdout, d.stderr_tail, timed_out, d.too_large,
                     cg is not None and cg.caps_pids, memory_cap=guard.memory_mechanism,
                     memory_exceeded=exceeded, memory_peak=peak)
