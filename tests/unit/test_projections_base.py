"""The pieces every fold shares: dispatch by event class, records, timestamps as text."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any
from uuid import UUID

from hypothesis import given
from hypothesis import strategies as st

from metnos.mechanisms.store.event_record import iso
from projections.base import Fold

ZONES = st.sampled_from([None, timezone.utc, *(timezone(timedelta(minutes=m)) for m in range(-14 * 60, 14 * 60 + 1, 15))])


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 30), timezones=ZONES))
def test_iso_writes_what_isoformat_writes(moment: datetime) -> None:
    assert iso(moment) == moment.isoformat()
    assert datetime.fromisoformat(iso(moment)) == moment


AT = datetime(2026, 11, 22, 8, 0, tzinfo=timezone.utc)


class Event:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(originator_id=UUID(int=7), originator_version=1, timestamp=AT, **fields)


class Started(Event):
    pass


class Ended(Event):
    pass


class Ignored(Event):
    pass


class Counting(Fold):
    name = "counting"

    def initial(self) -> dict[str, Any]:
        return {"started": 0, "ended": 0}

    def handlers(self) -> dict[type, Any]:
        return {Started: self._started, Ended: self._ended}

    @staticmethod
    def _started(state: dict[str, Any], record: dict[str, Any], position: int) -> None:
        state["started"] += 1
        state["seen"] = record

    @staticmethod
    def _ended(state: dict[str, Any], record: dict[str, Any], position: int) -> str:
        state["ended"] = position
        return "closed"


def test_a_fold_dispatches_by_class_and_skips_what_it_does_not_read() -> None:
    fold = Counting()
    state = fold.initial()
    assert fold.apply(state, Started(text="hi"), 1) is None
    assert fold.apply(state, Ignored(), 2) is None
    assert fold.apply(state, Ended(), 3) == "closed"
    assert fold.apply_record(state, "tests.unit.test_projections_base:Ended", {}, 4) == "closed"
    assert fold.apply_record(state, "tests.unit.test_projections_base:Ignored", {}, 5) is None
    # An event object reaches its handler as a record: id and moment as text.
    assert state == {"started": 1, "ended": 4, "seen": {
        "originator_id": str(UUID(int=7)), "originator_version": 1, "timestamp": "2026-11-22T08:00:00+00:00", "text": "hi"}}
    assert fold.events == (Started, Ended)
    assert fold.topics == ("tests.unit.test_projections_base:Started", "tests.unit.test_projections_base:Ended")
