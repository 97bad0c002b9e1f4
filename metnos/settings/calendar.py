"""``[calendar]`` and ``[contacts]`` in config.toml: the calendars and address books the executors reach.

```toml
[calendar]
default = "home"                       # the source a request that names none uses

[calendar.sources.home]                # a CalDAV calendar
url = "https://dav.example.org/chiara/home/"
username = "chiara"
secret = "home-dav"                    # the NAME of the password in the vault: `metnos calendar password home`

[calendar.sources.holidays]            # a local .ics file
path = "~/calendars/holidays.ics"

[contacts.sources.people]              # a CardDAV address book, or path = "~/contacts.vcf"
url = "https://dav.example.org/chiara/contacts/"
username = "chiara"
secret = "home-dav"
```

A password is never in config.toml (a ``password`` key is refused), nor in an
event, a log line or an error: the vault holds it (``<config>/vault``, mode
0600) and only the call that needs it gets it, in its sandbox's environment
(:data:`SECRETS_ENV`). A server's ``host:port`` must also be on
``[network] allow``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, model_validator

from metnos.settings.declare import setting

# What the calendar and contacts executors' sandbox receives the passwords in (their manifests list it
# under env): a JSON map of "calendar.NAME" / "contacts.NAME" to the password.
SECRETS_ENV = "METNOS_DAV_SECRETS"
# The vault's drawer for them (never an executor's name).
VAULT_DRAWER = "dav"
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class DavSource(BaseModel):
    """``[calendar.sources.NAME]`` or ``[contacts.sources.NAME]``: a server collection, or a local file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = setting("", "The CalDAV calendar's (CardDAV address book's) URL; add its `host:port` to `[network] allow`.")
    path: str = setting("", "Or a local file instead: an .ics calendar (a .vcf address book).")
    username: str = setting("", "The login on the server.")
    secret: str = setting("", "The name of the password in the vault (`metnos calendar password NAME` stores it); "
                              "the source's name when empty.")
    timeout_s: float = setting(15.0, "How long a request to the server may take (seconds).")

    @model_validator(mode="before")
    @classmethod
    def _no_password(cls, table: Any) -> Any:
        if isinstance(table, Mapping) and "password" in table:
            raise ValueError("password: a password never goes in config.toml; store it in the vault with "
                             "`metnos calendar password NAME` and name it in secret")
        return table

    @model_validator(mode="after")
    def _one_place(self) -> DavSource:
        if bool(self.url) == bool(self.path):
            raise ValueError("give either url (a CalDAV or CardDAV server) or path (a local file), not both or neither")
        if self.url and urlsplit(self.url).scheme not in ("http", "https"):
            raise ValueError(f"url: {self.url!r} is not an http(s) URL")
        return self


class DavSources(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    default: str = setting("", "The source a request that names none uses (the only one, when there is one).")
    sources: dict[str, DavSource] = setting(description="`.sources.NAME`: one table a source (below).",
                                            default_factory=dict)

    @model_validator(mode="after")
    def _coherent(self) -> DavSources:
        for name in self.sources:
            if not _NAME.match(name):
                raise ValueError(f"sources.{name}: a source's name is letters, digits, '.', '_' or '-'")
        if self.default and self.default not in self.sources:
            raise ValueError(f"default: no source named {self.default!r}")
        return self

    def executor_config(self) -> dict[str, Any]:
        """What the executors read from ctx.config: where each source is; no secret."""
        sources = {}
        for name, s in self.sources.items():
            entry: dict[str, Any] = {"url": s.url, "username": s.username, "timeout_s": s.timeout_s} if s.url else {"path": s.path}
            sources[name] = entry
        default = self.default or (next(iter(self.sources)) if len(self.sources) == 1 else "")
        return {"sources": sources, "default": default}


def secret_names(calendar: DavSources, contacts: DavSources) -> dict[str, str]:
    """"calendar.NAME" / "contacts.NAME" -> the name its password has in the vault, for the server sources."""
    out = {}
    for kind, section in (("calendar", calendar), ("contacts", contacts)):
        for name, s in section.sources.items():
            if s.url:
                out[f"{kind}.{name}"] = s.secret or name
    return out
