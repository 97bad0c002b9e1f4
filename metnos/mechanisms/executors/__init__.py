"""Executors as files: manifest, keys, signing, verification, loading, birth.

The lifecycle as events (quarantine, promotion, ...) lives elsewhere; this
package only says what is on disk and whether it may run.
"""

from metnos.mechanisms.executors.birth import BirthResult, SpawnRequest, SpawnResult, run_birth_tests
from metnos.mechanisms.executors.context import ExecutorCtx, build_ctx
from metnos.mechanisms.executors.install import install_executor, install_seed_executors
from metnos.mechanisms.executors.keys import (
    KeyFileError,
    ensure_keypair,
    generate_keypair,
    load_signing_key,
    load_verify_key,
)
from metnos.mechanisms.executors.loader import LoadedExecutor, LoadReport, NameIssue, Quarantined, load_executors
from metnos.mechanisms.executors.manifest import Manifest, ManifestError, load_manifest, parse_manifest
from metnos.mechanisms.executors.signing import Check, SigningError, Verification, sign_executor, verify_executor

__all__ = [
    "BirthResult", "Check", "ExecutorCtx", "KeyFileError", "LoadReport", "LoadedExecutor", "Manifest",
    "ManifestError", "NameIssue", "Quarantined", "SigningError", "SpawnRequest", "SpawnResult",
    "Verification", "build_ctx", "ensure_keypair", "generate_keypair", "install_executor",
    "install_seed_executors", "load_executors", "load_manifest", "load_signing_key", "load_verify_key",
    "parse_manifest", "run_birth_tests", "sign_executor", "verify_executor",
]
