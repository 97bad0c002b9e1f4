"""The mnestome at work: learning from turns, aging, composing, boosting the pre-filter.

Each piece is a function of recorded facts (turn events, the mnestome view, a
date) that returns aggregates with pending events; the caller commits them.
"""

from metnos.mnestome.ager import age
from metnos.mnestome.boost import apply_boost, boost
from metnos.mnestome.compose import compose, suggest
from metnos.mnestome.errors import MnestomeError
from metnos.mnestome.record import record_turn
from metnos.mnestome.tags import tags_from_context

__all__ = ["MnestomeError", "age", "apply_boost", "boost", "compose", "record_turn", "suggest", "tags_from_context"]
