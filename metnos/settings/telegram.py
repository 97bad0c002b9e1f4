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
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from metnos.settings.declare import setting
from metnos.settings.errors import TelegramConfigError

DEFAULT_TOKEN_ENV = "METNOS_TELEGRAM_TOKEN"
DEFAULT_BASE_URL = "https://api.telegram.org"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_TOKEN_ENV", "TelegramConfigError", "TelegramSettings"]


def _chat_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and bool(re.fullmatch(r"-?\d+|@[A-Za-z0-9_]{5,}", value)))


def _seconds(section: Mapping[str, Any], key: str) -> None:
    if key in section:
        value = section[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"[telegram] {key} must be a positive number of seconds, not {value!r}")


class TelegramSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    token_env: str = setting(DEFAULT_TOKEN_ENV, "The NAME of the environment variable that holds the bot token "
                                                "(the token itself never goes in config.toml).")
    allowed_chats: frozenset[int] = setting(frozenset(), "The chats the bot answers; every other chat is ignored (and audited).")
    chat_ids: dict[str, int | str] = setting(description="`[telegram.chat_ids]`: send_messages' recipients, name = chat id "
                                                         "(an integer, or @channelname).", default_factory=dict)
    base_url: str = setting(DEFAULT_BASE_URL, "The Bot API's base URL.")
    approval_timeout_s: float = setting(120.0, "An approval not answered by then is a no (seconds).")
    poll_timeout_s: float = setting(30.0, "How long one long poll waits for an update (seconds).")
    timeout_s: float = setting(5.0, "How long send_messages, and each send of the Telegram channel, waits for the Bot API (seconds); a send that takes longer is retried later.")

    @model_validator(mode="before")
    @classmethod
    def _checked(cls, section: Any) -> Any:
        # The words [telegram] has always been refused in, each naming its key.
        if not isinstance(section, Mapping):
            return section
        if "token" in section:
            raise ValueError("[telegram] token: the bot token never goes in config.toml; "
                             "put it in an environment variable and name that variable in [telegram] token_env")
        unknown = sorted(set(section) - set(cls.model_fields))
        if unknown:
            raise ValueError(f"[telegram] {unknown[0]}: unknown key (known: {', '.join(sorted(cls.model_fields))})")
        token_env = section.get("token_env", DEFAULT_TOKEN_ENV)
        if not isinstance(token_env, str) or not _ENV_NAME.match(token_env):
            raise ValueError(f"[telegram] token_env must be the name of an environment variable, like {DEFAULT_TOKEN_ENV}")
        allowed = section.get("allowed_chats", [])
        if not isinstance(allowed, (list, tuple, set, frozenset)) or not all(isinstance(c, int) and not isinstance(c, bool) for c in allowed):
            raise ValueError("[telegram] allowed_chats must be a list of chat ids (integers)")
        chat_ids = section.get("chat_ids", {})
        if not isinstance(chat_ids, Mapping):
            raise ValueError("[telegram] chat_ids must be a table of recipient = chat id")  # noqa: TRY004 - pydantic reports a ValueError, not a TypeError
        for name, value in chat_ids.items():
            if not _chat_id(value):
                raise ValueError(f"[telegram.chat_ids] {name}: {value!r} is not a chat id (an integer, or @channelname)")
        base_url = section.get("base_url", DEFAULT_BASE_URL)
        if not isinstance(base_url, str) or not re.match(r"^https?://[^/\s]+", base_url):
            raise ValueError(f"[telegram] base_url must be an http(s) URL, like {DEFAULT_BASE_URL}")
        for key in ("approval_timeout_s", "poll_timeout_s", "timeout_s"):
            _seconds(section, key)
        return {**section, "base_url": base_url.rstrip("/")}

    def token(self, env: Mapping[str, str] | None = None) -> str:
        """The bot token from its variable; the error names the variable, never a value. The token is a
        secret handed to the channel, not a setting: it is read where it is used, from ``env``."""
        value = (os.environ if env is None else env).get(self.token_env, "").strip()
        if not value:
            msg = f"no Telegram bot token: set the environment variable {self.token_env} ([telegram] token_env in config.toml names it)"
            raise TelegramConfigError(msg)
        return value

    def executor_config(self) -> dict[str, Any]:
        """What send_messages reads from ctx.config (metnos/mechanisms/executors/context.py): no secret."""
        return {"telegram": {"token_env": self.token_env, "chat_ids": dict(self.chat_ids), "base_url": self.base_url,
                             "timeout_s": self.timeout_s}}
