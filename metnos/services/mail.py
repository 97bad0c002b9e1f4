"""The mail accounts' passwords: stored in the vault, never in config.toml, an event or a log."""

from __future__ import annotations

from domain.errors import MetnosError
from metnos.runtime.skills.vault import MAIL, Vault
from metnos.settings.loader import in_force


class UnknownMailAccount(MetnosError):
    """The account is not in config.toml's [mail.accounts]."""


def store_password(account: str, password: str) -> str:
    """Keep ``account``'s password in the vault under the name [mail.accounts.ACCOUNT] secret gives;
    returns that name."""
    loaded = in_force()
    names = loaded.settings.mail.secret_names()
    if account not in names:
        known = ", ".join(sorted(names)) or "none yet"
        msg = f"no [mail.accounts.{account}] in {loaded.config_file} (accounts: {known}); add it first"
        raise UnknownMailAccount(msg)
    if not password:
        msg = "an empty password was not stored"
        raise UnknownMailAccount(msg)
    Vault(loaded.workspace).put(MAIL, names[account], password)
    return names[account]
