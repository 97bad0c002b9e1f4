"""bubblewrap: probing it, deriving its flags from a profile, wrapping a command.

The flags follow seeds/003 ch. 3 with the lessons of DESIGN decision 4:
``--cap-drop ALL`` (as root bwrap otherwise keeps every capability), an
allow-list of ``/etc`` files instead of ``/etc`` (root reads /etc/shadow
whatever ``--uid`` says), the core forbidden paths masked last, and the
seccomp program passed by fd. Where bwrap cannot run, planning refuses
(SandboxUnavailable, overriding the fallback of seeds/003 ch. 4); only an
explicit METNOS_SANDBOX=off passes the command through unchanged, with the
policy check as the only defence.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import site
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from metnos.mechanisms.sandbox import bytecode as _bytecode
from metnos.mechanisms.sandbox import landlock as _landlock
from metnos.mechanisms.sandbox import seccomp as _seccomp
from metnos.mechanisms.sandbox.forbidden import is_inside
from metnos.mechanisms.sandbox.policy import Scope, scope_for
from metnos.mechanisms.sandbox.profile import SandboxProfile
from metnos.mechanisms.sandbox.programs import executed_for, find_program
from metnos.mechanisms.failures import SandboxUnavailable
from metnos.settings.errors import SandboxSettingError
from metnos.settings.sandbox import sandbox_off as _sandbox_setting
from metnos.settings.loader import env_section
from metnos.settings.workspace import Workspace

_SYSTEM_RO = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32")
# What the interpreter and libc read from /etc; nothing that names users or
# holds secrets.
_ETC_ALWAYS = ("/etc/ld.so.cache", "/etc/localtime", "/etc/mime.types")
_ETC_NETWORK = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf",
                "/etc/gai.conf", "/etc/ssl/certs", "/etc/ca-certificates.conf")
# The whole of /dev inside: no tty, console, ptmx or pts. The sandbox runs in
# a session of its own (--new-session, DESIGN.md decision 4), and besides:
# with no terminal device here and stdio always pipes, there is no terminal to
# reach even if that flag were dropped (its setsid costs the kernel a scheduler
# autogroup, about 3 ms of wall time a spawn under load: docs/benchmarks.md),
# and the seccomp filter refuses TIOCSTI and TIOCLINUX.
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
_DEV_TMPFS_BYTES = 64 * 1024
# Fixed places inside the sandbox, so nothing about the host's layout (and no
# mask over a grant) depends on where the code lives.
INSIDE_DIR = "/run/metnos"
INSIDE_CODE = INSIDE_DIR + "/code"
INSIDE_HOST = INSIDE_DIR + "/host.py"
INSIDE_LANDLOCK = INSIDE_DIR + "/landlock.py"
INSIDE_BRIDGE = INSIDE_DIR + "/bridge.py"
_TMP_MAX_MB = 64
# Who the executor is inside its user namespace: never uid 0, so it holds no
# capability there and cannot setuid back. bwrap maps this id to the invoking
# user's, which is what makes files written through a grant theirs; what that
# mapping would still allow a root invoker (setuid files, file capabilities)
# is refused by the seccomp filter and by --cap-drop ALL.
SANDBOX_UID = 1000
SANDBOX_GID = 1000
# Where the host and the helpers bound into every sandbox live: the package
# does not move under a running runtime.
_HERE = Path(__file__).resolve().parent
_HOST_REAL = str(_HERE.parent / "invocation" / "host.py")


INSTALL_FIX = ("install bubblewrap (e.g. `apt install bubblewrap`) and check that "
               "`metnos sandbox status` says it is active, or set METNOS_SANDBOX=off "
               "to run executors unsandboxed at your own risk")


def sandbox_off(env: Mapping[str, str] | None = None) -> bool:
    """True only for an explicit METNOS_SANDBOX=off; raises SandboxUnavailable for a value
    that is neither on nor off."""
    try:
        return _sandbox_setting(env)
    except SandboxSettingError as e:
        raise SandboxUnavailable(e.reason, e.fix) from None


def bwrap_missing(reason: str | None) -> SandboxUnavailable:
    return SandboxUnavailable(f"bubblewrap cannot start ({reason or 'unknown reason'})", INSTALL_FIX)


def sandbox_disabled(env: Mapping[str, str] | None = None) -> bool:
    """METNOS_SANDBOX=off; raises SandboxUnavailable for an unknown value."""
    return sandbox_off(env)


@dataclass(frozen=True)
class BwrapProbe:
    path: str | None
    version: str | None
    works: bool
    error: str | None
    disable_userns: bool = False


def _probe_argv(bwrap: str) -> list[str]:
    argv = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-net", "--cap-drop", "ALL", "--die-with-parent", "--new-session"]
    for p in _SYSTEM_RO:
        argv += _system_bind(p)
    return argv + ["--proc", "/proc", *dev_args(), "--", "true"]


def dev_args() -> list[str]:
    """bwrap flags building the sandbox's /dev (instead of ``--dev``, which
    adds /dev/tty, /dev/ptmx, /dev/pts and, when bwrap's stdout is a
    terminal, /dev/console): the devices of ``_DEVICES``, the /proc/self/fd
    links, read-only once built."""
    a = ["--size", str(_DEV_TMPFS_BYTES), "--tmpfs", "/dev"]
    for d in _DEVICES:
        a += ["--dev-bind", d, d]
    a += ["--symlink", "/proc/self/fd", "/dev/fd"]
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        a += ["--symlink", f"/proc/self/fd/{fd}", f"/dev/{name}"]
    return a + ["--remount-ro", "/dev"]


@functools.lru_cache(maxsize=1)
def probe() -> BwrapProbe:
    """Run bwrap once with the namespaces we use: found is not the same as works."""
    try:
        path = shutil.which("bwrap")
    except Exception as e:  # a broken PATH is "no bwrap", not a crash
        return BwrapProbe(None, None, False, f"which failed: {e}")
    if not path:
        return BwrapProbe(None, None, False, "bwrap not found in PATH")
    env = {"PATH": "/usr/bin:/bin"}
    try:
        v = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=5, env=env)
        version = v.stdout.strip().removeprefix("bubblewrap ").strip() or None
        helptext = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=5, env=env).stdout
        r = subprocess.run(_probe_argv(path), capture_output=True, text=True, timeout=10, env=env)
    except (OSError, subprocess.SubprocessError) as e:
        return BwrapProbe(path, None, False, f"running bwrap failed: {e}")
    if r.returncode != 0:
        return BwrapProbe(path, version, False, (r.stderr.strip() or f"exit {r.returncode}")[-500:])
    return BwrapProbe(path, version, True, None, "--disable-userns" in helptext)


def require_sandbox(env: Mapping[str, str] | None = None) -> str:
    """The mode executors will run in: "bwrap", or "off" when the user said
    so. Raises SandboxUnavailable when bwrap cannot start or the setting is
    unknown: nothing runs then."""
    if sandbox_off(env):
        return "off"
    pr = probe()
    if not pr.works:
        raise bwrap_missing(pr.error)
    return "bwrap"


def _system_bind(p: str) -> list[str]:
    if os.path.islink(p):
        # Merged-/usr systems: recreate the link rather than bind through it.
        return ["--symlink", os.readlink(p), p]
    if os.path.exists(p):
        return ["--ro-bind", p, p]
    return []


@functools.lru_cache(maxsize=1)
def _python_runtime() -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    # Once per process: the interpreter does not move under a running runtime,
    # and resolving it costs a good part of planning a spawn.
    exe = os.path.realpath(sys.executable)
    trees = []
    for p in {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}:
        if not any(Path(p).is_relative_to(s) for s in _SYSTEM_RO):
            trees.append(p)
    sites = [os.path.realpath(s) for s in site.getsitepackages() if os.path.isdir(s)]
    return exe, tuple(sorted(trees)), tuple(sorted(set(sites)))


def python_runtime() -> tuple[str, list[str], list[str]]:
    """(interpreter, trees it needs read-only, its site-packages dirs)."""
    exe, trees, sites = _python_runtime()
    return exe, list(trees), list(sites)


class SandboxedExecutor(Protocol):
    """What wrap_command needs to know about an executor."""

    code_dir: Path
    profile: SandboxProfile


@dataclass
class SandboxPlan:
    """Everything decided about one spawn before it happens."""

    mode: str  # "bwrap", or "off" (METNOS_SANDBOX=off)
    scope: Scope
    code_dir: str  # as the sandboxed process sees it
    host_path: str
    landlock_path: str | None
    landlock_rules: list[tuple[str, int]] = field(default_factory=list)
    tcp_ports: list[int] | None = None
    site_packages: list[str] = field(default_factory=list)
    bwrap_args: list[str] = field(default_factory=list)
    child_env: dict[str, str] = field(default_factory=dict)
    seccomp: bool = False
    network: bool = False  # the seccomp program that allows AF_INET/AF_INET6
    reason: str | None = None
    # The executor's traffic goes through an egress proxy started for the spawn.
    egress: bool = False
    # (real source, path inside) of the modules the host imports from
    # INSIDE_DIR: their bytecode goes in beside them (metnos.mechanisms.sandbox.bytecode).
    helpers: list[tuple[str, str]] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return self.mode == "bwrap"

    @property
    def layers(self) -> tuple[str, ...]:
        if not self.active:
            return ("policy",)
        out = ["policy", "bwrap"]
        if self.seccomp:
            out.append("seccomp")
        if self.landlock_path:
            out.append("landlock")
        if self.egress:
            out.append("egress-proxy")
        return tuple(out)


@dataclass
class WrappedCommand:
    argv: list[str]
    pass_fds: tuple[int, ...]
    env: dict[str, str]
    plan: SandboxPlan

    def gated_argv(self, info_fd: int, block_fd: int) -> list[str]:
        """The argv with bwrap writing its sandbox child's pid to ``info_fd``
        and holding the sandbox, built but not yet run, until a byte arrives
        on ``block_fd``."""
        return [self.argv[0], "--info-fd", str(info_fd), "--block-fd", str(block_fd), *self.argv[1:]]

    def close(self) -> None:
        for fd in self.pass_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.pass_fds = ()


def _child_env(profile: SandboxProfile, scope: Scope, env: Mapping[str, str]) -> dict[str, str]:
    out = {"PATH": "/usr/bin:/bin", "HOME": str(scope.home), "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
    if "TZ" in env:
        out["TZ"] = env["TZ"]
    for name in profile.env:
        if name in env:
            out[name] = env[name]
    return out


def _depth_then_name(p: Path) -> tuple[int, str]:
    text = str(p)
    return text.count("/"), text


def mask_args(forbidden: Iterable[Path], *, bound: Sequence[Path]) -> list[str]:
    """bwrap flags hiding every forbidden path that a bind would show.

    A path inside a folder already masked is hidden with it and gets no mask
    of its own: its mount point would have to be created inside the mask's
    read-only tmpfs, which bwrap cannot do (the default layout nests
    ~/.config/metnos/keys in ~/.config/metnos, itself inside a grant of ~).
    """
    out: list[str] = []
    masked: list[Path] = []
    for f in sorted(set(forbidden), key=_depth_then_name):
        if is_inside(f, masked) is not None or is_inside(f, list(bound)) is None:
            continue
        if os.path.islink(f) or not os.path.exists(f):
            continue
        if os.path.isdir(f):
            out += ["--perms", "0000", "--tmpfs", str(f), "--remount-ro", str(f)]
            masked.append(f)
        else:
            out += ["--ro-bind", "/dev/null", str(f)]
    return out


@functools.lru_cache(maxsize=1)
def _landlock_abi() -> int:
    """The kernel's Landlock ABI, which does not change while it runs."""
    return _landlock.abi_version()


