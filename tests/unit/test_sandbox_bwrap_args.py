from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from metnos.mechanisms.failures import SandboxUnavailable
from metnos.mechanisms.sandbox import bwrap
from metnos.mechanisms.sandbox.profile import SandboxProfile
from tests.support.sandbox_env import make_env, needs_bwrap


@pytest.fixture
def sx(tmp_path):
    s = make_env(tmp_path)
    for d in ("notes", "out", ".ssh", ".gnupg"):
        (s.home / d).mkdir()
    (s.root / "code").mkdir()
    return s


def plan(sx, **kw):
    return bwrap.plan_for(sx.root / "code", SandboxProfile(**kw), workspace=sx.workspace, env=sx.env)


def pairs(args, flag):
    return [args[i + 1] for i, a in enumerate(args) if a == flag]


@pytest.mark.parametrize("value", ["0", "off", "NO", "False", " false "])
def test_env_switch_passes_command_through(sx, value):
    sx.env["METNOS_SANDBOX"] = value
    p = plan(sx)
    assert p.mode == "off" and not p.active and p.layers == ("policy",)
    assert bwrap.wrap_plan(p, ["python3", "x"]).argv == ["python3", "x"]


def test_missing_bwrap_refuses_to_plan(sx, monkeypatch):
    monkeypatch.setattr(bwrap, "probe", lambda: bwrap.BwrapProbe(None, None, False, "bwrap not found in PATH"))
    with pytest.raises(SandboxUnavailable) as exc:
        plan(sx)
    assert exc.value.kind.value == "SandboxUnavailable"
    assert "bwrap not found in PATH" in exc.value.reason
    assert "apt install bubblewrap" in exc.value.fix and "METNOS_SANDBOX=off" in exc.value.fix


@pytest.mark.parametrize("value", ["maybe", "offf", "2"])
def test_an_unknown_setting_is_an_error_naming_the_variable_and_the_values(sx, value):
    sx.env["METNOS_SANDBOX"] = value
    with pytest.raises(SandboxUnavailable) as exc:
        plan(sx)
    text = str(exc.value)
    assert "METNOS_SANDBOX" in text and repr(value) in text
    assert "on" in exc.value.fix and "off" in exc.value.fix


@pytest.mark.parametrize("value", ["", "on", "ON", "1", "yes", "true"])
def test_on_values_require_the_sandbox(value):
    assert bwrap.sandbox_disabled({"METNOS_SANDBOX": value}) is False


