"""Signing and verifying an executor folder.

The signed message is the one seeds/000 ch. 4 fixes:

    blake3(manifest.toml) || blake3(main.py) || blake3(schema.json) || profile.lock

``manifest.sig`` is a small JSON document that carries, next to the Ed25519
signature, the digests it was computed over. The signature authenticates
those recorded digests; each file is then compared with its own recorded
digest, so a tampered folder is reported by file ("main.py: digest differs
from the signed one") rather than as a bare "bad signature".
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3
from nacl.encoding import HexEncoder
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from metnos.executors.keys import key_fingerprint
from metnos.executors.manifest import Manifest, ManifestError, parse_manifest
from metnos.executors.schemas import ContractSchemas, SchemaCheckCache, SchemaProblem, check_contract_schemas

MANIFEST = "manifest.toml"
CODE = "main.py"
SCHEMA = "schema.json"
LOCK = "profile.lock"
SIGNATURE = "manifest.sig"
BIRTH = "tests/birth.py"

# Order matters: it is the order of the signed concatenation.
SIGNED_FILES = (MANIFEST, CODE, SCHEMA)
REQUIRED_FILES = (MANIFEST, CODE, SCHEMA, BIRTH, LOCK, SIGNATURE)
SIG_FORMAT = 1


class SigningError(Exception):
    """The folder cannot be signed: it names the file and what is wrong."""


@dataclass(frozen=True)
class Check:
    file: str
    check: str
    ok: bool
    detail: str = ""

    def __str__(self) -> str:
        state = "ok" if self.ok else "FAILED"
        return f"{self.file}: {self.check} {state}" + (f": {self.detail}" if self.detail else "")


@dataclass
class Verification:
    dir: Path
    checks: list[Check] = field(default_factory=list)
    manifest: Manifest | None = None
    schemas: ContractSchemas | None = None
    # blake3 over the signed message: names "which exact executor" this is.
    digest: str | None = None
    file_digests: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def failure(self) -> Check | None:
        return next((c for c in self.checks if not c.ok), None)

    def _add(self, file: str, check: str, ok: bool, detail: str = "") -> bool:
        self.checks.append(Check(file, check, ok, detail))
        return ok


def _hex(digest: bytes) -> str:
    return "blake3:" + digest.hex()


def signed_message(file_digests: list[bytes], lock: bytes) -> bytes:
    return b"".join(file_digests) + lock


def message_digest(message: bytes) -> str:
    return _hex(blake3.blake3(message).digest())


def static_checks(manifest_bytes: bytes, schema_bytes: bytes, schema_digest: str | None = None,
                  cache: SchemaCheckCache | None = None) -> tuple[Manifest, ContractSchemas]:
    """Parse the manifest and the schemas; raise ManifestError / SchemaProblem."""
    manifest = parse_manifest(manifest_bytes, MANIFEST)
    schemas = check_contract_schemas(
        schema_bytes, manifest.contract.input_schema, manifest.contract.output_schema,
        digest=schema_digest, cache=cache,
    )
    return manifest, schemas


def sign_executor(directory: Path | str, signing_key: SigningKey) -> str:
    """Write ``profile.lock`` and ``manifest.sig``; return the executor digest.

    Refuses (SigningError) a folder whose manifest or schema is invalid: a
    signature vouches that the loader's static checks passed once.
    """
    d = Path(directory)
    for name in (*SIGNED_FILES, BIRTH):
        if not (d / name).is_file():
            raise SigningError(f"{d / name}: missing")
    data = {name: (d / name).read_bytes() for name in SIGNED_FILES}
    try:
        manifest, _ = static_checks(data[MANIFEST], data[SCHEMA])
    except ManifestError as exc:
        raise SigningError(f"{d / MANIFEST}: {exc}") from None
    except SchemaProblem as exc:
        raise SigningError(f"{d / SCHEMA}: {exc}") from None
    return write_signature(d, signing_key, manifest.sandbox_profile().lock_digest().encode())


def write_signature(directory: Path | str, signing_key: SigningKey, lock: bytes) -> str:
    """Sign the folder as it is, with ``lock`` as profile.lock, checking nothing.

    The low half of sign_executor; tests use it to produce signed folders
    that the loader must still refuse (a broken schema, a stale lock).
    """
    d = Path(directory)
    data = {name: (d / name).read_bytes() for name in SIGNED_FILES}
    digests = [blake3.blake3(data[name]).digest() for name in SIGNED_FILES]
    message = signed_message(digests, lock)
    signature = signing_key.sign(message).signature
    sig_doc = {
        "format": SIG_FORMAT,
        "algorithm": "ed25519",
        "key": signing_key.verify_key.encode(encoder=HexEncoder).decode(),
        "digests": {name: _hex(dg) for name, dg in zip(SIGNED_FILES, digests)},
        "profile_lock": lock.decode(),
        "signature": signature.hex(),
    }
    _write_atomic(d / LOCK, lock)
    _write_atomic(d / SIGNATURE, json.dumps(sig_doc, indent=2).encode() + b"\n")
    return message_digest(message)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _parse_sig(raw: bytes) -> dict[str, Any]:
    doc = json.loads(raw)
    if not isinstance(doc, dict) or doc.get("format") != SIG_FORMAT or doc.get("algorithm") != "ed25519":
        raise ValueError("unknown format or algorithm")
    digests = doc["digests"]
    for name in SIGNED_FILES:
        if not (isinstance(digests.get(name), str) and digests[name].startswith("blake3:")):
            raise ValueError(f"no digest for {name}")
        bytes.fromhex(digests[name][7:])
    if not isinstance(doc["profile_lock"], str) or not isinstance(doc["signature"], str):
        raise ValueError("profile_lock and signature must be strings")
    bytes.fromhex(doc["signature"])
    return doc


def verify_executor(directory: Path | str, verify_key: VerifyKey, *,
                    schema_cache: SchemaCheckCache | None = None) -> Verification:
    """Run every static check of the loader on one folder.

    Checks, in order: each required file present; manifest.sig readable; the
    signature valid under ``verify_key``; each signed file's digest; the
    profile.lock bytes; the manifest (TOML + model); the lock recomputed from
    the manifest; schema.json (JSON, JSON Schema, pointers). Birth tests are
    the loader's business (they run code).
    """
    d = Path(directory)
    v = Verification(dir=d)
    data: dict[str, bytes] = {}
    for name in REQUIRED_FILES:
        try:
            if name != BIRTH:
                data[name] = (d / name).read_bytes()
            elif not (d / name).is_file():
                raise FileNotFoundError
        except FileNotFoundError:
            v._add(name, "present", False, "missing")
        except OSError as exc:
            v._add(name, "present", False, f"unreadable: {exc.strerror}")
    if not v.ok:
        return v

    try:
        sig = _parse_sig(data[SIGNATURE])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        v._add(SIGNATURE, "format", False, f"malformed signature file: {exc}")
        return v
    recorded = [bytes.fromhex(sig["digests"][name][7:]) for name in SIGNED_FILES]
    recorded_lock = sig["profile_lock"].encode()
    message = signed_message(recorded, recorded_lock)
    try:
        verify_key.verify(message, bytes.fromhex(sig["signature"]))
    except BadSignatureError:
        signer = str(sig.get("key", ""))[:16] or "unknown"
        mine = key_fingerprint(verify_key)
        why = ("signed by another key" if signer != mine else "signature does not match the signed digests")
        v._add(SIGNATURE, "signature", False, f"{why} (signer {signer}, instance key {mine})")
        return v
    v._add(SIGNATURE, "signature", True)
    v.digest = message_digest(message)

    for name, want in zip(SIGNED_FILES, recorded):
        got = blake3.blake3(data[name]).digest()
        v.file_digests[name] = _hex(got)
        v._add(name, "digest", got == want,
               "" if got == want else f"differs from the signed one (signed {_hex(want)[:23]}, found {_hex(got)[:23]})")
    v._add(LOCK, "digest", data[LOCK] == recorded_lock,
           "" if data[LOCK] == recorded_lock else "differs from the signed lock")
    if not v.ok:
        return v

    try:
        v.manifest = parse_manifest(data[MANIFEST], MANIFEST)
        v._add(MANIFEST, "manifest", True)
    except ManifestError as exc:
        v._add(MANIFEST, "manifest", False, str(exc))
        return v
    lock_now = v.manifest.sandbox_profile().lock_digest().encode()
    v._add(LOCK, "profile_lock", lock_now == data[LOCK],
           "" if lock_now == data[LOCK] else
           f"effective profile is {lock_now.decode()[:23]}..., lock says {data[LOCK].decode()[:23]}...")
    try:
        v.schemas = check_contract_schemas(
            data[SCHEMA], v.manifest.contract.input_schema, v.manifest.contract.output_schema,
            digest=v.file_digests[SCHEMA], cache=schema_cache,
        )
        v._add(SCHEMA, "schema", True)
    except SchemaProblem as exc:
        v._add(SCHEMA, "schema", False, str(exc))
    return v
