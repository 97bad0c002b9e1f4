"""Signing and verifying an executor folder: every file in it.

The signed message (signature format 2) names every file of the version
folder except the signature itself and the lock, sorted by path, each with
its blake3, and then the profile lock:

    metnos executor signature 2
    blake3:<hex> <path>          one line a file, sorted by path
    profile.lock <lock>

so tests/birth.py, helper modules and data are covered as much as main.py
(seeds/000 ch. 3 names only manifest, code, schema and lock; DESIGN decision
3 and issue 16 widen it). Nothing in the folder is ignored. What cannot be
signed is refused outright, at signing and at every check: a symbolic link,
anything that is not a plain file or a folder, a name with a newline, and
bytecode (``__pycache__``, ``*.pyc``), which Python would load in place of
the source. Signing also refuses code that uses eval, exec, compile,
__import__ or importlib, and modules named like the standard library's
(metnos/mechanisms/executors/code_check.py).

``manifest.sig`` is a small JSON document that carries, next to the Ed25519
signature, the digests it was computed over. The signature authenticates
those recorded digests; the folder is then compared with them file by file,
so a tampered folder is reported by file ("tests/birth.py: digest differs
from the signed one", "socket.py: not covered by the signature") rather than
as a bare "bad signature". A signature of the old format (1: manifest, code,
schema and lock only) is refused with the way to re-sign it.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3
from nacl.encoding import HexEncoder
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from metnos.mechanisms.executors.code_check import problems_in_source, shadowing_problems
from metnos.mechanisms.executors.keys import key_fingerprint
from metnos.mechanisms.executors.manifest import Manifest, ManifestError, parse_manifest
from metnos.mechanisms.executors.schemas import ContractSchemas, SchemaCheckCache, SchemaProblem, check_contract_schemas

MANIFEST = "manifest.toml"
CODE = "main.py"
SCHEMA = "schema.json"
LOCK = "profile.lock"
SIGNATURE = "manifest.sig"
BIRTH = "tests/birth.py"

# The files every executor has; all of them, and every other file, are signed.
SIGNED_FILES = (MANIFEST, CODE, SCHEMA, BIRTH)
REQUIRED_FILES = (MANIFEST, CODE, SCHEMA, BIRTH, LOCK, SIGNATURE)
SIG_FORMAT = 2
_MESSAGE_HEAD = b"metnos executor signature 2\n"
# Format 1 signed blake3(manifest) || blake3(main.py) || blake3(schema) || lock.
LEGACY_FORMAT = 1
LEGACY_SIGNED_FILES = (MANIFEST, CODE, SCHEMA)
RESIGN_HINT = ("re-sign it: `metnos init` re-signs the seed executors, "
               "`metnos executors sign DIR` any other folder")


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


@dataclass(frozen=True)
class FolderProblem:
    """Something in the folder that no signature may cover."""

    file: str
    check: str
    detail: str


def folder_files(directory: Path) -> tuple[list[str], list[FolderProblem]]:
    """Every file of the folder to sign, as sorted relative POSIX paths
    (the signature and the lock aside), and what may not be there at all."""
    files: list[str] = []
    problems: list[FolderProblem] = []

    def walk(d: Path, rel: str) -> None:
        with os.scandir(d) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            path = f"{rel}{e.name}"
            if rel == "" and e.name in (SIGNATURE, LOCK):
                continue
            if any(c in e.name for c in "\n\r\0") or not e.name.isprintable() or _undecodable(e.name):
                problems.append(FolderProblem(path, "name", "a file name that cannot be signed"))
            elif e.is_symlink():
                problems.append(FolderProblem(path, "plain-file", "a symbolic link; an executor's folder holds plain files and folders only"))
            elif e.is_dir(follow_symlinks=False):
                if e.name == "__pycache__":
                    problems.append(FolderProblem(path, "bytecode", "a bytecode cache; bytecode is never loaded from an executor's folder"))
                else:
                    walk(Path(e.path), path + "/")
            elif not stat.S_ISREG(e.stat(follow_symlinks=False).st_mode):
                problems.append(FolderProblem(path, "plain-file", "neither a plain file nor a folder"))
            elif e.name.endswith((".pyc", ".pyo")):
                problems.append(FolderProblem(path, "bytecode", "bytecode; it is never loaded from an executor's folder"))
            else:
                files.append(path)

    walk(directory, "")
    return sorted(files, key=lambda p: p.encode()), problems


def _undecodable(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # os.fsdecode's surrogates: not UTF-8 on disk
        return True
    return False


def signed_message(file_digests: dict[str, bytes], lock: bytes) -> bytes:
    lines = [_MESSAGE_HEAD]
    for path in sorted(file_digests, key=lambda p: p.encode()):
        lines.append(f"{_hex(file_digests[path])} {path}\n".encode())
    lines.append(b"profile.lock " + lock + b"\n")
    return b"".join(lines)


def legacy_digest(directory: Path | str) -> str | None:
    """The digest format 1 gives the folder as it is now (None: a file is
    missing); how the lifecycle recognises an executor re-signed under format 2
    whose files format 1 covered have not changed."""
    d = Path(directory)
    try:
        parts = [blake3.blake3((d / n).read_bytes()).digest() for n in LEGACY_SIGNED_FILES]
        return message_digest(b"".join(parts) + (d / LOCK).read_bytes())
    except OSError:
        return None


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

    Refuses (SigningError, naming the file and, for code, the line) a folder
    with a required file missing, something no signature may cover, an
    invalid manifest or schema, code that uses eval, exec, compile,
    __import__ or importlib, or a module named like the standard library's:
    a signature vouches that these checks passed once.
    """
    d = Path(directory)
    for name in SIGNED_FILES:
        if not (d / name).is_file():
            raise SigningError(f"{d / name}: missing")
    files, problems = folder_files(d)
    if problems:
        raise SigningError(f"{d / problems[0].file}: {problems[0].detail}; remove it and sign again")
    data = {name: (d / name).read_bytes() for name in (MANIFEST, SCHEMA)}
    try:
        manifest, _ = static_checks(data[MANIFEST], data[SCHEMA])
    except ManifestError as exc:
        raise SigningError(f"{d / MANIFEST}: {exc}") from None
    except SchemaProblem as exc:
        raise SigningError(f"{d / SCHEMA}: {exc}") from None
    code_problems = list(shadowing_problems(files))
    for path in files:
        if path.endswith(".py"):
            code_problems.extend(problems_in_source((d / path).read_bytes(), path))
    if code_problems:
        shown = "; ".join(str(p) for p in code_problems[:5])
        more = f" (and {len(code_problems) - 5} more)" if len(code_problems) > 5 else ""
        raise SigningError(f"{d}: {shown}{more}")
    return write_signature(d, signing_key, manifest.sandbox_profile().lock_digest().encode())


