"""The instance key pair that signs executors (Ed25519, pynacl).

The private key lives in ``Workspace.keys_dir`` with mode 0600 in a 0700 dir,
like an ssh key, and is refused if anyone else can read it. Nothing here ever
prints or logs the private key: errors name the file, never its content.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from nacl.encoding import HexEncoder
from nacl.exceptions import CryptoError
from nacl.signing import SigningKey, VerifyKey

from metnos.settings.workspace import Workspace

PRIVATE_KEY_FILE = "instance.key"
PUBLIC_KEY_FILE = "instance.pub"


class KeyFileError(Exception):
    """A key that is missing, unreadable, malformed or too exposed."""


def private_key_path(workspace: Workspace) -> Path:
    return workspace.keys_dir / PRIVATE_KEY_FILE


def public_key_path(workspace: Workspace) -> Path:
    return workspace.keys_dir / PUBLIC_KEY_FILE


def _ensure_keys_dir(keys_dir: Path) -> None:
    keys_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(keys_dir, 0o700)


def generate_keypair(workspace: Workspace) -> SigningKey:
    """Create the instance key pair; refuse to replace an existing one.

    Replacing the key would silently invalidate every signed executor, so that
    is a deliberate act (delete the files), never a side effect of init.
    """
    _ensure_keys_dir(workspace.keys_dir)
    key = SigningKey.generate()
    priv = private_key_path(workspace)
    # O_EXCL + mode at creation: the key is never, even briefly, world-readable.
    try:
        fd = os.open(priv, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise KeyFileError(f"{priv}: a private key already exists; refusing to overwrite it") from None
    with os.fdopen(fd, "wb") as fh:
        fh.write(key.encode(encoder=HexEncoder) + b"\n")
    os.chmod(priv, 0o600)
    pub = public_key_path(workspace)
    pub.write_bytes(key.verify_key.encode(encoder=HexEncoder) + b"\n")
    os.chmod(pub, 0o644)
    return key


def ensure_keypair(workspace: Workspace) -> SigningKey:
    """Load the instance key, generating it on first use (``metnos init``)."""
    if private_key_path(workspace).exists():
        return load_signing_key(workspace)
    return generate_keypair(workspace)


def load_signing_key(workspace: Workspace) -> SigningKey:
    priv = private_key_path(workspace)
    try:
        st = priv.stat()
    except FileNotFoundError:
        raise KeyFileError(f"{priv}: no private key; run `metnos init`") from None
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise KeyFileError(
            f"{priv}: permissions {stat.S_IMODE(st.st_mode):04o} are too open; the key must be 0600"
        )
    try:
        return SigningKey(priv.read_bytes().strip(), encoder=HexEncoder)
    except (ValueError, TypeError, CryptoError):
        raise KeyFileError(f"{priv}: not a hex-encoded Ed25519 private key") from None


def load_verify_key(workspace: Workspace) -> VerifyKey:
    pub = public_key_path(workspace)
    try:
        data = pub.read_bytes().strip()
    except FileNotFoundError:
        raise KeyFileError(f"{pub}: no public key; run `metnos init`") from None
    try:
        return VerifyKey(data, encoder=HexEncoder)
    except (ValueError, TypeError, CryptoError):
        raise KeyFileError(f"{pub}: not a hex-encoded Ed25519 public key") from None


def key_fingerprint(key: VerifyKey) -> str:
    """A short, printable name for a public key (never for a private one)."""
    return key.encode(encoder=HexEncoder).decode()[:16]
