"""The calendars' and address books' passwords: stored in the vault, never in config.toml, an event or a log."""

from __future__ import annotations

from domain.errors import MetnosError
from metnos.runtime.skills.vault import Vault
from metnos.settings.calendar import VAULT_DRAWER, secret_names
from metnos.settings.loader import in_force


class UnknownDavSource(MetnosError):
    """The source is not a server source of config.toml's [calendar.sources] or [contacts.sources]."""


def store_password(source: str, password: str) -> str:
    """Keep the password of ``source`` (NAME, or "calendar.NAME" / "contacts.NAME") in the vault under
    the name its table's ``secret`` gives; returns that name."""
    loaded = in_force()
    names = secret_names(loaded.settings.calendar, loaded.settings.contacts)
    keys = [source] if source in names else [k for k in (f"calendar.{source}", f"contacts.{source}") if k in names]
    if not keys:
        known = ", ".join(sorted(names)) or "none yet"
        msg = (f"no server source named {source!r} in [calendar.sources] or [contacts.sources] of "
               f"{loaded.config_file} (known: {known}); add it first")
        raise UnknownDavSource(msg)
    if not password:
        raise UnknownDavSource("an empty password was not stored")
    vault = Vault(loaded.workspace)
    for key in keys:
        vault.put(VAULT_DRAWER, names[key], password)
    return names[keys[0]]
