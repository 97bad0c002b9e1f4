"""A save's fast path (``FastMapper.stored_rows``, then ``encode_batch``) stores exactly the bytes
the path before it stored: the transcoder's ``encode`` (its walk tagging every value JSON has no
type for), the timestamp spliced in as ``__ts__``, the compressor's mark or zstd; then the index
key ``event_key`` and the record ``encode_event`` make (a commit of several holds these records in
one value and keys a run's index entry by its last version: tests/contract/test_record_batches.py).

The fast path asks ``is_plain`` instead of building the walk's copy, and lays the records out
from rows with a version's bytes made once; a state that needs a tag, an integer orjson cannot
write, a class that upcasts or a version past the made ones goes the way it went before.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

import orjson
import pytest
from eventsourcing.persistence import TranscodingNotRegisteredError
from eventsourcing.utils import get_topic
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from metnos.mechanisms.store.mapper import FastMapper, _with_stamp, stored_event
from metnos.mechanisms.store.records import LaidOut, encode_batch, encode_event, event_key
from metnos.mechanisms.store.transcoder import is_plain
from tests.contract.test_domain_event_scan import CLASSES, made_by_the_constructor, recorded_log
from tests.contract.test_record_feed import AT, Ledger, fast

OWN = ("originator_id", "originator_version", "timestamp")


def bytes_before(mapper: FastMapper, event: Any) -> bytes:
    """The state as every log was written until the one-``dumps`` encoding: encode, splice the stamp, compress."""
    state = {k: v for k, v in event.__dict__.items() if k not in OWN}
    class_version = getattr(type(event), "class_version", 1)
    if class_version > 1:
        state["class_version"] = class_version
    return mapper.compressor.compress(_with_stamp(mapper.transcoder.encode(state), orjson.dumps(event.timestamp)))


def stored_both_ways(mapper: FastMapper, events: list[Any]) -> None:
    rows = mapper.stored_rows(events)
    general = [FastMapper.to_stored_event(mapper, e) for e in events]
    for event, (originator_id, version, topic, state), old in zip(events, rows, general, strict=True):
        assert state == bytes_before(mapper, event) == old.state, get_topic(type(event))
        assert (originator_id, version, topic) == (event.originator_id, event.originator_version, get_topic(type(event)))
        assert mapper.to_stored_event(event).__dict__ == old.__dict__
    ids = list(range(7, 7 + len(rows)))
    assert encode_batch(rows, ids) == laid_out_before(general, ids)


def laid_out_before(stored: list[Any], ids: list[int]) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    keys = [nid.to_bytes(8, "big") for nid in ids]
    return [(event_key(s.originator_id, s.originator_version), k) for s, k in zip(stored, keys)], [(k, encode_event(s)) for s, k in zip(stored, keys)]


def test_every_domain_event_class_is_stored_as_before() -> None:
    mapper = fast()
    made = [made_by_the_constructor(cls, n, UUID(int=1)) for n, cls in enumerate(CLASSES, 1)]
    assert len(made) > 50
    stored_both_ways(mapper, made)


class Colour(enum.Enum):
    RED = 1


class Size(enum.IntEnum):
    SMALL = 1


class Tone(str, enum.Enum):
    LOW = "low"


class Label(str):
    pass


class Point(BaseModel):
    x: int


class Unknown:
    pass


# Each needs a tag somewhere (the fast path must see it and go the walk's way), or cannot be written at all.
TAGGED_STATES = [
    UUID(int=5),
    (1, "two"),
    {"deep": [1, {"deeper": [UUID(int=6)]}]},
    [[(1,)]],
    {"when": datetime(2026, 1, 2, tzinfo=timezone.utc)},
    Decimal("1.10"),
    Size.SMALL,
    Tone.LOW,
    Label("x"),
    [Label("in a list")],
    OrderedDict(a=1),
    {"model": Point(x=1)},
    2**70,
    {"big": [-(2**64)]},
    True,  # plain: a bool is JSON's own
]
PLAIN_STATES = [
    None,
    "",
    "unicode: ünïcødé ✓ 日本語 \u2028 \x00 \"quoted\" \\",
    {"floats": [0.1, -0.0, 1e300, 5e-324, 2.5]},
    {"nested": {"a": [1, [2, [3, {"b": None}]]]}},
    {"big but not too big": [2**63 - 1, -(2**63)]},
    {"big": "x" * 2000},  # over the compressor's threshold: compressed
    [],
    {},
    float("inf"),  # JSON has none: orjson writes null on either path
]


@pytest.mark.parametrize("extra", TAGGED_STATES + PLAIN_STATES, ids=lambda extra: repr(extra)[:40])
def test_a_state_is_stored_as_before(extra: Any) -> None:
    mapper = fast()
    event = Ledger.Noted(originator_id=UUID(int=3), originator_version=2, timestamp=AT, text="t", extra=extra)
    stored_both_ways(mapper, [event])


@pytest.mark.parametrize("extra", [{"x": [Unknown()]}, Colour.RED, [{"set": {1}}]], ids=["unknown", "enum", "set"])
def test_a_value_the_transcoder_cannot_write_fails_as_before(extra: Any) -> None:
    mapper = fast()
    event = Ledger.Noted(originator_id=UUID(int=3), originator_version=2, timestamp=AT, text="t", extra=extra)
    with pytest.raises(TranscodingNotRegisteredError):
        mapper.stored_rows([event])
    with pytest.raises(TranscodingNotRegisteredError):
        FastMapper.to_stored_event(mapper, event)


def test_a_timestamp_that_is_not_a_datetime_and_a_class_that_upcasts_are_stored_as_before() -> None:
    mapper = fast()
    odd = Ledger.Noted(originator_id=UUID(int=3), originator_version=2, timestamp="2026-01-02", text="a text stamp", extra=None)
    upcast = Ledger.Renamed(originator_id=UUID(int=3), originator_version=3, timestamp=AT, name="n", reason="r")
    rows = mapper.stored_rows([odd, upcast])
    assert [row[3] for row in rows] == [FastMapper.to_stored_event(mapper, e).state for e in (odd, upcast)]
    assert rows[1][3] == bytes_before(mapper, upcast)


def made_with(cls: type, **fields: Any) -> Any:
    """An event with any originator id, as one read from a log may have (the constructor wants a UUID)."""
    event = object.__new__(cls)
    object.__setattr__(event, "__dict__", fields)
    return event


def test_records_are_laid_out_as_before_past_the_versions_made_once_and_for_a_text_id() -> None:
    mapper = fast()
    events = [made_with(Ledger.Noted, originator_id=oid, originator_version=v, timestamp=AT, text="t", extra=v)
              for oid in (UUID(int=8), "a text id")
              for v in (0, 1, 2, 1023, 1024, 1025, 2**40, 2**63 - 1)]
    events.append(made_with(Ledger.Ignored, originator_id="a text id", originator_version=9, timestamp=AT, n=1))
    stored_both_ways(mapper, events)


def test_an_event_dict_out_of_its_class_s_order_keeps_its_order() -> None:
    """An event made from the log (its dict in stored order, the own fields last) is stored as it was read."""
    mapper = fast()
    made = Ledger.Noted(originator_id=UUID(int=3), originator_version=2, timestamp=AT, text="t", extra={"k": 1})
    read = mapper.to_domain_event(mapper.to_stored_event(made))
    assert list(read.__dict__) != list(made.__dict__)
    reversed_fields = made_with(Ledger.Noted, **dict(reversed(list(made.__dict__.items()))))
    stored_both_ways(mapper, [made, read, reversed_fields])


def test_the_recorded_layered_log_is_stored_again_byte_for_byte(tmp_path: Path) -> None:
    """Every event of a log an older Metnos recorded (tests/fixtures/layered_log), read and stored
    again, gives the bytes it was stored with (but for those stored by the stock mapper or at an
    older class version, which it gives as the general path does)."""
    log = recorded_log(tmp_path)
    try:
        notifications = list(log.notifications())
        events = [log.mapper.to_domain_event(n) for n in notifications]
        rows = log.mapper.stored_rows(events)
        general = [FastMapper.to_stored_event(log.mapper, e) for e in events]
    finally:
        log.close()
    assert len(events) > 100
    same = 0
    for n, row, old in zip(notifications, rows, general, strict=True):
        assert row[3] == old.state, n.id
        same += row[3] == n.state
    assert same > 0.9 * len(events)


# Values of every kind is_plain must tell apart, nested.
leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.text(max_size=6),
    st.uuids(), st.sampled_from([Size.SMALL, Tone.LOW, Label("l"), Decimal("1.5"), AT]),
)
trees = st.recursive(
    leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(trees)
def test_is_plain_is_whether_the_walk_gives_back_what_it_was_given(tree: Any) -> None:
    assert is_plain(tree) == (fast().transcoder.wrap(tree) is tree)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=6), trees, max_size=4), st.datetimes(timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=-5))])))
def test_any_state_is_stored_as_before(extra: dict[str, Any], at: datetime) -> None:
    event = Ledger.Noted(originator_id=UUID(int=3), originator_version=2, timestamp=at, text="t", extra=extra)
    stored_both_ways(fast(), [event])


def test_saves_laid_out_one_by_one_and_summed_write_what_one_batch_writes() -> None:
    """A unit of work lays out each save as it comes (``LaidOut.of``) and sums them: the same keys
    and records as the whole batch laid out at once, under the ids the write gives."""
    mapper = fast()
    made = [made_by_the_constructor(cls, n, UUID(int=n % 3)) for n, cls in enumerate(CLASSES, 1)]
    rows = mapper.stored_rows(made)
    summed = LaidOut.of(rows[:1])
    for start in range(1, len(rows), 7):
        summed += LaidOut.of(rows[start:start + 7])
    ids = list(range(40, 40 + len(rows)))
    assert len(summed) == len(rows) and list(summed) == rows
    assert summed.items(ids) == encode_batch(rows, ids) == laid_out_before([stored_event(*r) for r in rows], ids)
    with pytest.raises(ValueError, match="rows laid out"):
        summed.items(ids[1:])
