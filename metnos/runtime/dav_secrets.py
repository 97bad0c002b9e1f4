"""The calendars' and address books' passwords, from the vault into the one call that needs them.

read_events, set_events, delete_events and read_contacts name ``METNOS_DAV_SECRETS`` under
``capabilities.env``; for those calls alone the Invoker fills it with a JSON map of
``"calendar.NAME"`` / ``"contacts.NAME"`` to the password the vault holds for that source
(metnos.settings.calendar). A source without one is left out: the executor then names the
source and `metnos calendar password NAME` as the fix. No other executor, event or log line
ever sees them.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from metnos.runtime.skills.vault import Vault
from metnos.settings.calendar import SECRETS_ENV, VAULT_DRAWER, secret_names
from metnos.settings.model import Settings
from metnos.settings.workspace import Workspace


def dav_secrets(workspace: Workspace, settings: Callable[[], Settings]) -> Callable[[object], dict[str, str]]:
    """The Invoker's ``seed_secrets`` port for the calendar and contacts seeds."""
    vault = Vault(workspace)

    def secrets(executor: object) -> dict[str, str]:
        if SECRETS_ENV not in executor.profile.env:  # type: ignore[attr-defined]
            return {}
        now = settings()
        held = {source: vault.get(VAULT_DRAWER, name) for source, name in secret_names(now.calendar, now.contacts).items()}
        return {SECRETS_ENV: json.dumps({s: v for s, v in held.items() if v}, sort_keys=True)}

    return secrets

