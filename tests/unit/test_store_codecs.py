"""The log's transcoder, compressor and mapper: exact round trips, clear refusals."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal
from uuid import UUID, uuid4

import orjson
import pytest
from eventsourcing.persistence import Mapper, TranscodingNotRegisteredError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from domain.base import Created, DomainEvent, MetnosAggregate
from metnos.mechanisms.store.compressor import ZstdCompressor
from metnos.mechanisms.store.event_record import record_of
from metnos.mechanisms.store.mapper import FastMapper
from metnos.mechanisms.store.transcoder import OrjsonTranscoder


class Inner(BaseModel):
    when: datetime
    ids: list[UUID]


class Outer(BaseModel):
    name: str
    inner: Inner
    pair: tuple[int, str]


T = OrjsonTranscoder()

leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20), st.uuids(),
                 st.datetimes(timezones=st.just(timezone.utc)), st.decimals(allow_nan=False, allow_infinity=False))
values = st.recursive(leaf, lambda children: st.one_of(
    st.lists(children, max_size=4), st.tuples(children, children), st.dictionaries(st.text(max_size=8), children, max_size=4)), max_leaves=20)


@given(values)
def test_every_value_comes_back_exactly_with_its_types(value) -> None:
    back = T.decode(T.encode(value))
    assert back == value
    assert type(back) is type(value)


def test_nested_pydantic_models_come_back_as_models() -> None:
    value = {"model": Outer(name="n", inner=Inner(when=datetime(2026, 11, 22, tzinfo=timezone.utc), ids=[uuid4()]), pair=(1, "a"))}
    back = T.decode(T.encode(value))
    assert back == value and isinstance(back["model"].inner, Inner)
    assert isinstance(back["model"].inner.ids[0], UUID)


def test_plain_json_stays_plain_json_and_tagged_json_is_marked() -> None:
    plain = {"a": 1, "b": {"c": [1, 2, "x"]}}
    assert T.encode(plain) == orjson.dumps(plain)
    tagged = T.encode({"id": UUID(int=1), "amount": Decimal("1.50")})
    assert tagged.startswith(b" {") and orjson.loads(tagged)["amount"] == {"_type_": "decimal_str", "_data_": "1.50"}


def test_unknown_types_and_names_are_clear_errors() -> None:
    with pytest.raises(TranscodingNotRegisteredError, match="not serializable"):
        T.encode({"x": object()})
    with pytest.raises(TranscodingNotRegisteredError, match="'nope' is not deserializable"):
        T.decode(b' {"_type_":"nope","_data_":1}')
    with pytest.raises(ValueError, match="not JSON"):
        T.decode(b"{broken")


def test_the_compressor_keeps_small_states_raw_and_shrinks_large_ones() -> None:
    c = ZstdCompressor()
    small = b'{"a":1}'
    assert c.compress(small) == b"\x00" + small and c.decompress(c.compress(small)) == small
    large = orjson.dumps({"text": "the same words " * 200})
    packed = c.compress(large)
    assert packed[0] == 1 and len(packed) < len(large) / 5 and c.decompress(packed) == large
    with pytest.raises(ValueError, match="compression marker"):
        c.decompress(b"\x07abc")


class Note(MetnosAggregate):
    class Written(Created):
        text: str
        tags: tuple

    class Tagged(DomainEvent):
        ref: UUID

    def __init__(self, text: str, tags: tuple) -> None:
        self.text = text


def test_the_mapper_round_trips_events_through_its_fast_path() -> None:
    mapper = FastMapper(transcoder=OrjsonTranscoder(), compressor=ZstdCompressor())
    when = datetime(2026, 11, 22, 8, 0, 0, 123456, tzinfo=timezone.utc)
    note = Note._create(Note.Written, id=uuid4(), text="x" * 2000, tags=("a", "b"), timestamp=when)
    note.trigger_event(Note.Tagged, ref=UUID(int=7), timestamp=when)
    for event in note.collect_events():
        stored = mapper.to_stored_event(event)
        for _ in range(2):  # the first call fills the caches, the second takes the fast path
            back = mapper.decode(stored.topic, stored.originator_id, stored.originator_version, stored.state)
            assert type(back) is type(event) and vars(back) == vars(event)
            assert back.timestamp == when


class Empty(MetnosAggregate):
    class Made(Created):
        pass

    class Nested(DomainEvent):
        inner: dict


def test_the_timestamp_is_spliced_into_any_state_shape() -> None:
    mapper = FastMapper(transcoder=OrjsonTranscoder(), compressor=ZstdCompressor())
    when = datetime(2026, 11, 22, 8, 0, tzinfo=timezone.utc)
    agg = Empty._create(Empty.Made, id=uuid4(), timestamp=when)
    agg.trigger_event(Empty.Nested, inner={}, timestamp=when)
    agg.trigger_event(Empty.Nested, inner={"id": UUID(int=3), "empty": {}}, timestamp=when)
    for event in agg.collect_events():
        stored = mapper.to_stored_event(event)
        back = mapper.to_domain_event(stored)
        assert vars(back) == vars(event)


class Sample(MetnosAggregate):
    class Made(Created):
        value: object

    class Changed(DomainEvent):
        value: object

    def __init__(self, value: object) -> None:
        self.value = value


MOMENTS = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.sampled_from(
    [None, timezone.utc, *(timezone(timedelta(minutes=m)) for m in range(-14 * 60, 14 * 60 + 1, 45))]))


def _rows(mapper: Mapper, events: list) -> list[tuple]:
    stored = [mapper.to_stored_event(e) for e in events]
    return [(n, s.originator_id, s.originator_version, s.topic, s.state) for n, s in enumerate(stored, start=1)]


# Nested values are slow to draw on a loaded machine (the suite's 4 workers on 2 cores): that is no finding.
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(values, values, MOMENTS)
def test_a_decoded_record_is_the_record_of_the_decoded_event(first, second, when) -> None:
    # Folds read records (metnos/mechanisms/store/event_record.py); rebuilt and live views agree only if both ways give the same.
    reader = FastMapper(transcoder=OrjsonTranscoder(), compressor=ZstdCompressor())
    sample = Sample._create(Sample.Made, id=uuid4(), value=first, timestamp=when)
    sample.trigger_event(Sample.Changed, value=second, timestamp=when)
    sample.trigger_event(Sample.Changed, value="x" * 3000, timestamp=when)  # compressed
    events = sample.collect_events()
    for writer in (reader, Mapper(transcoder=OrjsonTranscoder(), compressor=ZstdCompressor())):
        rows = _rows(writer, events)
        for _ in range(2):  # the first call fills the caches, the second takes the fast path
            records = reader.decode_records(rows)
            assert records == [(row[0], row[3], record_of(e)) for row, e in zip(rows, reader.decode_rows(rows), strict=True)]
            assert [r["timestamp"] for _, _, r in records] == [when.isoformat()] * 3
            assert {r["originator_id"] for _, _, r in records} == {str(sample.id)}


@given(values, MOMENTS)
def test_a_record_decoded_for_some_fields_is_the_full_record_cut_to_them(value, when) -> None:
    mapper = FastMapper(transcoder=OrjsonTranscoder(), compressor=ZstdCompressor())
    sample = Sample._create(Sample.Made, id=uuid4(), value={"kept": value, "dropped": [value, 1]}, timestamp=when)
    sample.trigger_event(Sample.Changed, value=value, timestamp=when)
    rows = _rows(mapper, sample.collect_events())
    made, changed = rows[0][3], rows[1][3]
    full = mapper.decode_records(rows)
    for wanted in ({made: frozenset({"value"}), changed: frozenset()}, {made: frozenset(), changed: None}):
        cut = mapper.decode_records(rows, mapper.record_loaders(wanted))
        for row, (nid, topic, whole), (nid2, topic2, part) in zip(rows, full, cut, strict=True):
            fields = set(whole) if wanted[topic] is None else wanted[topic] | {"originator_id", "originator_version", "timestamp"}
            # A tagged state (a UUID or a datetime inside) is read whole.
            tagged = mapper.compressor.decompress(row[4]).startswith(b" ")
            assert (nid2, topic2) == (nid, topic)
            assert part == (whole if tagged else {k: v for k, v in whole.items() if k in fields})


@given(st.one_of(st.uuids(), st.text(max_size=40)))
def test_an_id_read_as_text_is_the_text_of_the_id_read(originator_id) -> None:
    from metnos.mechanisms.store.records import _decode_originator_id, _encode_originator_id, _originator_id_text

    raw = _encode_originator_id(originator_id)
    assert _originator_id_text(raw) == str(_decode_originator_id(raw)) == str(originator_id)
