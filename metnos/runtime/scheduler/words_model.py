"""A schedule in words the rules and dateparser could not read, asked of the model (seeds/000 ch. 11).

The model is the last reader, never the judge: what it answers is a cron
expression checked by croniter (domain/due.py) and a flag saying whether the
words name one firing; a reply that is not one is refused, with what the
model said, and nothing is scheduled. The user then sees the cron and its next
firings and confirms them, as for words the rules read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from domain.due import BadSchedule, check_cron, zone
from domain.schedule_words import Cadence, WordsNotUnderstood
from metnos.mechanisms.llm.errors import LLMError
from metnos.mechanisms.llm.messages import SystemMessage, UserMessage
from metnos.mechanisms.llm.reply_json import reply_object

# The tier of the roles beside the proposer that read the user's words (the intent extractor's).
TIER = "middle"
# The role a turn records this call under (a side call of the step that makes the schedule).
ROLE = "schedule_words"
MAX_TOKENS = 120
INSTRUCTIONS = (
    "You turn a schedule said in words into a five-field cron expression (minute hour day-of-month month day-of-week, "
    "day-of-week 0 = Sunday), in the user's time zone. Answer with one JSON object and nothing else: "
    '{"cron": "<five fields>", "once": <true if the words name a single moment, false if they repeat>}. '
    'If the words are not a schedule, answer {"cron": null, "once": false}.'
)

Models = Callable[[str], Any]


def cadence_from_model(models: Models, words: str, *, timezone: str, now: datetime, refused: WordsNotUnderstood) -> Cadence:
    """The cadence the model reads in ``words``; ``refused`` (the rules' own refusal) when it reads none,
    and WordsNotUnderstood naming the model's reply when that reply is not a valid cron."""
    local = now.astimezone(zone(timezone))
    question = json.dumps({"words": words, "timezone": timezone, "now": local.strftime("%Y-%m-%d %H:%M %A")}, ensure_ascii=False)
    try:
        reply = models(TIER).complete([SystemMessage(INSTRUCTIONS), UserMessage(question)], max_tokens=MAX_TOKENS)
    except LLMError as e:
        raise WordsNotUnderstood(f"{refused} (the model could not be asked either: {e})") from None
    answer, why = reply_object(reply.text)
    if answer is None or not isinstance(answer, dict):
        raise WordsNotUnderstood(f"{refused} (the model's reply was not a cron: {why or 'not a JSON object'})")
    cron, once = answer.get("cron"), answer.get("once")
    if cron is None:
        raise refused
    if not isinstance(cron, str) or not isinstance(once, bool):
        raise WordsNotUnderstood(f"{refused} (the model answered {json.dumps(answer)[:200]}, not a cron and a once flag)")
    try:
        checked = check_cron(cron)
    except BadSchedule as e:
        raise WordsNotUnderstood(f"the model read {words!r} as {cron!r}, which is not a valid cron ({e}); nothing was "
                                 "scheduled: give a five-field cron, or say it as e.g. 'every morning at 8'") from None
    return Cadence(checked, 1 if once else None, words)