def test_probe_runs_bwrap_not_just_which(monkeypatch, tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo 'bubblewrap 9.9' && exit 0\necho 'no userns' >&2; exit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    bwrap.probe.cache_clear()
    try:
        p = bwrap.probe()
        assert p.path == str(fake) and p.version == "9.9" and not p.works and "no userns" in p.error
    finally:
        bwrap.probe.cache_clear()


@needs_bwrap
def test_always_on_flags(sx):
    a = plan(sx).bwrap_args
    for flag in ("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                 "--new-session", "--die-with-parent", "--clearenv", "--unshare-net"):
        assert flag in a, flag
    assert pairs(a, "--cap-drop") == ["ALL"]
    assert "/proc" in pairs(a, "--proc") and "/dev" in pairs(a, "--tmpfs") and "/tmp" in pairs(a, "--tmpfs")
    assert "/dev" in pairs(a, "--remount-ro")


@needs_bwrap
def test_nested_user_namespaces_are_refused_by_bwrap_as_well_as_by_the_filter(sx):
    if not bwrap.probe().disable_userns:
        pytest.skip("this bwrap has no --disable-userns")
    p = plan(sx)
    assert "--disable-userns" in p.bwrap_args and "seccomp" in p.layers


@needs_bwrap
def test_dev_holds_no_terminal(sx):
    """Its /dev is built device by device, never bwrap's --dev with its tty and
    pts: no terminal inside, whatever session the sandbox is in."""
    a = plan(sx).bwrap_args
    assert "--dev" not in a
    devices = pairs(a, "--dev-bind")
    assert sorted(devices) == ["/dev/full", "/dev/null", "/dev/random", "/dev/urandom", "/dev/zero"]
    shown = devices + pairs(a, "--ro-bind") + pairs(a, "--bind")
    assert not any(x.startswith(("/dev/tty", "/dev/pts", "/dev/console", "/dev/ptmx")) for x in shown)
    ro = pairs(a, "--ro-bind")
    assert "/etc" not in ro and "/etc/ld.so.cache" in ro
    assert not any(x.startswith("/etc/ssl") or x == "/etc/resolv.conf" for x in ro)
    assert str((sx.root / "code").resolve()) in ro


@needs_bwrap
def test_network_and_grants(sx):
    p = plan(sx, fs_read=("~/notes/**",), fs_write=("~/out",), network_hosts=("api.example.com",))
    a = p.bwrap_args
    # A network grant still gets a namespace of its own: the way out is the egress proxy.
    assert "--unshare-net" in a and p.egress and "egress-proxy" in p.layers
    assert bwrap.INSIDE_BRIDGE in a
    assert p.tcp_ports == []  # host.py opens the bridge's port alone
    assert not plan(sx).egress
    assert str(sx.home / "notes") in pairs(a, "--ro-bind")
    assert str(sx.home / "out") in pairs(a, "--bind")
    assert "/etc/resolv.conf" in pairs(a, "--ro-bind") or not __import__("os").path.exists("/etc/resolv.conf")


@needs_bwrap
def test_forbidden_masked_after_every_bind(sx):
    a = plan(sx, fs_read=("~",), fs_write=("~/out",)).bwrap_args
    ssh = str(sx.home / ".ssh")
    mask_at = [i for i, x in enumerate(a) if x == ssh and a[i - 1] == "--tmpfs"]
    assert mask_at, "~/.ssh is not masked"
    last_bind = max(i for i, x in enumerate(a) if x in ("--bind", "--ro-bind") and a[i + 1] != "/dev/null")
    assert mask_at[0] > last_bind
    assert ssh in pairs(a, "--remount-ro")
    assert str(sx.home / ".gnupg") in pairs(a, "--tmpfs")


@needs_bwrap
def test_env_is_cleared_to_what_the_executor_needs(sx):
    sx.env.update(SECRET_TOKEN="x", WANTED="y")
    p = plan(sx, env=("WANTED",))
    assert p.child_env.get("WANTED") == "y" and "SECRET_TOKEN" not in p.child_env
    w = bwrap.wrap_plan(p, ["true"])
    try:
        assert w.env == {"PATH": "/usr/bin:/bin"}  # bwrap's own environ is visible inside
        assert "SECRET_TOKEN" not in " ".join(w.argv)
        assert w.argv[w.argv.index("--seccomp") + 1] == str(w.pass_fds[0])
    finally:
        w.close()


def test_an_interpreter_under_tmp_is_bound_over_the_fresh_tmp(sx, monkeypatch):
    # A venv under /tmp (a CI checkout, say): its trees must land on top of the
    # sandbox's own /tmp, not under it where the tmpfs would hide them.
    venv = "/tmp/some-checkout/.venv"
    site_dir = venv + "/lib/python3.11/site-packages"
    monkeypatch.setattr(bwrap, "python_runtime", lambda: ("/usr/bin/python3", [venv], [site_dir]))
    a = plan(sx, site_packages=True).bwrap_args
    tmpfs_at = next(i for i, x in enumerate(a) if x == "--tmpfs" and a[i + 1] == "/tmp")
    bind_at = next(i for i, x in enumerate(a) if x == "--ro-bind" and a[i + 1] == venv)
    assert tmpfs_at < bind_at


@pytest.mark.parametrize("layout", ["xdg", "metnos_home_inside_home"])
@needs_bwrap
def test_a_path_inside_a_mask_gets_no_mount_point_of_its_own(tmp_path, layout):
    """The default layout nests the keys in the config dir, inside a grant of ~:
    bwrap cannot make a mount point inside the config mask's read-only tmpfs."""
    extra = {"METNOS_HOME": str(tmp_path / "user" / "mh")} if layout != "xdg" else {}
    s = make_env(tmp_path, "xdg", **extra)
    (s.root / "code").mkdir()
    ws = s.workspace
    assert ws.keys_dir.is_relative_to(s.home) and ws.keys_dir.is_dir()
    a = bwrap.plan_for(s.root / "code", SandboxProfile(fs_read=("~",), fs_write=("~/out",)),
                       workspace=ws, env=s.env).bwrap_args
    masks = [Path(a[i + 3]) for i, x in enumerate(a) if x == "--perms" and a[i + 1] == "0000"]
    assert ws.config_dir in masks
    assert not [(m, p) for m in masks for p in masks if m != p and m.is_relative_to(p)]
    assert str(ws.keys_dir) not in pairs(a, "--ro-bind")
    # And bwrap really builds it.
    r = subprocess.run([*a, "--", "/bin/ls", str(s.home)], capture_output=True, text=True, env={})
    assert r.returncode == 0, r.stderr
