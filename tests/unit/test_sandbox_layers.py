"""Landlock and seccomp, each exercised for real in a child process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from metnos.mechanisms.sandbox import landlock, seccomp
from metnos.mechanisms.sandbox.status import format_status, status


def child(src: str) -> dict:
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(src)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(landlock.abi_version() < 1, reason="no Landlock in this kernel")
def test_landlock_confines_reads_and_writes(tmp_path):
    allowed, other = tmp_path / "allowed", tmp_path / "other"
    allowed.mkdir(), other.mkdir()
    (other / "secret").write_text("s")
    got = child(f"""
        import json, os, sys
        from metnos.mechanisms.sandbox import landlock as L
        prefixes = sorted({{os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, "/usr", "/lib", "/lib64")}})
        L.restrict_self([(p, L.READ) for p in prefixes] + [({str(allowed)!r}, L.WRITE)], tcp_connect_ports=[])
        res = {{}}
        def t(name, fn):
            try:
                fn(); res[name] = "ok"
            except OSError as e:
                res[name] = e.errno
        t("write_allowed", lambda: open({str(allowed / "f")!r}, "w").write("x"))
        t("read_other", lambda: open({str(other / "secret")!r}).read())
        t("write_other", lambda: open({str(other / "new")!r}, "w"))
        import socket
        t("tcp", lambda: socket.create_connection(("127.0.0.1", 9), timeout=1))
        print(json.dumps(res))
    """)
    import errno
    assert got["write_allowed"] == "ok"
    assert got["read_other"] == errno.EACCES and got["write_other"] == errno.EACCES
    if landlock.abi_version() >= 4:
        assert got["tcp"] == errno.EACCES


def _seccomp_child(network: bool) -> dict:
    ok, why = seccomp.available()
    if not ok:
        pytest.skip(why)
    return child(f"""
        import ctypes, errno, json, os, tempfile
        from metnos.mechanisms.sandbox import seccomp
        seccomp.build_filter(network={network!r}).load()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        def raw(nr, *args):
            r = libc.syscall(nr, *args)
            return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
        def sock(domain):
            return raw(41, ctypes.c_long(domain), 1 if domain in (1, 40) else 2, 0)
        res = {{"unix": sock(1), "unix_high_bits": sock(0x100000001), "inet": sock(2), "inet6": sock(10),
               "inet_high_bits": sock(0x100000002), "netlink": sock(16), "vsock": sock(40), "packet": sock(17)}}
        libc.ptrace.restype = ctypes.c_long
        res["ptrace"] = "ok" if libc.ptrace(0, 0, None, None) == 0 else errno.errorcode[ctypes.get_errno()]
        res["io_uring"] = "ok" if libc.syscall(425, 1, None) >= 0 else errno.errorcode[ctypes.get_errno()]
        d = tempfile.mkdtemp()
        f = (d + "/f").encode()
        res["creat_0755"] = raw(85, f, 0o755)
        res["chmod_0700"] = raw(90, f, 0o700)
        res["chmod_setuid"] = raw(90, f, 0o4755)
        res["chmod_setgid_high_bits"] = raw(90, f, ctypes.c_long(0x100002755))
        res["creat_setuid"] = raw(85, (d + "/g").encode(), 0o4700)
        res["mode"] = oct(os.stat(f).st_mode & 0o7777)
        print(json.dumps(res))
    """)


def test_seccomp_filter_without_network_refuses_every_socket_and_setuid_bits():
    got = _seccomp_child(network=False)
    assert got == {"unix": "EAFNOSUPPORT", "unix_high_bits": "EAFNOSUPPORT", "inet": "EAFNOSUPPORT",
                   "inet6": "EAFNOSUPPORT", "inet_high_bits": "EAFNOSUPPORT", "netlink": "EAFNOSUPPORT",
                   "vsock": "EAFNOSUPPORT", "packet": "EAFNOSUPPORT", "ptrace": "EPERM", "io_uring": "EPERM",
                   "creat_0755": "ok", "chmod_0700": "ok", "chmod_setuid": "EPERM",
                   "chmod_setgid_high_bits": "EPERM", "creat_setuid": "EPERM", "mode": "0o700"}


def test_seccomp_filter_with_network_allows_inet_only_and_compares_32_bits():
    got = _seccomp_child(network=True)
    assert {k: got[k] for k in ("unix", "unix_high_bits", "inet", "inet6", "inet_high_bits", "netlink", "vsock", "packet")} == {
        "unix": "EAFNOSUPPORT", "unix_high_bits": "EAFNOSUPPORT", "inet": "ok", "inet6": "ok",
        "inet_high_bits": "EAFNOSUPPORT", "netlink": "EAFNOSUPPORT", "vsock": "EAFNOSUPPORT", "packet": "EAFNOSUPPORT"}
    assert got["chmod_setuid"] == got["creat_setuid"] == "EPERM"


def test_status_reports_layers(monkeypatch):
    monkeypatch.setenv("METNOS_SANDBOX", "off")
    st = status()
    assert st.mode == "off" and not st.active and "bwrap" not in st.layers
    text = format_status(st)
    assert "OFF" in text and "METNOS_SANDBOX" in text and "policy check" in text
    assert "records sandbox: off" in text
    monkeypatch.delenv("METNOS_SANDBOX")
    st = status()
    assert st.active == (st.mode == "bwrap") and st.landlock_abi == landlock.abi_version()
    assert ("landlock" in st.layers) == (st.active and st.landlock_abi > 0)
    assert f"ABI {st.landlock_abi}" in format_status(st) or st.landlock_abi == 0


def test_status_says_what_holds_the_memory_cap(monkeypatch):
    import dataclasses

    from metnos.mechanisms.sandbox import cgroup

    real = cgroup.placement()
    st = status()
    assert st.memory_cap == real.memory_mechanism
    assert st.memory_cap in ("cgroup-v2", "cgroup-v1", "watchdog")
    assert ("memory-cgroup" in st.layers) == (st.memory_cap != "watchdog")
    assert "memory cap:" in format_status(st)
    monkeypatch.setattr(cgroup, "placement", lambda: dataclasses.replace(real, memory=None, memory_error="not delegated"))
    st = status()
    assert st.memory_cap == "watchdog" and "memory-watchdog" in st.layers
    assert "watchdog" in format_status(st) and "not delegated" in format_status(st)


def test_a_v2_invocation_cgroup_sets_one_cap_and_reads_the_kernel_s_verdict(tmp_path, monkeypatch):
    # This machine has cgroup v1 only; the v2 file protocol is checked on a
    # plain directory standing in for a delegated cgroup2 subtree.
    from metnos.mechanisms.sandbox import cgroup

    parent = tmp_path / "delegated"
    parent.mkdir()
    monkeypatch.setattr(cgroup, "placement", lambda: cgroup.Placement(parent, parent, True, None, None))
    monkeypatch.setattr(cgroup, "_sweep", lambda _parent: None)
    real_write = cgroup._write

    def write(path, value):
        for name in ("pids.max", "memory.max", "memory.swap.max", "memory.oom.group"):
            (path.parent / name).touch()  # the kernel makes these with the group
        real_write(path, value)

    monkeypatch.setattr(cgroup, "_write", write)
    cg = cgroup.InvocationCgroup(max_pids=16, memory_bytes=256 << 20)
    (d,) = cg.dirs
    assert cg.memory_mechanism == "cgroup-v2" and cg.caps_pids and cg.caps_memory
    assert (d / "pids.max").read_text() == "16" and (d / "memory.max").read_text() == str(256 << 20)
    assert (d / "memory.swap.max").read_text() == "0" and (d / "memory.oom.group").read_text() == "1"
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\noom_group_kill 0\n")
    assert not cg.memory_exceeded()  # reaching the cap and reclaiming is not exceeding it
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 2\noom_kill 1\noom_group_kill 1\n")
    (d / "memory.peak").write_text(str(256 << 20) + "\n")
    assert cg.memory_exceeded() and cg.memory_peak() == 256 << 20


def test_leftover_invocation_groups_are_swept_at_most_every_half_minute(tmp_path, monkeypatch):
    # Stand-in for a cgroup hierarchy, as above: leftovers of a runtime killed
    # before its clean-up are removed once a minute old, without a look at
    # the parent at every spawn.
    import os
    import time

    from metnos.mechanisms.sandbox import cgroup

    parent = tmp_path / "delegated"
    parent.mkdir()
    monkeypatch.setattr(cgroup, "_swept", {})
    clock = [time.time()]
    monkeypatch.setattr(cgroup.time, "time", lambda: clock[0])

    def leftover(name, age_s):
        d = parent / f"metnos-inv-{name}"
        d.mkdir()
        os.utime(d, (clock[0] - age_s, clock[0] - age_s))
        return d

    old, young = leftover("old", 120), leftover("young", 5)
    cgroup._sweep(parent)
    assert not old.exists() and young.exists()
    later = leftover("later", 120)
    clock[0] += 10
    cgroup._sweep(parent)
    assert later.exists()  # looked at 10 s ago
    clock[0] += 30
    cgroup._sweep(parent)
    assert not later.exists() and young.exists()


def test_a_spare_group_is_taken_only_with_the_caps_asked_for_and_while_young(monkeypatch):
    # The finisher makes the next call's groups ahead of time; a call takes
    # them only when their caps are the ones it asks for and they are young
    # (another runtime's sweep removes empty groups a minute old).
    import time

    from metnos.mechanisms.sandbox import cgroup

    p = cgroup.placement()
    if p.pids is None and p.memory is None:
        pytest.skip(f"no cgroup can be made here: {p.pids_error}")
    spare = cgroup._Spare()
    spare.make(16, 256 << 20)
    made = spare.dirs()
    assert made and all(d.is_dir() for d in made)
    cg = spare.take(16, 256 << 20)
    try:
        assert cg is not None and cg.dirs == made and spare.dirs() == []
        if cg.pids_dir is not None:
            assert (cg.pids_dir / "pids.max").read_text().strip() == "16"
    finally:
        cg.close()
    assert not any(d.exists() for d in made)

    spare.make(16, 256 << 20)
    other_caps = spare.dirs()
    assert spare.take(17, 256 << 20) is None and not any(d.exists() for d in other_caps)

    spare.make(16, 256 << 20)
    old = spare.dirs()
    now = time.monotonic()
    monkeypatch.setattr(cgroup.time, "monotonic", lambda: now + cgroup._Spare.LIFETIME_S + 1)
    assert spare.take(16, 256 << 20) is None and not any(d.exists() for d in old)
