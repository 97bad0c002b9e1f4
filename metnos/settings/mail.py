"""``[mail]`` in config.toml: the accounts read_messages reads and send_messages sends from.

```toml
[mail]
default_account = "home"          # the account a request that names none uses

[mail.accounts.home]
imap_host = "imap.example.org"    # read_messages (IMAP)
imap_port = 993
smtp_host = "smtp.example.org"    # send_messages' "mail" channel (SMTP)
smtp_port = 587
tls = "implicit"                  # IMAP: implicit TLS (993) or "starttls" (143)
smtp_tls = "starttls"             # SMTP: "starttls" (587) or "implicit" (465)
username = "carla@example.org"
from_address = "Carla <carla@example.org>"
secret = "home-mail"              # the NAME of the password in the vault: `metnos mail password home`

[mail.recipients]                 # send_messages: a name people say -> an address
bruno = "bruno@example.org"
```

The password is never in config.toml (a ``password`` key is refused), nor in
an event, a log line or an error: the vault holds it (``<config>/vault``,
mode 0600), and only the call that needs it gets it, in its sandbox's
environment. Each host must also be on ``[network] allow`` as ``host:port``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from metnos.settings.declare import setting

# What the mail executors' sandbox receives the passwords in (their manifests list it under env).
SECRETS_ENV = "METNOS_MAIL_SECRETS"
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_ADDRESS = re.compile(r"^[^@\s<>]+@[^@\s<>]+$")


class MailAccount(BaseModel):
    """``[mail.accounts.NAME]``: one mailbox and how to reach it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    username: str = setting("", "The login on both servers.")
    imap_host: str = setting("", "The IMAP server read_messages reads (add `host:port` to `[network] allow`).")
    imap_port: int = setting(0, "Its port; 0 means 993 for implicit TLS, 143 for STARTTLS.")
    tls: Literal["implicit", "starttls"] = setting("implicit", "IMAP's TLS: implicit, or starttls. Never in clear.")
    smtp_host: str = setting("", "The SMTP server send_messages sends through (its `mail` channel).")
    smtp_port: int = setting(0, "Its port; 0 means 465 for implicit TLS, 587 for STARTTLS.")
    smtp_tls: Literal["implicit", "starttls"] = setting("starttls", "SMTP's TLS: starttls, or implicit.")
    from_address: str = setting("", "The From of what is sent; the username when empty.")
    secret: str = setting("", "The name of the password in the vault (`metnos mail password ACCOUNT` stores it); "
                              "the account's name when empty.")
    ca_file: str = setting("", "A PEM file of the CA that signed a private server's certificate; empty: the system's.")
    timeout_s: float = setting(15.0, "How long a connection may take (seconds).")

    @model_validator(mode="before")
    @classmethod
    def _checked(cls, table: Any) -> Any:
        if isinstance(table, Mapping) and "password" in table:
            raise ValueError("password: a password never goes in config.toml; store it in the vault with "
                             "`metnos mail password ACCOUNT` and name it in secret")
        return table

    @model_validator(mode="after")
    def _ca_readable(self) -> MailAccount:
        if self.ca_file and not Path(self.ca_file).expanduser().is_file():
            raise ValueError(f"ca_file: {self.ca_file} is not a file (a PEM certificate)")
        return self


class MailConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    default_account: str = setting("", "The account a request that names none uses (the only one, when there is one).")
    accounts: dict[str, MailAccount] = setting(description="`[mail.accounts.NAME]`: the mailboxes (below).",
                                               default_factory=dict)
    recipients: dict[str, str] = setting(description="`[mail.recipients]`: send_messages' names for addresses, "
                                                     "name = address.", default_factory=dict)

    @model_validator(mode="after")
    def _coherent(self) -> MailConfig:
        for name, account in self.accounts.items():
            if not _NAME.match(name):
                raise ValueError(f"[mail.accounts.{name}]: an account's name is letters, digits, '.', '_' or '-'")
            if not account.username:
                raise ValueError(f"[mail.accounts.{name}] username: required")
            if not (account.imap_host or account.smtp_host):
                raise ValueError(f"[mail.accounts.{name}]: give imap_host (to read), smtp_host (to send), or both")
        for name, address in self.recipients.items():
            if not _ADDRESS.match(address):
                raise ValueError(f"[mail.recipients] {name}: {address!r} is not an e-mail address")
        if self.default_account and self.default_account not in self.accounts:
            raise ValueError(f"default_account: no [mail.accounts.{self.default_account}]")
        return self

    def secret_names(self) -> dict[str, str]:
        """account -> the name its password has in the vault."""
        return {name: account.secret or name for name, account in self.accounts.items()}

    def executor_config(self) -> dict[str, Any]:
        """What the mail executors read from ctx.config: hosts, ports, names, a private CA's PEM; no secret."""
        accounts = {}
        for name, a in self.accounts.items():
            entry: dict[str, Any] = {"username": a.username, "tls": a.tls, "smtp_tls": a.smtp_tls,
                                     "from_address": a.from_address or a.username, "timeout_s": a.timeout_s}
            if a.imap_host:
                entry.update(host=a.imap_host, port=a.imap_port or (993 if a.tls == "implicit" else 143))
            if a.smtp_host:
                entry.update(smtp_host=a.smtp_host, smtp_port=a.smtp_port or (465 if a.smtp_tls == "implicit" else 587))
            if a.ca_file:
                # A certificate is public; it travels as text so the sandbox needs no grant to read it.
                entry["ca_pem"] = Path(a.ca_file).expanduser().read_text()
            accounts[name] = entry
        return {"mail": {"accounts": accounts, "default_account": self.default_account,
                         "recipients": dict(self.recipients)}}
