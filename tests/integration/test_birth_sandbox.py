"""Birth tests run inside the real sandbox (bwrap, seccomp, Landlock, caps).

Every hostile case is also run with the sandbox off, where it must pass: so
a failure under the sandbox is the sandbox's doing, not a broken test.
"""

from __future__ import annotations

import os
import socket
import textwrap
import time
from pathlib import Path

import pytest
from nacl.signing import SigningKey

from metnos.mechanisms.executors.birth import run_birth_tests, spawn_subprocess
from metnos.mechanisms.executors.context import build_ctx
from metnos.mechanisms.executors.install import install_executor, install_seed_executors
from metnos.mechanisms.executors.loader import load_executors
from metnos.mechanisms.executors.manifest import load_manifest
from metnos.mechanisms.sandbox.bwrap import probe
from metnos.mechanisms.invocation.birth import make_sandboxed_spawn
from metnos.settings.workspace import Workspace
from tests.integration.test_seed_executors import REQUIRED
from tests.support.hostile import FORK_AND_HOLD
from tests.support.layouts import apply_layout
from tests.unit.executor_kit import write_executor

pytestmark = [pytest.mark.bwrap, pytest.mark.skipif(not probe().works, reason=f"bubblewrap cannot run: {probe().error}")]

NOW = "2026-05-06T16:45:23+02:00"
SECRET = "not-for-executors-7f3a"


@pytest.fixture
def world(tmp_path, monkeypatch, layout):
    """A real-looking user in ``layout``: a home with a key in ~/.ssh and a public note."""
    home = apply_layout(layout, tmp_path, monkeypatch, os.environ)
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(SECRET)
    (home / "notes").mkdir()
    (home / "notes" / "public.txt").write_text("hello")
    monkeypatch.delenv("METNOS_SANDBOX", raising=False)
    return home


def _write(tmp_path: Path, name: str, capabilities: str, birth: str, **kw) -> Path:
    d = write_executor(tmp_path / "src" / name, name=name, birth=textwrap.dedent(birth), **kw)
    manifest = (d / "manifest.toml").read_text().replace('"fs:read" = ["~/notes"]', capabilities)
    (d / "manifest.toml").write_text(manifest)
    return d


def _births(d: Path, spawn, timeout_s: float = 20.0):
    ws = Workspace.from_env()
    profile = load_manifest(d / "manifest.toml").sandbox_profile()
    ctx = build_ctx(now=NOW, workspace=ws, profile=profile, name=d.name, version="1.0.0")
    return run_birth_tests(d, ctx, profile=profile, spawn=spawn, timeout_s=timeout_s)


def _cases(result) -> dict[str, str | None]:
    return {c.name: c.error for c in result.cases}


def test_all_seed_executors_pass_their_birth_tests_in_the_sandbox(world):
    ws = Workspace.from_env()
    key = SigningKey.generate()
    install_seed_executors(ws, key)
    seen = []

    def spawn(req):
        seen.append(req.executor_dir.parent.name)
        return make_sandboxed_spawn(ws)(req)

    report = load_executors(ws, key.verify_key, birth=True, spawn=spawn, now=NOW)
    assert not report.quarantined, [(q.name, q.reason) for q in report.quarantined]
    assert set(seen) >= REQUIRED and {e.name for e in report.loaded} >= REQUIRED


def test_a_birth_cannot_read_the_real_home_nor_etc(world, tmp_path):
    d = _write(tmp_path, "read_home", '"fs:read" = ["~"]', f"""\
        def birth_real_ssh_key(run, tmp):
            assert open({str(world / ".ssh" / "id_ed25519")!r}).read() == {SECRET!r}

        def birth_real_note(run, tmp):
            assert open({str(world / "notes" / "public.txt")!r}).read() == "hello"

        def birth_etc_passwd(run, tmp):
            assert "root" in open("/etc/passwd").read()

        def birth_home_is_the_scratch_dir(run, tmp):
            import os
            assert os.environ["HOME"] == str(tmp.parent), os.environ["HOME"]

        def birth_scratch_is_writable(run, tmp):
            (tmp / "fixture.txt").write_text("x")
            assert run({{"word": "ok"}})["content"] == "ok"
        """)
    plain = _cases(_births(d, spawn_subprocess))
    assert plain["birth_real_ssh_key"] is None and plain["birth_real_note"] is None
    assert plain["birth_etc_passwd"] is None

    boxed = _cases(_births(d, make_sandboxed_spawn()))
    assert boxed["birth_real_ssh_key"] and "id_ed25519" in boxed["birth_real_ssh_key"]
    assert boxed["birth_real_note"] and "public.txt" in boxed["birth_real_note"]
    assert boxed["birth_etc_passwd"] and "/etc/passwd" in boxed["birth_etc_passwd"]
    assert boxed["birth_home_is_the_scratch_dir"] is None, boxed
    assert boxed["birth_scratch_is_writable"] is None, boxed


