"""An orjson transcoder that gives back exactly the types it was given.

orjson writes UUIDs and datetimes as plain strings, which would come back as
strings; so before orjson sees an object, every value that is not native JSON
is wrapped in the ``{"_type_": name, "_data_": ...}`` form of eventsourcing's
JSONTranscoder (and read back through the same registered transcodings).
Tuples stay tuples and pydantic models come back as the same model class.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import orjson
from eventsourcing.persistence import (
    DatetimeAsISO,
    DecimalAsStr,
    JSONTranscoder,
    Transcoding,
    TranscodingNotRegisteredError,
    UUIDAsHex,
)
from eventsourcing.utils import get_topic, resolve_topic
from pydantic import BaseModel

_NATIVE = frozenset((str, int, float, bool, type(None)))
_all_native = _NATIVE.issuperset
TAGGED = b" "


def is_tagged(data: bytes) -> bool:
    return data[:1] == TAGGED
_TUPLE = "tuple_as_list"
_BIG_INT = "int_as_str"
_I64 = (-(1 << 63), (1 << 64) - 1)
_MODEL = "pydantic_model"


class OrjsonTranscoder(JSONTranscoder):
    def __init__(self) -> None:
        super().__init__()
        for transcoding in (UUIDAsHex(), DecimalAsStr(), DatetimeAsISO()):
            self.register(transcoding)

    def encode(self, obj: Any) -> bytes:
        wrapped = self._wrap(obj)
        try:
            data = orjson.dumps(wrapped)
        except orjson.JSONEncodeError:
            # orjson stops at 64-bit integers; JSON does not. The rare value
            # beyond goes as text, tagged.
            return TAGGED + orjson.dumps(_big_ints(wrapped))
        # A leading space (still JSON) says "there are tags to unwrap": most
        # event states have none, and reading can then skip the walk.
        return data if wrapped is obj else TAGGED + data

    def decode(self, data: bytes) -> Any:
        try:
            loaded = orjson.loads(data)
        except orjson.JSONDecodeError as e:
            msg = f"not JSON: {e}"
            raise ValueError(msg) from None
        if not is_tagged(data):
            return loaded
        return self._unwrap(loaded)

    def _wrap(self, o: Any) -> Any:
        t = type(o)
        if t in _NATIVE:
            return o
        # Containers come back as the same object when nothing inside needed
        # wrapping: that identity is how encode knows the value has no tags.
        if t is dict:
            changed = None
            for k, v in o.items():
                tv = type(v)
                if tv in _NATIVE or (tv is list and _all_native(map(type, v))):
                    continue  # the common values, a list of plain values among them, without a call
                w = self._wrap(v)
                if w is not v:
                    if changed is None:
                        changed = dict(o)
                    changed[k] = w
            return o if changed is None else changed
        if t is list:
            if _all_native(map(type, o)):
                return o  # a list of plain values (the common case), checked in one C loop
            out = None
            for i, v in enumerate(o):
                if type(v) in _NATIVE:
                    continue
                w = self._wrap(v)
                if w is not v:
                    if out is None:
                        out = list(o)
                    out[i] = w
            return o if out is None else out
        if t is tuple:
            return {"_type_": _TUPLE, "_data_": [self._wrap(v) for v in o]}
        transcoding = self.types.get(t)
        if transcoding is not None:
            return {"_type_": transcoding.name, "_data_": self._wrap(transcoding.encode(o))}
        if isinstance(o, BaseModel):
            state = {name: getattr(o, name) for name in type(o).model_fields}
            return {"_type_": _MODEL, "_data_": {"topic": get_topic(t), "state": self._wrap(state)}}
        # Subclasses of native types travel as their base, as with json.
        for base in (str, int, float):
            if isinstance(o, base):
                return base(o)
        if isinstance(o, dict):
            return self._wrap(dict(o))
        if isinstance(o, list):
            return self._wrap(list(o))
        msg = (
            f"Object of type {t} is not serializable. Please define "
            "and register a custom transcoding for this type."
        )
        raise TranscodingNotRegisteredError(msg)

    def wrap(self, obj: Any) -> Any:
        """``obj`` with every value that is not native JSON tagged; ``obj`` itself when none is."""
        return self._wrap(obj)

    def unwrap(self, loaded: Any) -> Any:
        """Loaded JSON back to the types it was written from."""
        return self._unwrap(loaded)

    def _unwrap(self, o: Any) -> Any:
        t = type(o)
        if t is list:
            return [v if type(v) in _NATIVE else self._unwrap(v) for v in o]
        if t is not dict:
            return o
        if len(o) == 2 and "_type_" in o and "_data_" in o:
            name = o["_type_"]
            data = self._unwrap(o["_data_"])
            if name == _TUPLE:
                return tuple(data)
            if name == _BIG_INT:
                return int(data)
            if name == _MODEL:
                return resolve_topic(data["topic"]).model_validate(data["state"])
            try:
                transcoding = self.names[name]
            except (KeyError, TypeError):
                msg = (
                    f"Data serialized with name '{name}' is not deserializable. "
                    "Please register a custom transcoding for this type."
                )
                raise TranscodingNotRegisteredError(msg) from None
            return transcoding.decode(data)
        return {k: (v if type(v) in _NATIVE else self._unwrap(v)) for k, v in o.items()}


def is_plain(o: Any) -> bool:
    """Whether ``OrjsonTranscoder.wrap(o)`` is ``o`` itself: nothing in it to tag.

    ``_wrap`` less the building of what it would give back: a save asks this of every state,
    and most states have nothing to tag. Exact types only, as there: a subclass of str is tagged.
    """
    t = type(o)
    if t is dict:
        for v in o.values():
            tv = type(v)
            if tv in _NATIVE or (tv is list and _all_native(map(type, v))):
                continue
            if not is_plain(v):
                return False
        return True
    if t is list:
        if _all_native(map(type, o)):
            return True
        for v in o:
            if type(v) not in _NATIVE and not is_plain(v):
                return False
        return True
    return t in _NATIVE


def _big_ints(o: Any) -> Any:
    if type(o) is int and not _I64[0] <= o <= _I64[1]:
        return {"_type_": _BIG_INT, "_data_": str(o)}
    if type(o) is dict:
        return {k: _big_ints(v) for k, v in o.items()}
    if type(o) is list:
        return [_big_ints(v) for v in o]
    return o


__all__ = ["OrjsonTranscoder", "Transcoding", "UUID", "datetime", "Decimal"]
