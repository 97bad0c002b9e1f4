"""The pieces every fold shares: dispatch by event class, ids as keys, timestamps as text."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any
from uuid import UUID

from hypothesis import given
from hypothesis import strategies as st

from projections.base import Fold, iso, key_of

ZONES = st.sampled_from([None, timezone.utc, *(timezone(timedelta(minutes=m)) for m in range(-14 * 60, 14 * 60 + 1, 15))])


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 30), timezones=ZONES))
def test_iso_writes_what_isoformat_writes(moment: datetime) -> None:
    assert iso(moment) == moment.isoformat()
    assert datetime.fromisoformat(iso(moment)) == moment


class Started:
    pass


class Ended:
    pass


class Ignored:
    pass


class Counting(Fold):
    name = "counting"

    def initial(self) -> dict[str, Any]:
        return {"started": 0, "ended": 0}

    def handlers(self) -> dict[type, Any]:
        return {Started: self._started, Ended: self._ended}

    @staticmethod
    def _started(state: dict[str, Any], event: Any, position: int) -> None:
        state["started"] += 1

    @staticmethod
    def _ended(state: dict[str, Any], event: Any, position: int) -> str:
        state["ended"] = position
        return "closed"


def test_a_fold_dispatches_by_class_and_skips_what_it_does_not_read() -> None:
    fold = Counting()
    state = fold.initial()
    assert fold.apply(state, Started(), 1) is None
    assert fold.apply(state, Ignored(), 2) is None
    assert fold.apply(state, Ended(), 3) == "closed"
    assert state == {"started": 1, "ended": 3}
    assert fold.events == (Started, Ended)
    assert fold.topics == ("tests.unit.test_projections_base:Started", "tests.unit.test_projections_base:Ended")


def test_key_of_gives_the_key_of_the_id_it_is_given_even_when_ids_alternate() -> None:
    a, b = UUID(int=1), UUID(int=2)
    assert [key_of(x) for x in (a, a, b, a, "name", b)] == [str(a), str(a), str(b), str(a), "name", str(b)]
    # An equal id in another object is still the same key.
    assert key_of(UUID(int=1)) == str(a)
