"""A Mapper that does eventsourcing's job with less work per event.

Every domain event carries a timestamp; moving it out of the transcoder's
generic walk (an ISO string under a reserved key) leaves most event states
plain JSON, which the transcoder then reads without walking at all. Topics
and id convertors are looked up once per class. The stored bytes remain
ordinary transcoder output, so the stock Mapper's contract holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, TypedDict

import msgspec
import orjson
from eventsourcing.persistence import Mapper, MapperDeserialisationError, StoredEvent, find_id_convertor, pass_through_convertor
from eventsourcing.utils import get_topic, resolve_topic

from metnos.mechanisms.store.compressor import RAW_MARK, ZstdCompressor
from metnos.mechanisms.store.event_record import Record, record_of
from metnos.mechanisms.store.transcoder import TAGGED, OrjsonTranscoder, is_plain

_TS = "__ts__"
# A stored state that starts with this byte is the JSON after it, as the
# compressor stored it raw; JSON that starts with the transcoder's mark holds
# tagged values. The rebuild's hot loop reads the first kind itself.
PLAIN_MARK = RAW_MARK
TAGGED_MARK = TAGGED[0]
STAMP = _TS

# topic -> the function turning its stored JSON into a record's fields
Loaders = dict[str, Callable[[bytes], dict[str, Any]]]
# (originator id, originator version, topic, state): a StoredEvent's fields, as a save lays them out
StoredRow = tuple[Any, int, str, bytes]


def stored_event(originator_id: Any, originator_version: int, topic: str, state: bytes) -> StoredEvent:
    stored = object.__new__(StoredEvent)
    # The frozen dataclass's __init__ costs a microsecond an event.
    object.__setattr__(stored, "__dict__", {"originator_id": originator_id, "originator_version": originator_version, "topic": topic, "state": state})
    return stored


def row_of(stored: StoredEvent) -> StoredRow:
    return (stored.originator_id, stored.originator_version, stored.topic, stored.state)


def _with_stamp(data: bytes, stamp: bytes) -> bytes:
    """The state's JSON object with the timestamp added as its last member."""
    if data.lstrip() == b"{}":
        return data[:-1] + b'"' + _TS.encode() + b'":' + stamp + b"}"
    return data[:-1] + b',"' + _TS.encode() + b'":' + stamp + b"}"


