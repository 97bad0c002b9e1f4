"""``[conversation]``: when a follow-up continues the conversation, and how much of it the model sees (docs/turns.md, "Conversations").

```toml
[conversation]
idle_minutes = 30   # a turn after this long a pause starts a new conversation
turns = 3           # the earlier turns a follow-up is shown
```
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from metnos.settings.declare import setting


class ConversationSettings(BaseModel):
    # Strict: `idle_minutes = true` or `"30"` is an error that names the key, never 1 or 30.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    idle_minutes: int = setting(30, "After this many minutes without a turn, the next one starts a new conversation "
                                    "(a Telegram chat, the dashboard, `ask --continue`) (1-10080).", ge=1, le=10080)
    turns: int = setting(3, "How many earlier turns of the conversation a follow-up is shown: their requests, answers "
                            "and, cut short, what their steps returned (1-20).", ge=1, le=20)
