"""The vault of the credentials imported skills need, and of the mail accounts' passwords, encrypted with pynacl.

``<config>/vault/`` (mode 0700) holds ``vault.key`` (32 random bytes) and
``vault.bin`` (a SecretBox over the JSON of ``{executor: {NAME: value}}``),
both mode 0600. A credential is asked once, at the first call of an
executor that names it, and handed to that call alone through the
environment of its sandbox: it is never an argument, so no event, audit
line or turn record carries it. The config dir is masked in every sandbox.
"""

from __future__ import annotations

import getpass
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from nacl.exceptions import CryptoError
from nacl.secret import SecretBox
from nacl.utils import random

from domain.errors import MetnosError
from metnos.settings.workspace import Workspace

Ask = Callable[[str, str], str | None]


class VaultError(MetnosError):
    """The vault cannot be read or written: names the file."""


class CredentialMissing(MetnosError):
    """An executor needs a credential the vault does not hold and nobody can type it now."""


def ask_secret(executor: str, name: str) -> str | None:
    """Ask on the terminal, without echo; None when there is no terminal."""
    if sys.stdin is None or sys.stdin.closed or not sys.stdin.isatty():
        return None
    value = getpass.getpass(f"{executor} needs {name} (kept encrypted in Metnos's vault; asked once): ")
    return value or None


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Vault:
    def __init__(self, workspace: Workspace) -> None:
        self.dir = workspace.config_dir / "vault"
        self.key_file = self.dir / "vault.key"
        self.data_file = self.dir / "vault.bin"

    def _box(self, create: bool) -> SecretBox | None:
        if not self.key_file.exists():
            if not create:
                return None
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(self.dir, 0o700)
            _write_private(self.key_file, random(SecretBox.KEY_SIZE))
        key = self.key_file.read_bytes()
        if len(key) != SecretBox.KEY_SIZE:
            raise VaultError(f"{self.key_file}: not a vault key ({len(key)} bytes, not {SecretBox.KEY_SIZE})")
        return SecretBox(key)

    def _read(self, box: SecretBox | None) -> dict[str, dict[str, str]]:
        if box is None or not self.data_file.exists():
            return {}
        try:
            return json.loads(box.decrypt(self.data_file.read_bytes()))
        except CryptoError:
            raise VaultError(f"{self.data_file}: cannot be decrypted with {self.key_file}") from None

    def get(self, executor: str, name: str) -> str | None:
        return self._read(self._box(create=False)).get(executor, {}).get(name)

    def put(self, executor: str, name: str, value: str) -> None:
        box = self._box(create=True)
        data = self._read(box)
        data.setdefault(executor, {})[name] = value
        _write_private(self.data_file, box.encrypt(json.dumps(data, sort_keys=True).encode()))

    def names(self) -> dict[str, list[str]]:
        """executor -> the credential names held for it (never the values)."""
        return {e: sorted(v) for e, v in self._read(self._box(create=False)).items()}


def skill_credentials(workspace: Workspace, ask: Ask | None = None) -> Callable[[object], dict[str, str]]:
    """The Invoker's port: the credentials an imported executor names, asked for once."""
    vault = Vault(workspace)

    def credentials(executor: object) -> dict[str, str]:
        out = {}
        name_of = executor.name  # type: ignore[attr-defined]
        for env_name in executor.profile.env:  # type: ignore[attr-defined]
            value = vault.get(name_of, env_name)
            if value is None:
                value = (ask or ask_secret)(name_of, env_name)
                if value is None:
                    msg = (f"{name_of} needs the credential {env_name}, which is not in the vault yet, and there is no "
                           "terminal to ask on; run the call once from a terminal")
                    raise CredentialMissing(msg)
                vault.put(name_of, env_name, value)
            out[env_name] = value
        return out

    return credentials


# The mail accounts' passwords live in the same vault, under this name (never an executor's).
MAIL = "mail"


def account_secrets(workspace: Workspace, drawers: Callable[[], dict[str, tuple[str, dict[str, str]]]]) -> Callable[[object], dict[str, str]]:
    """The Invoker's ``seed_secrets`` port for the seeds that hold accounts (mail, calendars,
    address books): ``drawers()`` maps each environment variable such a seed's manifest names
    (``METNOS_MAIL_SECRETS``, ``METNOS_DAV_SECRETS``) to the vault drawer its passwords live in
    and the map account -> password name, read from config.toml at each call. The variable is
    filled, for that call's environment alone, with a JSON map of account to password for the
    accounts whose password the vault holds; an account without one is left out, and the
    executor then names it and the command that stores it."""
    vault = Vault(workspace)

    def secrets(executor: object) -> dict[str, str]:
        wanted = executor.profile.env  # type: ignore[attr-defined]
        out = {}
        for env_name, (drawer, names) in drawers().items():
            if env_name in wanted:
                held = {account: vault.get(drawer, name) for account, name in names.items()}
                out[env_name] = json.dumps({a: v for a, v in held.items() if v}, sort_keys=True)
        return out

    return secrets
