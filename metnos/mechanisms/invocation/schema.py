"""schema.json checks on the way in and on the way out (jsonschema)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import jsonschema
import orjson
from jsonschema.exceptions import SchemaError, best_match

from metnos.mechanisms.failures import SchemaViolation


@functools.lru_cache(maxsize=256)
def _validator(schema_bytes: bytes):
    schema = orjson.loads(schema_bytes)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as e:
        raise SchemaViolation("schema", "/" + "/".join(map(str, e.path)), e.message) from None
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def validate(instance: Any, schema: Mapping[str, Any] | None, *, where: str) -> None:
    """Raise SchemaViolation(where, path, message) unless ``instance`` fits."""
    if schema is None:
        return
    try:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError as e:
        raise SchemaViolation("schema", "/", f"schema is not JSON: {e}") from None
    err = best_match(_validator(key).iter_errors(instance))
    if err is not None:
        raise SchemaViolation(where, "/" + "/".join(map(str, err.absolute_path)), err.message)
