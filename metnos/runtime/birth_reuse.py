"""Taking an earlier birth result instead of running the birth tests again.

Birth tests run in the sandbox and cost seconds at every boot, although
between two boots nothing they depend on usually changed. What they depend
on: the executor's signed files and its tests, the sandbox (its layers and
the bubblewrap, Landlock and seccomp under them) and the runtime that runs
them (Metnos's version and the code of its executor, sandbox and invocation
packages, the interpreter). A passed birth is an event on the executor
(``BirthTestsPassed``) carrying all of these; a boot finding the last pass of
an active version made under exactly the same conditions takes it.

Births run again when a version is installed or its files change, when the
sandbox or the runtime changes, at each daemon start and at
``metnos executors verify``; ``METNOS_BIRTH_REUSE=0`` makes every boot run
them. The signature and the digests are checked at every boot and every
call whatever this module says: it only spares the birth tests.
"""

from __future__ import annotations

import functools
import os
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import blake3
from eventsourcing.application import AggregateNotFoundError

import metnos
from domain.executor import Executor, executor_id
from metnos.mechanisms.eventlog import EventLog
from metnos.mechanisms.executors.birth import tests_digest
from metnos.mechanisms.executors.loader import LoadedExecutor
from metnos.mechanisms.sandbox import seccomp
from metnos.mechanisms.sandbox.status import status
from metnos.settings.loader import env_section

ENV_REUSE = "METNOS_BIRTH_REUSE"
# The packages whose code a birth runs through, besides the executor's own.
_BIRTH_PACKAGES = ("executors", "sandbox", "invocation")


def reuse_allowed(env: Mapping[str, str] | None = None) -> bool:
    return env_section("process", env).birth_reuse


@dataclass(frozen=True)
class BirthConditions:
    """The world a birth ran in, as text a person can read in the log."""

    sandbox: str
    runtime: str

    @classmethod
    def current(cls, env: Mapping[str, str] | None = None) -> BirthConditions:
        return cls(sandbox=sandbox_fingerprint(env), runtime=runtime_fingerprint())


def sandbox_fingerprint(env: Mapping[str, str] | None = None) -> str:

    st = status(env)
    bpf = blake3.blake3(seccomp.filter_bpf()).hexdigest()[:16] if st.seccomp else "none"
    return (f"{st.mode}; bwrap {st.bwrap_version or 'none'}; layers {','.join(st.layers)}; "
            f"landlock abi {st.landlock_abi}; seccomp {bpf}")


@functools.lru_cache(maxsize=1)
def runtime_fingerprint() -> str:
    root = Path(metnos.__file__).parent
    h = blake3.blake3()
    for package in _BIRTH_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            h.update(str(path.relative_to(root)).encode() + b"\0")
            h.update(path.read_bytes())
    return (f"metnos {metnos.__version__}; code {h.hexdigest()[:16]}; "
            f"python {platform.python_version()} {os.path.realpath(sys.executable)}")


class BirthLedger:
    """What the log knows of earlier births, asked one executor version at a time."""

    def __init__(self, log: EventLog, conditions: BirthConditions) -> None:
        self.log = log
        self.conditions = conditions

    def passed(self, le: LoadedExecutor) -> bool:
        try:
            executor: Executor = self.log.repository.get(executor_id(le.origin, le.name))
        except AggregateNotFoundError:
            return False
        return executor.birth_passed(le.version, digest=le.digest, tests=tests_digest(le.dir),
                                     sandbox=self.conditions.sandbox, runtime=self.conditions.runtime)
