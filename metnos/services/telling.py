"""How a turn's outcome, and a failed step, are told to a person, the same facts on every way in (metnos/runtime/turn/telling.py).

Re-exported for the adapters, each of which puts these facts in its own medium.
"""

from metnos.runtime.turn.failures import step_failure_words
from metnos.runtime.turn.telling import UNVERIFIED, notices, outcome_json, reply_text, unverified_lines, why, withheld_told, without_status

__all__ = ["UNVERIFIED", "notices", "outcome_json", "reply_text", "step_failure_words", "unverified_lines", "why", "withheld_told", "without_status"]
