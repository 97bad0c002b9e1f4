"""Landlock and seccomp, each exercised for real in a child process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from metnos.sandbox import landlock, seccomp
from metnos.sandbox.status import format_status, status


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
        from metnos.sandbox import landlock as L
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


def test_seccomp_filter_compares_32_bits():
    ok, why = seccomp.available()
    if not ok:
        pytest.skip(why)
    got = child("""
        import ctypes, errno, json, socket
        from metnos.sandbox import seccomp
        seccomp.build_filter().load()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        def raw(domain):
            fd = libc.syscall(41, ctypes.c_long(domain), 1, 0)
            return "ok" if fd >= 0 else errno.errorcode[ctypes.get_errno()]
        res = {"unix": raw(1), "unix_high_bits": raw(0x100000001), "inet": raw(2)}
        libc.ptrace.restype = ctypes.c_long
        res["ptrace"] = "ok" if libc.ptrace(0, 0, None, None) == 0 else errno.errorcode[ctypes.get_errno()]
        res["io_uring"] = "ok" if libc.syscall(425, 1, None) >= 0 else errno.errorcode[ctypes.get_errno()]
        print(json.dumps(res))
    """)
    assert got == {"unix": "EAFNOSUPPORT", "unix_high_bits": "EAFNOSUPPORT", "inet": "ok",
                   "ptrace": "EPERM", "io_uring": "EPERM"}


def test_status_reports_layers(monkeypatch):
    monkeypatch.setenv("METNOS_SANDBOX", "off")
    st = status()
    assert st.mode == "off:env" and not st.active and "bwrap" not in st.layers
    text = format_status(st)
    assert "OFF" in text and "METNOS_SANDBOX" in text and "policy check" in text
    monkeypatch.delenv("METNOS_SANDBOX")
    st = status()
    assert st.active == (st.mode == "bwrap") and st.landlock_abi == landlock.abi_version()
    assert ("landlock" in st.layers) == (st.active and st.landlock_abi > 0)
    assert f"ABI {st.landlock_abi}" in format_status(st) or st.landlock_abi == 0