def write_signature(directory: Path | str, signing_key: SigningKey, lock: bytes) -> str:
    """Sign the folder as it is, with ``lock`` as profile.lock, checking
    nothing but that every file can be signed.

    The low half of sign_executor; tests use it to produce signed folders
    that the loader must still refuse (a broken schema, a stale lock).
    """
    d = Path(directory)
    files, problems = folder_files(d)
    if problems:
        raise SigningError(f"{d / problems[0].file}: {problems[0].detail}")
    digests = {path: blake3.blake3((d / path).read_bytes()).digest() for path in files}
    message = signed_message(digests, lock)
    signature = signing_key.sign(message).signature
    sig_doc = {
        "format": SIG_FORMAT,
        "algorithm": "ed25519",
        "key": signing_key.verify_key.encode(encoder=HexEncoder).decode(),
        "files": {path: _hex(digests[path]) for path in files},
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


class LegacySignature(ValueError):
    """A signature of format 1, which covers only manifest, code and schema."""


def _parse_sig(raw: bytes) -> dict[str, Any]:
    doc = json.loads(raw)
    if isinstance(doc, dict) and doc.get("format") == LEGACY_FORMAT:
        raise LegacySignature
    if not isinstance(doc, dict) or doc.get("format") != SIG_FORMAT or doc.get("algorithm") != "ed25519":
        raise ValueError("unknown format or algorithm")
    files = doc["files"]
    if not isinstance(files, dict):
        raise ValueError("files must be an object")
    for name, digest in files.items():
        if not (isinstance(digest, str) and digest.startswith("blake3:")) or "\n" in name:
            raise ValueError(f"bad entry for {name[:80]!r}")
        if len(bytes.fromhex(digest[7:])) != 32:
            raise ValueError(f"bad digest for {name[:80]!r}")
    if not isinstance(doc["profile_lock"], str) or not isinstance(doc["signature"], str):
        raise ValueError("profile_lock and signature must be strings")
    bytes.fromhex(doc["signature"])
    return doc


def signed_in_current_format(directory: Path | str) -> bool:
    """Whether the folder's manifest.sig is of the current format (no check of
    the signature itself)."""
    try:
        doc = json.loads((Path(directory) / SIGNATURE).read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("format") == SIG_FORMAT


def verify_executor(directory: Path | str, verify_key: VerifyKey, *,
                    schema_cache: SchemaCheckCache | None = None) -> Verification:
    """Run every static check of the loader on one folder.

    Checks, in order: each required file present; manifest.sig readable and
    of the current format; the signature valid under ``verify_key``; nothing
    in the folder that no signature may cover; every signed file present
    and with its digest; no file the signature does not name; the
    profile.lock bytes; the manifest (TOML + model); the lock recomputed from
    the manifest; schema.json (JSON, JSON Schema, pointers). Nothing in the
    folder runs here: birth tests are the loader's business, after this.
    """
    d = Path(directory)
    v = Verification(dir=d)
    for name in REQUIRED_FILES:
        try:
            if not (d / name).is_file():
                raise FileNotFoundError
        except FileNotFoundError:
            v._add(name, "present", False, "missing")
        except OSError as exc:
            v._add(name, "present", False, f"unreadable: {exc.strerror}")
    if not v.ok:
        return v

    try:
        sig = _parse_sig((d / SIGNATURE).read_bytes())
    except LegacySignature:
        v._add(SIGNATURE, "format", False,
               f"signed under format {LEGACY_FORMAT}, which does not cover tests/birth.py nor any "
               f"file beside main.py; {RESIGN_HINT}")
        return v
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        v._add(SIGNATURE, "format", False, f"malformed signature file: {exc}")
        return v
    recorded = {name: bytes.fromhex(dg[7:]) for name, dg in sig["files"].items()}
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

    try:
        files, problems = folder_files(d)
    except OSError as exc:
        v._add(".", "present", False, f"the folder cannot be read: {exc.strerror}")
        return v
    for p in problems:
        v._add(p.file, p.check, False, p.detail)
    data: dict[str, bytes] = {}
    present = set(files)
    for name, want in recorded.items():
        if name not in present:
            v._add(name, "present", False, "signed but missing from the folder")
            continue
        try:
            data[name] = (d / name).read_bytes()
        except OSError as exc:
            v._add(name, "present", False, f"unreadable: {exc.strerror}")
            continue
        got = blake3.blake3(data[name]).digest()
        v.file_digests[name] = _hex(got)
        v._add(name, "digest", got == want,
               "" if got == want else f"differs from the signed one (signed {_hex(want)[:23]}, found {_hex(got)[:23]})")
    for name in files:
        if name not in recorded:
            v._add(name, "signed", False, "not covered by the signature: a file that was not there when it was signed")
    lock = (d / LOCK).read_bytes()
    v._add(LOCK, "digest", lock == recorded_lock, "" if lock == recorded_lock else "differs from the signed lock")
    if not v.ok:
        return v

    try:
        v.manifest = parse_manifest(data[MANIFEST], MANIFEST)
        v._add(MANIFEST, "manifest", True)
    except ManifestError as exc:
        v._add(MANIFEST, "manifest", False, str(exc))
        return v
    lock_now = v.manifest.sandbox_profile().lock_digest().encode()
    v._add(LOCK, "profile_lock", lock_now == lock,
           "" if lock_now == lock else
           f"effective profile is {lock_now.decode()[:23]}..., lock says {lock.decode()[:23]}...")
    try:
        v.schemas = check_contract_schemas(
            data[SCHEMA], v.manifest.contract.input_schema, v.manifest.contract.output_schema,
            digest=v.file_digests[SCHEMA], cache=schema_cache,
        )
        v._add(SCHEMA, "schema", True)
    except SchemaProblem as exc:
        v._add(SCHEMA, "schema", False, str(exc))
    return v
