"""The seccomp filter handed to bwrap with ``--seccomp FD``.

The filter is compiled once in the runtime with libseccomp (through the
ctypes binding ``pyseccomp``, so it works on any interpreter given the
``libseccomp2`` system library) and bwrap installs it on the sandboxed
process just before exec. Building the BPF out here keeps the host that runs
inside the sandbox stdlib-only.

It is a deny list on top of bwrap's namespaces and ``--cap-drop ALL``:
what it refuses is what those leave open (seeds/003 ch. 9, DESIGN decision 4).
Two of those gaps come from running as root: the sandbox's uid maps to the
invoking user's, so a file made setuid or setgid inside a write grant would
be a root-owned setuid file on the host; and sockets of families the network
namespace does not isolate (netlink, vsock) or that need no network grant to
open. There are two programs, one for profiles with a network grant (AF_INET
and AF_INET6 allowed) and one without (no socket at all).
"""

from __future__ import annotations

import errno
import functools
import tempfile

# ioctl request numbers are ``unsigned int`` in the kernel: compare only the
# low 32 bits, or a caller sets high bits and slips past an equality test.
_TIOCSTI = 0x5412
_TIOCLINUX = 0x541C
_LOW32 = 0xFFFFFFFF
_AF_INET = 2
_AF_INET6 = 10
# The mode bits that would make a file run with its owner's (or group's)
# identity. mode_t is an unsigned int and the filter tests one bit at a time,
# so high garbage in the register cannot hide them.
_S_ISUID = 0o4000
_S_ISGID = 0o2000
# (syscall, index of its mode argument): every way to set a mode on an
# existing file, and every way to create one with a mode.
_MODE_ARGS = (
    ("chmod", 1), ("fchmod", 1), ("fchmodat", 2), ("fchmodat2", 2),
    ("open", 2), ("openat", 3), ("creat", 1), ("mknod", 1), ("mknodat", 2),
)
# One rule per flag: libseccomp ORs rules, and "any of these bits set" is
# not expressible as a single masked comparison.
_NS_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
    0x00000080,  # CLONE_NEWTIME
)

# Refused outright with EPERM. Grouped by why.
_DENIED = (
    # Debugging and reading other processes' memory.
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    # Changing the mount table or the namespaces bwrap built (cap-drop ALL
    # already makes these fail; this is the second lock on the same door).
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
    "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
    "mount_setattr",
    # io_uring performs socket and file operations the filter never sees.
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    # Kernel attack surface no executor needs.
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "open_by_handle_at", "name_to_handle_at", "swapon", "swapoff", "reboot",
    "acct", "quotactl", "syslog", "personality", "uselib", "vhangup",
    "lookup_dcookie", "fanotify_init",
)


class SeccompUnavailable(RuntimeError):
    pass


def _binding():
    try:
        import pyseccomp
    except (ImportError, OSError) as e:  # OSError: libseccomp.so.2 missing
        raise SeccompUnavailable(f"pyseccomp/libseccomp not usable: {e}") from e
    return pyseccomp


def _add_optional(f, action, name: str, *args) -> None:
    try:
        f.add_rule(action, name, *args)
    except (OSError, ValueError, RuntimeError):
        pass  # syscall unknown to this libseccomp/arch (fchmodat2 before 6.6)


def _refuse_sockets(f, sc, network: bool) -> None:
    """socket() only for AF_INET/AF_INET6, and only with a network grant.

    The domain is an int, but the register is 64 bits: anything above
    AF_INET6 is refused on the whole register (garbage in the high bits
    included), and below it every value but the two allowed ones.
    """
    no = sc.ERRNO(errno.EAFNOSUPPORT)
    if not network:
        f.add_rule(no, "socket")
        return
    f.add_rule(no, "socket", sc.Arg(0, sc.GT, _AF_INET6))
    for domain in range(_AF_INET6):
        if domain != _AF_INET:
            f.add_rule(no, "socket", sc.Arg(0, sc.EQ, domain))


def build_filter(network: bool = False):
    """The libseccomp filter object (tests load it directly in a child).

    ``network``: the profile holds a network grant, so AF_INET and AF_INET6
    sockets are allowed; without it no socket can be opened.
    """
    sc = _binding()
    f = sc.SyscallFilter(sc.ALLOW)
    # Any foreign ABI (i386 via int 0x80, x32) kills: the rules below are
    # written for the native syscall table only.
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    eperm = sc.ERRNO(errno.EPERM)
    for name in _DENIED:
        _add_optional(f, eperm, name)
    # A pathname unix socket in a bound dir is reachable even without a
    # network namespace, netlink talks to the kernel and vsock to the
    # hypervisor: only the two families a network grant is about remain.
    _refuse_sockets(f, sc, network)
    for name, index in _MODE_ARGS:
        for bit in (_S_ISUID, _S_ISGID):
            _add_optional(f, eperm, name, sc.Arg(index, sc.MASKED_EQ, bit, bit))
    # openat2 passes its mode inside a struct the filter cannot read; libc
    # does not need it (ENOSYS makes callers fall back to openat).
    _add_optional(f, sc.ERRNO(errno.ENOSYS), "openat2")
    f.add_rule(eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, _LOW32, _TIOCSTI))
    f.add_rule(eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, _LOW32, _TIOCLINUX))
    # New namespaces through clone flags; clone3 passes its flags in memory
    # the filter cannot read, so it gets ENOSYS and libc falls back to clone.
    for flag in _NS_FLAGS:
        f.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    return f


@functools.lru_cache(maxsize=2)
def filter_bpf(network: bool = False) -> bytes:
    """The compiled BPF program (cached: one per network setting)."""
    f = build_filter(network)
    with tempfile.TemporaryFile() as t:
        f.export_bpf(t)
        t.seek(0)
        return t.read()


def available() -> tuple[bool, str | None]:
    try:
        filter_bpf()
    except Exception as e:  # any failure means: no seccomp layer, say why
        return False, str(e)
    return True, None
