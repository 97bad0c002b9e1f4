"""The seccomp filter handed to bwrap with ``--seccomp FD``.

The filter is compiled once in the runtime with libseccomp (through the
ctypes binding ``pyseccomp``, so it works on any interpreter given the
``libseccomp2`` system library) and bwrap installs it on the sandboxed
process just before exec. Building the BPF out here keeps the host that runs
inside the sandbox stdlib-only.

It is a deny list on top of bwrap's namespaces and ``--cap-drop ALL``:
what it refuses is what those leave open (seeds/003 ch. 9, DESIGN decision 4).
"""

from __future__ import annotations

import errno
import functools
import os
import tempfile

# ioctl request numbers are ``unsigned int`` in the kernel: compare only the
# low 32 bits, or a caller sets high bits and slips past an equality test.
_TIOCSTI = 0x5412
_TIOCLINUX = 0x541C
_LOW32 = 0xFFFFFFFF
_AF_UNIX = 1
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


def build_filter():
    """The libseccomp filter object (tests load it directly in a child)."""
    sc = _binding()
    f = sc.SyscallFilter(sc.ALLOW)
    # Any foreign ABI (i386 via int 0x80, x32) kills: the rules below are
    # written for the native syscall table only.
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    eperm = sc.ERRNO(errno.EPERM)
    for name in _DENIED:
        try:
            f.add_rule(eperm, name)
        except (OSError, ValueError, RuntimeError):
            continue  # syscall unknown to this libseccomp/arch
    # A pathname unix socket in a bound dir is reachable even without a
    # network namespace; the domain is an int, so mask to 32 bits.
    f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), "socket", sc.Arg(0, sc.MASKED_EQ, _LOW32, _AF_UNIX))
    f.add_rule(eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, _LOW32, _TIOCSTI))
    f.add_rule(eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, _LOW32, _TIOCLINUX))
    # New namespaces through clone flags; clone3 passes its flags in memory
    # the filter cannot read, so it gets ENOSYS and libc falls back to clone.
    for flag in _NS_FLAGS:
        f.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    return f


@functools.lru_cache(maxsize=1)
def filter_bpf() -> bytes:
    """The compiled BPF program (cached: it is the same for every executor)."""
    f = build_filter()
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


def bpf_fd() -> int:
    """A readable fd holding the program, for ``bwrap --seccomp FD``.

    A memfd rather than a pipe so the write can never block, whatever the
    program's size. The caller passes it to the child and closes it after.
    """
    data = filter_bpf()
    fd = os.memfd_create("metnos-seccomp", 0)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