def test_an_absolute_grant_on_the_real_home_still_hides_its_secrets(world, tmp_path):
    d = _write(tmp_path, "read_abs", f'"fs:read" = [{str(world)!r}]', f"""\
        def birth_granted_note(run, tmp):
            assert open({str(world / "notes" / "public.txt")!r}).read() == "hello"

        def birth_ssh_key(run, tmp):
            assert open({str(world / ".ssh" / "id_ed25519")!r}).read() == {SECRET!r}

        def birth_write_into_a_read_grant(run, tmp):
            open({str(world / "notes" / "planted.txt")!r}, "w").write("x")
        """)
    assert all(e is None for e in _cases(_births(d, spawn_subprocess)).values())
    (world / "notes" / "planted.txt").unlink()

    boxed = _cases(_births(d, make_sandboxed_spawn()))
    assert boxed["birth_granted_note"] is None, boxed
    assert boxed["birth_ssh_key"] and "id_ed25519" in boxed["birth_ssh_key"]
    assert boxed["birth_write_into_a_read_grant"] and "planted.txt" in boxed["birth_write_into_a_read_grant"]
    assert not (world / "notes" / "planted.txt").exists()


def test_the_loader_quarantines_a_hostile_birth_by_default_and_not_without_the_sandbox(world, tmp_path, monkeypatch):
    src = _write(tmp_path, "read_keys", '"fs:read" = ["~"]', f"""\
        def birth_steal(run, tmp):
            assert open({str(world / ".ssh" / "id_ed25519")!r}).read() == {SECRET!r}
            assert run({{"word": "x"}})["content"] == "x"
        """)
    ws = Workspace.from_env()
    key = SigningKey.generate()
    install_executor(src, ws.executors_origin_dir("seed"), key)

    report = load_executors(ws, key.verify_key, birth=True, reserved_names=(), now=NOW, spawn=make_sandboxed_spawn(ws))
    assert not report.loaded
    (q,) = report.quarantined
    assert (q.name, q.file, q.check) == ("read_keys", "tests/birth.py", "birth")
    assert "birth_steal" in q.detail and "id_ed25519" in q.detail

    monkeypatch.setenv("METNOS_SANDBOX", "0")
    report = load_executors(ws, key.verify_key, birth=True, reserved_names=(), now=NOW, spawn=make_sandboxed_spawn(ws))
    assert [e.name for e in report.loaded] == ["read_keys"] and not report.quarantined


def test_a_network_birth_has_a_private_loopback(world, tmp_path):
    # A service on the host's loopback: reachable from a plain child, not
    # from a birth, which gets a network namespace of its own.
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    d = _write(tmp_path, "get_sockets", 'network = ["127.0.0.1"]', f"""\
        import socket

        def birth_host_service(run, tmp):
            socket.create_connection(("127.0.0.1", {port}), timeout=2).close()

        def birth_own_server_on_any_port(run, tmp):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            socket.create_connection(s.getsockname(), timeout=2).close()
            s.close()
        """)
    try:
        assert all(e is None for e in _cases(_births(d, spawn_subprocess)).values())
        boxed = _cases(_births(d, make_sandboxed_spawn()))
    finally:
        srv.close()
    assert boxed["birth_host_service"] and "Connection refused" in boxed["birth_host_service"]
    assert boxed["birth_own_server_on_any_port"] is None, boxed


def test_a_birth_that_hangs_is_killed_at_the_wall_clock(world, tmp_path):
    d = _write(tmp_path, "compute_forever", '"fs:read" = ["~"]', """\
        def birth_hang(run, tmp):
            import os, time
            if os.fork() == 0:
                os.setsid()  # leaves the process group, not the sandbox
            time.sleep(60)
        """)
    t = time.monotonic()
    res = _births(d, make_sandboxed_spawn(), timeout_s=1.5)
    assert time.monotonic() - t < 6
    assert res.reason == "birth tests did not finish within 1.5 s"


def test_a_birth_cannot_allocate_past_the_memory_cap(world, tmp_path):
    d = _write(tmp_path, "compute_memory", '"fs:read" = ["~"]', """\
        def birth_hog(run, tmp):
            b = bytearray(400 * 1024 * 1024)
            assert len(b)
        """)
    (d / "manifest.toml").write_text((d / "manifest.toml").read_text().replace(
        "max_duration_s = 2", "max_duration_s = 2\nmax_memory_mb = 128"))
    assert _cases(_births(d, spawn_subprocess))["birth_hog"] is None
    assert "MemoryError" in (_cases(_births(d, make_sandboxed_spawn()))["birth_hog"] or "")


def test_forked_births_share_one_memory_cap(world, tmp_path):
    # Twelve children of 120 MB each pass a per-process limit of 256 MB; the
    # invocation's cap counts them together.
    d = _write(tmp_path, "compute_forks", '"fs:read" = ["~"]', FORK_AND_HOLD + textwrap.dedent("""
        def birth_forks(run, tmp):
            assert fork_and_hold(12, 120, hold_s=2) == 1440
        """))
    (d / "manifest.toml").write_text((d / "manifest.toml").read_text().replace(
        "max_duration_s = 2", "max_duration_s = 15\nmax_memory_mb = 256\nmax_pids = 32"))
    assert _cases(_births(d, spawn_subprocess))["birth_forks"] is None
    boxed = _births(d, make_sandboxed_spawn())
    assert not boxed.ok
    assert "exceeded the memory cap of 256 MB" in (boxed.reason or ""), boxed
