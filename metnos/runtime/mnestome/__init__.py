"""The mnestome at work: learning from turns, aging, composing, boosting the pre-filter.

Each piece is a function of recorded facts (turn events, the mnestome view, a
date) that returns aggregates with pending events; the caller commits them.
"""

from metnos.runtime.mnestome.ager import age
from metnos.runtime.mnestome.boost import apply_boost, boost
from metnos.runtime.mnestome.compose import compose, suggest
from metnos.runtime.mnestome.errors import MnestomeError
from metnos.runtime.mnestome.record import record_turn
from metnos.runtime.mnestome.tags import tags_from_context

__all__ = ["MnestomeError", "age", "apply_boost", "boost", "compose", "record_turn", "suggest", "tags_from_context"]