def plan_for(
    code_dir: Path,
    profile: SandboxProfile,
    *,
    workspace: Workspace,
    env: Mapping[str, str] | None = None,
    also_forbid: Iterable[Path] = (),
    private_network: bool = False,
    extra_files: Mapping[str, Path] | None = None,
) -> SandboxPlan:
    """Decide how to run an executor: the scope, the flags, the layers.

    ``also_forbid`` adds paths to mask beyond those of ``workspace``/``env``
    (a birth test plans against a scratch home, yet the real one's secrets
    must stay hidden). Every sandbox has a network namespace of its own; a
    network profile reaches out through the egress proxy (``egress``), unless
    ``private_network`` keeps it to its own loopback, where any TCP port is
    allowed since nothing outside the sandbox can be reached. ``extra_files`` are bound read-only
    as ``INSIDE_DIR/<name>``.

    Raises PolicyViolation when the profile itself asks for what no profile
    may hold, SandboxUnavailable when bwrap cannot start (unless
    METNOS_SANDBOX=off) or the setting is unknown.
    """
    env = dict(os.environ if env is None else env)
    scope = scope_for(profile, workspace=workspace, env=env)
    extra_forbidden = [p for p in also_forbid if p not in scope.forbidden]
    if extra_forbidden:
        scope = dataclasses.replace(scope, forbidden=scope.forbidden + tuple(extra_forbidden))
    code_dir = Path(os.path.realpath(code_dir))
    host_real = _HOST_REAL
    child_env = _child_env(profile, scope, env)
    exe, trees, sites = python_runtime()
    wanted_sites = sites if profile.site_packages else []
    if require_sandbox(env) == "off":
        return SandboxPlan("off", scope, str(code_dir), host_real, None, site_packages=wanted_sites,
                           child_env=child_env, reason="METNOS_SANDBOX=off")
    pr = probe()
    seccomp_ok, _ = _seccomp.available()

    a: list[str] = [pr.path or "bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc",
                    "--unshare-uts", "--unshare-cgroup-try", "--cap-drop", "ALL",
                    "--new-session", "--die-with-parent", "--clearenv", "--hostname", "metnos",
                    "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID)]
    if pr.disable_userns:
        # Beside the seccomp filter, which refuses the same (unshare, setns, clone's CLONE_NEW*
        # flags, clone3): measured, leaving it out saves nothing (bench/sandbox_spawn.py
        # --fences disable-userns), so both fences stay.
        a.append("--disable-userns")
    # Always a network namespace of its own: an executor with a network
    # grant reaches the world only through the egress proxy (egress.py).
    a.append("--unshare-net")
    for k, v in sorted(child_env.items()):
        a += ["--setenv", k, v]
    rules: list[tuple[str, int]] = []
    for p in _SYSTEM_RO:
        a += _system_bind(p)
        if os.path.isdir(p) and not os.path.islink(p):
            rules.append((p, _landlock.READ))
    # A fresh /tmp first: the interpreter's own trees go on top of it, so a
    # venv or an interpreter that lives under /tmp stays visible.
    tmp_mb = min(_TMP_MAX_MB, profile.max_memory_mb)
    a += ["--size", str(tmp_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    for t in trees:
        a += ["--ro-bind", t, t]
        rules.append((t, _landlock.READ))
    # Installed packages are hidden unless the profile asks for them (an
    # executor that imports httpx); they hold no secrets, but what is not
    # needed is not shown.
    for s in sites:
        if any(Path(s).is_relative_to(t) for t in trees + list(_SYSTEM_RO)):
            if not profile.site_packages:
                a += ["--tmpfs", s, "--remount-ro", s]
        elif profile.site_packages:
            a += ["--ro-bind", s, s]
            rules.append((s, _landlock.READ))
    a += ["--proc", "/proc", *dev_args()]
    rules += [("/proc/self", _landlock.READ), ("/tmp", _landlock.WRITE), ("/etc", _landlock.READ)]
    rules += [(d, _landlock.DEVICE_RW) for d in _DEVICES]
    for f in _ETC_ALWAYS + (_ETC_NETWORK if profile.wants_network else ()):
        if os.path.exists(f):
            a += ["--ro-bind", f, f]
    helpers = [(str(_HERE / "landlock.py"), INSIDE_LANDLOCK)]
    a += ["--ro-bind", str(code_dir), INSIDE_CODE,
          "--ro-bind", host_real, INSIDE_HOST]
    egress = profile.wants_network and not private_network
    if egress:
        # The bridge's threads would each get a glibc malloc arena, reserved
        # 64 MB at a time: address space the memory cap counts.
        helpers.append((str(_HERE / "bridge.py"), INSIDE_BRIDGE))
        a += ["--setenv", "MALLOC_ARENA_MAX", "1"]
    for real, inside in helpers:
        a += ["--ro-bind", real, inside]
    for name, real in sorted((extra_files or {}).items()):
        a += ["--ro-bind", str(real), f"{INSIDE_DIR}/{name}"]
    rules.append((INSIDE_DIR, _landlock.READ))
    # Parents before children, so a read-write folder inside a read-only
    # grant (or the reverse) keeps its own mode.
    for g in sorted(scope.grants, key=lambda g: (len(g.real.parts), g.write)):
        if os.path.exists(g.real):
            a += ["--bind" if g.write else "--ro-bind", str(g.real), str(g.real)]
        rules.append((str(g.real), _landlock.WRITE if g.write else _landlock.READ))
    # A write grant over the interpreter's own trees (a pyenv under ~) must
    # not let an executor rewrite the Python that Metnos itself runs on.
    for t in trees:
        if any(g.write and Path(t).is_relative_to(g.real) for g in scope.grants):
            a += ["--ro-bind", t, t]
    # Masks last: no later bind can uncover them.
    a += mask_args(scope.forbidden, bound=[g.real for g in scope.grants] + [Path(t) for t in trees])
    a += ["--chdir", "/tmp"]

    abi = _landlock_abi()
    if scope.exec_fence is not None:
        if abi < 1:
            # Fail closed: without Landlock a listed program could start any other one.
            raise SandboxUnavailable("the kernel offers no Landlock, which fences what a listed program may start",
                                     "run on Linux 5.13 or later with Landlock enabled (lsm=landlock), or set "
                                     "[commands] shell = \"forbidden\" in config.toml")
        rules = _fenced(rules, scope.exec_fence)
    # No TCP at all without a grant; with one, the host allows the bridge's
    # port alone once it knows it; a private loopback (births) may use any.
    tcp_ports: list[int] | None = None if private_network and profile.wants_network else []
    return SandboxPlan(
        "bwrap", scope, INSIDE_CODE, INSIDE_HOST, INSIDE_LANDLOCK if abi >= 1 else None,
        landlock_rules=rules, tcp_ports=tcp_ports,
        site_packages=wanted_sites, bwrap_args=a, child_env=child_env, seccomp=seccomp_ok,
        network=profile.wants_network, egress=egress, helpers=helpers,
    )


def _fenced(rules: list[tuple[str, int]], programs: Sequence[str]) -> list[tuple[str, int]]:
    """The rules with execution taken off every path, then given back to the listed programs alone
    (and the loader or interpreter each one's start executes). The interpreter running the host is
    already executing; what the call may start after that is only this."""
    out = [(path, rights & ~_landlock.FS_EXECUTE) for path, rights in rules]
    for name in programs:
        found = find_program(name)
        for path in executed_for(found) if found is not None else ():
            out.append((str(path), _landlock.FS_EXECUTE | _landlock.FS_READ_FILE))
    return out


def wrap_plan(plan: SandboxPlan, cmd: Sequence[str]) -> WrappedCommand:
    """The final argv; its fds (the seccomp program, the helpers' bytecode)
    must be passed and closed after."""
    # bwrap's own environment is visible as /proc/1/environ inside: give it
    # nothing worth reading.
    if not plan.active:
        return WrappedCommand(list(cmd), (), dict(plan.child_env), plan)
    fds: list[int] = []
    argv = list(plan.bwrap_args)
    try:
        if plan.seccomp:
            fd = _data_fd("metnos-seccomp", _seccomp.filter_bpf(plan.network))
            fds.append(fd)
            argv += ["--seccomp", str(fd)]
        for real, inside in plan.helpers:
            pyc = _bytecode.pyc_for(real, inside)
            if pyc is not None:
                fd = _data_fd("metnos-pyc", pyc)
                fds.append(fd)
                argv += ["--ro-bind-data", str(fd), _bytecode.inside_pyc(inside)]
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return WrappedCommand(argv + ["--", *cmd], tuple(fds), {"PATH": "/usr/bin:/bin"}, plan)


def _data_fd(name: str, data: bytes) -> int:
    """A fresh memfd holding ``data``, for bwrap to read from the start: a
    memfd rather than a pipe so the write never blocks, whatever the size;
    one per spawn, so nothing a sandbox could do to it outlives that sandbox."""
    fd = os.memfd_create(name, 0)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def wrap_command(
    executor: SandboxedExecutor,
    cmd: Sequence[str],
    *,
    workspace: Workspace | None = None,
    env: Mapping[str, str] | None = None,
) -> WrappedCommand:
    """seeds/003's entry point: ``cmd`` wrapped for ``executor``'s profile,
    unchanged when METNOS_SANDBOX=off; SandboxUnavailable when bwrap cannot run."""
    ws = workspace or Workspace.from_config(env_section("workspace", env))
    return wrap_plan(plan_for(executor.code_dir, executor.profile, workspace=ws, env=env), cmd)
