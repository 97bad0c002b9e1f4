"""Check proposed arguments against the executor's JSON Schema.

Runs after piping (the executor must receive valid data, whatever the LLM
wrote) and before the vaglio. Errors come back as a list of plain records
ordered by argument path then message, so the observation the LLM sees and
the recorded event are the same on replay. Draft 2020-12 unless the schema
names another draft in ``$schema``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import jsonschema
import orjson
from jsonschema.validators import validator_for

from metnos.runtime.step.errors import TurnError

MAX_ERRORS = 20


class SchemaDefectError(TurnError):
    pass


@lru_cache(maxsize=1024)
def _validator(schema_json: bytes) -> Any:
    # Checking a schema against its meta-schema costs milliseconds; a turn
    # validates against the same few schemas at every step.
    schema = orjson.loads(schema_json)
    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        # The manifest is signed: a broken schema is a catalogue defect,
        # not something the LLM can correct.
        raise SchemaDefectError("bad_schema", f"the executor's schema is invalid: {exc.message}",
                                {}) from None
    return cls(schema)


def validate_args(schema: Mapping[str, Any], args: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``[]`` when valid, else ``[{"path": "a.0", "message": ..., "validator": ...}]``."""
    validator = _validator(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS))
    errors = []
    for err in validator.iter_errors(args):
        errors.append({"path": ".".join(map(str, err.absolute_path)),
                       "message": err.message, "validator": str(err.validator)})
    errors.sort(key=lambda e: (e["path"], e["message"]))
    return errors[:MAX_ERRORS]
