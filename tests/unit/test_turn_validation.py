import pytest

from metnos.runtime.step.validation import SchemaDefectError, validate_args

SCHEMA = {"type": "object", "properties": {"paths": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                                           "max_lines": {"type": "integer", "minimum": 1}},
          "required": ["paths"], "additionalProperties": False}


def test_valid_args():
    assert validate_args(SCHEMA, {"paths": ["/a"], "max_lines": 3}) == []


def test_errors_are_ordered_and_located():
    errs = validate_args(SCHEMA, {"paths": ["/a", 3], "max_lines": 0, "bogus": 1})
    assert [e["path"] for e in errs] == ["", "max_lines", "paths.1"]
    assert {e["validator"] for e in errs} == {"additionalProperties", "minimum", "type"}


def test_missing_required():
    errs = validate_args(SCHEMA, {})
    assert errs[0]["validator"] == "required" and "paths" in errs[0]["message"]


def test_broken_schema_is_a_defect():
    with pytest.raises(SchemaDefectError):
        validate_args({"type": "no-such-type"}, {})