class FastMapper(Mapper):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._classes: dict[str, tuple[type, int, dict[type, Any]]] = {}
        # event class -> (its topic, its class version)
        self._topics: dict[type, tuple[str, int]] = {}
        self._loaders: dict[frozenset[str], Any] = {}
        # With Metnos's own transcoder and compressor and no cipher, decoding
        # skips their method calls: a rebuild decodes millions of events.
        self._own_codecs = (
            self.cipher is None
            and type(self.transcoder) is OrjsonTranscoder
            and (self.compressor is None or type(self.compressor) is ZstdCompressor)
        )
        if self._own_codecs:
            self.decode_rows = self._fast_rows_decoder()  # type: ignore[method-assign]
            self.decode_records = self._fast_records_decoder()  # type: ignore[method-assign]
            self.stored_rows = self._fast_encoder()  # type: ignore[method-assign]
            self.to_stored_event = self._fast_stored_event  # type: ignore[method-assign]

    def _fast_rows_decoder(self) -> Any:
        """``decode_rows`` with everything it touches bound once: the hot loop of scans."""
        classes = self._classes
        loads = orjson.loads
        unwrap = self.transcoder.unwrap
        decompress = self.compressor.decompress if self.compressor is not None else None
        fromiso = datetime.fromisoformat
        new = object.__new__
        set_dict = object.__setattr__
        slow = self._decode

        def decode_rows(rows: Iterable[tuple[int, Any, int, str, bytes]]) -> list[Any]:
            events: list[Any] = []
            append = events.append
            for _id, originator_id, originator_version, topic, data in rows:
                found = classes.get(topic)
                if found is None or found[1] > 1:
                    append(slow(topic, originator_id, originator_version, data))
                    continue
                cls, _, convertors = found
                convert = convertors.get(type(originator_id))
                try:
                    if convert is None:
                        raise LookupError  # noqa: TRY301 - the slow path learns the convertor
                    payload = data if decompress is None else data[1:] if data[0] == 0 else decompress(data)
                    state = loads(payload)
                    if payload[0] == 32:  # the transcoder's mark for tagged values
                        state = unwrap(state)
                    ts = state.pop(_TS, None)
                    if ts is not None:
                        state["timestamp"] = fromiso(ts)
                except Exception:  # noqa: BLE001 - the slow path reports it properly
                    append(slow(topic, originator_id, originator_version, data))
                    continue
                state["originator_id"] = originator_id if convert is pass_through_convertor else convert(originator_id)
                state["originator_version"] = originator_version
                event = new(cls)
                set_dict(event, "__dict__", state)
                append(event)
            return events

        return decode_rows

    def _fast_records_decoder(self) -> Any:
        """``decode_records`` with everything it touches bound once: the hot loop of catch-ups.

        A record is the stored JSON as it is: the timestamp stays the text it
        was stored as, the id becomes text once per run of one aggregate's events.
        """
        class_of = self._class_of
        loads = orjson.loads
        unwrap = self.transcoder.unwrap
        decompress = self.compressor.decompress if self.compressor is not None else None
        slow = self._record

        def decode_records(rows: Iterable[tuple[int, Any, int, str, bytes]], loaders: Loaders | None = None) -> list[tuple[int, str, Record]]:
            get_loader = (loaders or {}).get
            # topic -> its loader, once its class is known to need no upcasting.
            ready: dict[str, Callable[[bytes], dict[str, Any]]] = {}
            records: list[tuple[int, str, Record]] = []
            append = records.append
            last_id: Any = None
            last_key = ""
            for nid, originator_id, originator_version, topic, data in rows:
                load = ready.get(topic)
                if load is None:
                    if class_of(topic)[1] > 1:
                        append((nid, topic, slow(topic, originator_id, originator_version, data)))
                        continue
                    load = ready[topic] = get_loader(topic, loads)
                try:
                    payload = data if decompress is None else data[1:] if data[0] == 0 else decompress(data)
                    if payload[0] == 32:  # the transcoder's mark for tagged values: all of it, unwrapped
                        record = unwrap(loads(payload))
                    else:
                        record = load(payload)
                    # No stored stamp (a stock mapper's event) is the slow path's to read.
                    record["timestamp"] = record.pop(_TS)
                except Exception:  # noqa: BLE001 - the slow path reports it properly
                    append((nid, topic, slow(topic, originator_id, originator_version, data)))
                    continue
                if originator_id is not last_id:
                    last_id = originator_id
                    last_key = str(originator_id)
                record["originator_id"] = last_key
                record["originator_version"] = originator_version
                append((nid, topic, record))
            return records

        return decode_records

    def _fast_encoder(self) -> Any:
        """``stored_rows`` with everything it touches bound once, for the common event (a
        ``datetime`` timestamp, class version 1, a state within orjson's integers): the hot loop
        of a save. Any other event goes the general way; both write the same bytes."""
        topics = self._topics
        general = FastMapper.to_stored_event.__get__(self)
        wrap = self.transcoder.wrap
        dumps = orjson.dumps
        encode_error = orjson.JSONEncodeError
        compressor = self.compressor
        compress = compressor.compress if compressor is not None else None
        threshold = compressor.threshold if compressor is not None else 0
        raw_mark = bytes([RAW_MARK])

        def stored_rows(domain_events: Iterable[Any]) -> list[StoredRow]:
            rows: list[StoredRow] = []
            append = rows.append
            for domain_event in domain_events:
                cls = type(domain_event)
                found = topics.get(cls)
                if found is None:
                    found = topics[cls] = (get_topic(cls), getattr(cls, "class_version", 1))
                state = domain_event.__dict__.copy()
                originator_id = state.pop("originator_id")
                originator_version = state.pop("originator_version")
                timestamp = state.pop("timestamp", None)
                try:
                    if found[1] > 1 or type(timestamp) is not datetime:
                        raise LookupError  # noqa: TRY301 - the general way's to write
                    if is_plain(state):
                        state[_TS] = timestamp
                        data = dumps(state)
                    else:
                        wrapped = wrap(state)  # a new dict, ours to add to
                        wrapped[_TS] = timestamp
                        data = TAGGED + dumps(wrapped)
                except (LookupError, encode_error):  # an integer beyond 64 bits is said as text there
                    stored = general(domain_event)
                    append((originator_id, originator_version, stored.topic, stored.state))
                    continue
                if compress is not None:
                    data = raw_mark + data if len(data) < threshold else compress(data)
                append((originator_id, originator_version, found[0], data))
            return rows

        return stored_rows

    def stored_rows(self, domain_events: Iterable[Any]) -> list[StoredRow]:
        """``(originator id, originator version, topic, state)`` of each event, as ``to_stored_event``
        stores it, without a ``StoredEvent`` an event: what the LMDB recorder's ``insert_rows`` takes."""
        return [row_of(self.to_stored_event(e)) for e in domain_events]

    def _fast_stored_event(self, domain_event: Any) -> StoredEvent:
        return stored_event(*self.stored_rows((domain_event,))[0])

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        cls = type(domain_event)
        found = self._topics.get(cls)
        if found is None:
            found = self._topics[cls] = (get_topic(cls), getattr(cls, "class_version", 1))
        topic, class_version = found
        state = domain_event.__dict__.copy()
        originator_id = state.pop("originator_id")
        originator_version = state.pop("originator_version")
        timestamp = state.get("timestamp")
        if class_version > 1:
            state["class_version"] = class_version
        if type(timestamp) is datetime and self._own_codecs:
            data = self._encode_stamped(state, timestamp)
        else:
            stamp = None
            if type(timestamp) is datetime:
                del state["timestamp"]
                stamp = orjson.dumps(timestamp)
            data = self.transcoder.encode(state)
            if stamp is not None:
                data = _with_stamp(data, stamp)
        if self.compressor:
            data = self.compressor.compress(data)
        if self.cipher:
            data = self.cipher.encrypt(data)
        return stored_event(originator_id, originator_version, topic, data)

    def _encode_stamped(self, state: dict[str, Any], timestamp: datetime) -> bytes:
        """The transcoder's bytes for ``state`` with the timestamp as its last member, in one ``orjson.dumps``.

        orjson writes the datetime itself, as ``orjson.dumps(timestamp)`` would:
        the bytes are those of ``transcoder.encode`` then ``_with_stamp``.
        """
        del state["timestamp"]
        # The same dict when nothing needed a tag, else a new one: either way ours to add to.
        wrapped = self.transcoder.wrap(state)
        plain = wrapped is state
        wrapped[_TS] = timestamp
        try:
            data = orjson.dumps(wrapped)
        except orjson.JSONEncodeError:
            # An integer beyond 64 bits: the transcoder's own path says it as text.
            state.pop(_TS, None)
            return _with_stamp(self.transcoder.encode(state), orjson.dumps(timestamp))
        return data if plain else TAGGED + data

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        return self.decode(stored_event.topic, stored_event.originator_id, stored_event.originator_version, stored_event.state)

    def decode(self, topic: str, originator_id: Any, originator_version: int, data: bytes) -> Any:
        """A domain event from the parts of a stored event (scans skip the StoredEvent)."""
        return self.decode_rows(((0, originator_id, originator_version, topic, data),))[0]

    def decode_rows(self, rows: Iterable[tuple[int, Any, int, str, bytes]]) -> list[Any]:
        """Domain events for scan rows ``(id, originator id, version, topic, state)``, in order."""
        return [self._decode(topic, oid, version, data) for _id, oid, version, topic, data in rows]

    def record_loaders(self, fields: Mapping[str, frozenset[str] | None]) -> Loaders:
        """topic -> a loader of stored JSON that keeps only the fields wanted, for ``decode_records``.

        A fold reads a few fields of an event; a decoder told which skips the
        others without building them. Topics that want every field (None) get none.
        """
        loaders: Loaders = {}
        for topic, wanted in fields.items():
            if wanted is None or not self._own_codecs:
                continue
            key = frozenset(wanted)
            loader = self._loaders.get(key)
            if loader is None:
                shape = TypedDict("Fields", {_TS: Any, **dict.fromkeys(sorted(key), Any)}, total=False)  # type: ignore[misc]
                loader = self._loaders[key] = msgspec.json.Decoder(shape).decode
            loaders[topic] = loader
        return loaders

    @property
    def stores_plain_json(self) -> bool:
        """Whether a state may be stored as plain JSON behind ``PLAIN_MARK`` (Metnos's own codecs, compressed)."""
        return self._own_codecs and self.compressor is not None

    def plain_loader(self, topic: str, loaders: Loaders | None = None) -> Callable[[bytes], dict[str, Any]] | None:
        """For a stored state that is plain JSON (stored raw, ``PLAIN_MARK`` first, no
        tagged values): the function giving its fields from the bytes after the mark.

        None when this topic's states need more than that (another codec, an
        upcast): ``decode_records`` then reads them.
        """
        if not self._own_codecs or self.compressor is None:
            return None
        if self._class_of(topic)[1] > 1:
            return None
        return (loaders or {}).get(topic, orjson.loads)

    def decode_records(self, rows: Iterable[tuple[int, Any, int, str, bytes]], loaders: Loaders | None = None) -> list[tuple[int, str, Record]]:
        """``(id, topic, record)`` for scan rows, in order: what folds read (metnos/mechanisms/store/event_record.py).

        With ``loaders`` (from ``record_loaders``), a record may hold only the
        fields its topic's loader keeps, besides id, version and timestamp.
        """
        return [(nid, topic, self._record(topic, oid, version, data)) for nid, oid, version, topic, data in rows]

    def _record(self, topic: str, originator_id: Any, originator_version: int, data: bytes) -> Record:
        return record_of(self._decode(topic, originator_id, originator_version, data))

    def _class_of(self, topic: str) -> tuple[type, int, dict[type, Any]]:
        """(class, its class version, id convertors by id type) for a topic, resolved once."""
        found = self._classes.get(topic)
        if found is None:
            cls = resolve_topic(topic)
            found = self._classes[topic] = (cls, getattr(cls, "class_version", 1), {})
        return found

    def _decode(self, topic: str, originator_id: Any, originator_version: int, data: bytes) -> Any:
        cls, class_version, convertors = self._class_of(topic)
        try:
            if self._own_codecs:
                compressor = self.compressor
                if compressor is not None:
                    data = data[1:] if data[:1] == b"\x00" else compressor.decompress(data)
                state: dict[str, Any] = orjson.loads(data)
                if data[:1] == b" ":
                    state = self.transcoder.unwrap(state)
            else:
                if self.cipher is not None:
                    data = self.cipher.decrypt(data)
                if self.compressor is not None:
                    data = self.compressor.decompress(data)
                state = self.transcoder.decode(data)
            ts = state.pop(_TS, None)
            if ts is not None:
                state["timestamp"] = datetime.fromisoformat(ts)
        except Exception as e:
            msg = (
                f"Failed to deserialise state of stored event with topic '{topic}', "
                f"originator_id '{originator_id}' and originator_version {originator_version}: {e}"
            )
            raise MapperDeserialisationError(msg) from e
        id_type = type(originator_id)
        convert = convertors.get(id_type)
        if convert is None:
            convert = convertors[id_type] = find_id_convertor(cls, id_type)
        state["originator_id"] = originator_id if convert is pass_through_convertor else convert(originator_id)
        state["originator_version"] = originator_version
        if class_version > 1:
            from_version = state.pop("class_version", 1)
            while from_version < class_version:
                getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(state)
                from_version += 1
        event = object.__new__(cls)
        object.__setattr__(event, "__dict__", state)
        return event
