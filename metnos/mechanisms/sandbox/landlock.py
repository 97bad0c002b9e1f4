"""Landlock through _ctypes: probe the ABI and restrict the calling process.

This module is imported by the runtime (to report the ABI) and, inside the
sandbox, by the invocation host, which runs as ``python3 -I -S`` with nothing
but the standard library. So it must stay stdlib-only and self-contained: no
imports from ``metnos``.

Landlock has to be applied by the sandboxed process to itself, after bwrap has
built the mount namespace: rules are attached to inodes opened by path, and
only the paths the sandbox shows are the ones to name.
"""

# No ``from __future__ import annotations``: importing __future__ costs the
# sandboxed host a quarter of a millisecond per call, and every annotation
# here evaluates on the interpreters Metnos runs on (3.11+).
import _ctypes
import os
import sys

# The landlock syscalls have the same numbers on every architecture (they
# were added after the syscall tables were unified).
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446

_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_RULE_NET_PORT = 2
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem access rights, by the ABI that introduced them.
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5

NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4

SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

# Rights that may be granted on a regular file (anything else is EINVAL).
_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV

READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
# Writing includes IOCTL_DEV deliberately not: no granted path needs terminal
# or device ioctls, and leaving it out is what stops TIOCSTI on a tty opened
# after the restriction.
WRITE = (
    READ
    | FS_WRITE_FILE
    | FS_REMOVE_DIR
    | FS_REMOVE_FILE
    | FS_MAKE_DIR
    | FS_MAKE_REG
    | FS_MAKE_SYM
    | FS_MAKE_FIFO
    | FS_REFER
    | FS_TRUNCATE
)
DEVICE_RW = FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE


class LandlockError(OSError):
    pass


# Two calls into libc are all this needs, made through _ctypes, the extension
# module under ctypes: the host imports this module inside the sandbox at
# every invocation, and ``import ctypes`` (its ~70 type classes, struct,
# _endian) cost more there than all of Landlock's work. The structures the
# kernel reads are packed into bytes, which _ctypes passes as pointers.
class _CLong(_ctypes._SimpleCData):
    _type_ = "l"


class _CInt(_ctypes._SimpleCData):
    _type_ = "i"


class _CULong(_ctypes._SimpleCData):
    _type_ = "L"


class _Syscall(_ctypes.CFuncPtr):
    """``long syscall(long number, ...)``."""

    _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
    _restype_ = _CLong


class _Prctl(_ctypes.CFuncPtr):
    """``int prctl(int option, ...)``: an int, read as one (a wider read
    would take -1 for 4294967295)."""

    _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
    _restype_ = _CInt


def _libc_function(kind: type, name: str):  # -> a callable libc function
    return kind(_ctypes.dlsym(_ctypes.dlopen(None, 0), name))


def _u64(x: int) -> bytes:
    return x.to_bytes(8, sys.byteorder)


def _fail(what: str) -> LandlockError:
    err = _ctypes.get_errno()
    return LandlockError(err, what + ": " + os.strerror(err))


def abi_version() -> int:
    """The Landlock ABI the kernel offers; 0 when there is none (or it is off)."""
    try:
        syscall = _libc_function(_Syscall, "syscall")
    except OSError:
        return 0
    v = syscall(_SYS_CREATE_RULESET, None, _CULong(0), _CREATE_RULESET_VERSION)
    return int(v) if v > 0 else 0


def handled_fs(abi: int) -> int:
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


def restrict_self(
    rules: list[tuple[str, int]],
    *,
    tcp_connect_ports: list[int] | None,
    abi: int | None = None,
) -> int:
    """Restrict this process (and its future children) to ``rules``.

    ``rules`` pairs an existing path with the rights granted beneath it; paths
    that do not exist are skipped (a grant on a folder not yet created is not
    an error, as with bwrap). ``tcp_connect_ports`` is None to leave TCP alone,
    or the ports that may be connected to (empty: none). Returns the ABI used.
    Raises LandlockError when the kernel refuses.
    """
    abi = abi_version() if abi is None else abi
    if abi < 1:
        raise LandlockError(0, "landlock is not available")
    syscall = _libc_function(_Syscall, "syscall")
    prctl = _libc_function(_Prctl, "prctl")
    fs_mask = handled_fs(abi)
    # struct landlock_ruleset_attr: handled_access_fs, handled_access_net,
    # scoped (u64 each); older ABIs read only the first 8 or 16 bytes.
    handled_net = scoped = 0
    size = 8
    if abi >= 4 and tcp_connect_ports is not None:
        handled_net = NET_BIND_TCP | NET_CONNECT_TCP
        size = 16
    if abi >= 6:
        # Nothing outside the sandbox is a legitimate signal target or an
        # abstract-socket peer of an executor.
        scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        size = 24
    attr = _u64(fs_mask) + _u64(handled_net) + _u64(scoped)
    ruleset = syscall(_SYS_CREATE_RULESET, attr, _CULong(size), 0)
    if ruleset < 0:
        raise _fail("landlock_create_ruleset")
    try:
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rights &= fs_mask
                if not os.path.isdir(path):
                    rights &= _FILE_RIGHTS
                # struct landlock_path_beneath_attr (packed): u64 allowed_access, s32 parent_fd
                beneath = _u64(rights) + fd.to_bytes(4, sys.byteorder, signed=True)
                if syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, beneath, 0) < 0:
                    raise _fail(f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        if size >= 16:
            for port in tcp_connect_ports or ():
                # struct landlock_net_port_attr: u64 allowed_access, u64 port
                if syscall(_SYS_ADD_RULE, ruleset, _RULE_NET_PORT, _u64(NET_CONNECT_TCP) + _u64(port), 0) < 0:
                    raise _fail(f"landlock_add_rule port {port}")
        if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _fail("prctl(NO_NEW_PRIVS)")
        if syscall(_SYS_RESTRICT_SELF, ruleset, 0) < 0:
            raise _fail("landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi
