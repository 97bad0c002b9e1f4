"""What the sandbox can do on this machine, for ``metnos sandbox status``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from metnos.mechanisms.failures import SandboxUnavailable
from metnos.mechanisms.sandbox import bwrap as _bwrap
from metnos.mechanisms.sandbox import cgroup as _cgroup
from metnos.mechanisms.sandbox import landlock as _landlock
from metnos.mechanisms.sandbox import seccomp as _seccomp


def _userns() -> tuple[bool, str | None]:
    for knob, off in (("/proc/sys/kernel/unprivileged_userns_clone", "0"), ("/proc/sys/user/max_user_namespaces", "0")):
        try:
            if Path(knob).read_text().strip() == off:
                return False, f"{knob} is {off}"
        except OSError:
            continue
    return True, None


@dataclass(frozen=True)
class SandboxStatus:
    active: bool  # executors will run inside bwrap
    # "bwrap"; "off" (METNOS_SANDBOX=off); "unavailable": bwrap cannot start
    # or METNOS_SANDBOX is unknown, and every invocation is refused.
    mode: str
    disabled_via_env: bool
    bwrap_path: str | None
    bwrap_version: str | None
    bwrap_error: str | None
    userns: bool
    userns_note: str | None
    landlock_abi: int
    seccomp: bool
    seccomp_error: str | None
    pids_cgroup: str | None
    pids_cgroup_error: str | None
    # What holds one memory cap for a whole invocation: "cgroup-v2",
    # "cgroup-v1" (a memory cgroup, exact) or "watchdog" (a poll summing the
    # tree's PSS, where no memory cgroup can be made).
    memory_cap: str = "watchdog"
    memory_cgroup: str | None = None
    memory_cgroup_error: str | None = None
    # Why nothing may run, and what to do about it (mode "unavailable").
    refusal: str | None = None

    @property
    def layers(self) -> tuple[str, ...]:
        out = ["policy"]
        if self.active:
            out.append("bwrap")
            if self.seccomp:
                out.append("seccomp")
            if self.landlock_abi:
                out.append("landlock")
        if self.pids_cgroup:
            out.append("pids-cgroup")
        out.append("memory-watchdog" if self.memory_cap == "watchdog" else "memory-cgroup")
        return tuple(out)


def status(env: Mapping[str, str] | None = None) -> SandboxStatus:
    env = os.environ if env is None else env
    pr = _bwrap.probe()
    userns, userns_note = _userns()
    sc_ok, sc_err = _seccomp.available()
    cg = _cgroup.placement()
    refusal = None
    try:
        mode = _bwrap.require_sandbox(env)
    except SandboxUnavailable as e:
        mode, refusal = "unavailable", str(e)
    return SandboxStatus(
        active=mode == "bwrap", mode=mode, disabled_via_env=mode == "off", refusal=refusal,
        bwrap_path=pr.path, bwrap_version=pr.version, bwrap_error=pr.error,
        userns=userns, userns_note=userns_note, landlock_abi=_landlock.abi_version(),
        seccomp=sc_ok, seccomp_error=sc_err,
        pids_cgroup=str(cg.pids) if cg.pids else None, pids_cgroup_error=cg.pids_error,
        memory_cap=cg.memory_mechanism, memory_cgroup=str(cg.memory) if cg.memory else None,
        memory_cgroup_error=cg.memory_error,
    )


def format_status(st: SandboxStatus) -> str:
    def yes(b: bool) -> str:
        return "yes" if b else "no"

    lines = []
    if st.mode == "bwrap":
        lines.append("sandbox: active (bubblewrap)")
    elif st.mode == "off":
        lines.append("sandbox: OFF - disabled by METNOS_SANDBOX=off; executors run as plain subprocesses")
        lines.append("  the policy check (paths and hosts against the profile) and the caps stay on;")
        lines.append("  every invocation records sandbox: off")
    else:
        lines.append("sandbox: UNAVAILABLE - invocations, birth tests and turns are refused")
        lines.append(f"  {st.refusal}")
    lines.append(f"  bwrap:        {st.bwrap_path or 'not found'}"
                 + (f" {st.bwrap_version}" if st.bwrap_version else "")
                 + ("" if st.bwrap_error is None else f" (probe failed: {st.bwrap_error})"))
    lines.append(f"  user ns:      {yes(st.userns)}" + (f" ({st.userns_note})" if st.userns_note else ""))
    lines.append(f"  landlock:     {'ABI ' + str(st.landlock_abi) if st.landlock_abi else 'not available'}"
                 + ("" if st.active or not st.landlock_abi else " (unused without bwrap)"))
    lines.append(f"  seccomp:      {yes(st.seccomp)}" + (f" ({st.seccomp_error})" if st.seccomp_error else "")
                 + ("" if st.active or not st.seccomp else " (unused without bwrap)"))
    lines.append(f"  pids cgroup:  {st.pids_cgroup or 'none'}" + (f" ({st.pids_cgroup_error})" if st.pids_cgroup_error else ""))
    if st.memory_cap == "watchdog":
        memory = "watchdog: the invocation's processes are summed (PSS) and killed past the cap"
        memory += f" (no memory cgroup: {st.memory_cgroup_error})" if st.memory_cgroup_error else ""
    else:
        memory = f"{st.memory_cap.replace('-', ' ')} memory controller, one cap per invocation ({st.memory_cgroup})"
    lines.append(f"  memory cap:   {memory}")
    lines.append(f"  layers:       {', '.join(st.layers)}")
    return "\n".join(lines)
