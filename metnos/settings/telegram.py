"""``[telegram]`` in config.toml: the bot, who may talk to it, and send_messages' recipients.

```toml
[telegram]
token_env = "METNOS_TELEGRAM_TOKEN"   # the environment variable that holds the bot token
allowed_chats = [123456789]           # every other chat is ignored (and audited)
approval_timeout_s = 120              # an approval not answered by then is a no
# base_url = "https://api.telegram.org"

[telegram.chat_ids]                   # send_messages: recipient name -> chat id
me = 123456789
```

The token itself is never in config.toml (a ``token`` key is refused), nor in
an event, a log line or an error: only the variable's name travels. Every
error names the key at fault.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from domain.errors import MetnosError

DEFAULT_TOKEN_ENV = "METNOS_TELEGRAM_TOKEN"
DEFAULT_BASE_URL = "https://api.telegram.org"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KNOWN = {"token_env", "allowed_chats", "chat_ids", "base_url", "approval_timeout_s", "poll_timeout_s", "timeout_s"}


class TelegramConfigError(MetnosError):
    """``[telegram]`` in config.toml is not what it must be."""


@dataclass(frozen=True)
class TelegramSettings:
    token_env: str = DEFAULT_TOKEN_ENV
    allowed_chats: frozenset[int] = frozenset()
    chat_ids: Mapping[str, int | str] = field(default_factory=dict)
    base_url: str = DEFAULT_BASE_URL
    approval_timeout_s: float = 120.0
    poll_timeout_s: float = 30.0
    timeout_s: float = 5.0

    def token(self, env: Mapping[str, str] | None = None) -> str:
        """The bot token from its variable; the error names the variable, never a value."""
        value = (os.environ if env is None else env).get(self.token_env, "").strip()
        if not value:
            msg = f"no Telegram bot token: set the environment variable {self.token_env} ([telegram] token_env in config.toml names it)"
            raise TelegramConfigError(msg)
        return value

    def executor_config(self) -> dict[str, Any]:
        """What send_messages reads from ctx.config (metnos/mechanisms/executors/context.py): no secret."""
        return {"telegram": {"token_env": self.token_env, "chat_ids": dict(self.chat_ids), "base_url": self.base_url,
                             "timeout_s": self.timeout_s}}


def _read(config_file: Path | None) -> dict[str, Any]:
    if config_file is None or not config_file.exists():
        return {}
    try:
        return tomllib.loads(config_file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise TelegramConfigError(f"{config_file}: not valid TOML: {e}") from None


def _number(section: Mapping[str, Any], key: str, default: float, where: str) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise TelegramConfigError(f"{where}: [telegram] {key} must be a positive number of seconds, not {value!r}")
    return float(value)


def _chat_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and bool(re.fullmatch(r"-?\d+|@[A-Za-z0-9_]{5,}", value)))


def load_telegram_settings(config_file: Path | None) -> TelegramSettings:
    where = str(config_file)
    section = _read(config_file).get("telegram", {})
    if not isinstance(section, dict):
        raise TelegramConfigError(f"{where}: [telegram] must be a table")
    if "token" in section:
        raise TelegramConfigError(f"{where}: [telegram] token: the bot token never goes in config.toml; "
                                  f"put it in an environment variable and name that variable in [telegram] token_env")
    unknown = sorted(set(section) - _KNOWN)
    if unknown:
        raise TelegramConfigError(f"{where}: [telegram] {unknown[0]}: unknown key (known: {', '.join(sorted(_KNOWN))})")
    token_env = section.get("token_env", DEFAULT_TOKEN_ENV)
    if not isinstance(token_env, str) or not _ENV_NAME.match(token_env):
        raise TelegramConfigError(f"{where}: [telegram] token_env must be the name of an environment variable, like {DEFAULT_TOKEN_ENV}")
    allowed = section.get("allowed_chats", [])
    if not isinstance(allowed, list) or not all(isinstance(c, int) and not isinstance(c, bool) for c in allowed):
        raise TelegramConfigError(f"{where}: [telegram] allowed_chats must be a list of chat ids (integers)")
    chat_ids = section.get("chat_ids", {})
    if not isinstance(chat_ids, dict):
        raise TelegramConfigError(f"{where}: [telegram] chat_ids must be a table of recipient = chat id")
    for name, value in chat_ids.items():
        if not _chat_id(value):
            raise TelegramConfigError(f"{where}: [telegram.chat_ids] {name}: {value!r} is not a chat id (an integer, or @channelname)")
    base_url = section.get("base_url", DEFAULT_BASE_URL)
    if not isinstance(base_url, str) or not re.match(r"^https?://[^/\s]+", base_url):
        raise TelegramConfigError(f"{where}: [telegram] base_url must be an http(s) URL, like {DEFAULT_BASE_URL}")
    return TelegramSettings(
        token_env=token_env, allowed_chats=frozenset(allowed), chat_ids=dict(chat_ids), base_url=base_url.rstrip("/"),
        approval_timeout_s=_number(section, "approval_timeout_s", 120.0, where),
        poll_timeout_s=_number(section, "poll_timeout_s", 30.0, where),
        timeout_s=_number(section, "timeout_s", 5.0, where),
    )


def executor_config(config_file: Path | None) -> dict[str, Any]:
    """The executors' ctx.config from config.toml: today, send_messages' Telegram settings."""
    return load_telegram_settings(config_file).executor_config()
