"""What the model is shown of an executor's input schema."""

from __future__ import annotations

import json
from pathlib import Path

import executors
from metnos.runtime.step.catalogue import compact_schema, inline_refs, offered_arguments, tool_parameters

SEEDS = Path(executors.__file__).parent


def contract(name: str) -> dict:
    """The input half of a seed's schema.json, as the loader hands it over."""
    doc = json.loads((SEEDS / name / "schema.json").read_text())
    return {"$ref": "#/definitions/Input", "$schema": doc["$schema"], "definitions": doc["definitions"]}


def test_the_model_sees_only_the_input_half_inlined() -> None:
    params = tool_parameters(contract("read_files"))
    text = json.dumps(params)
    assert "$ref" not in text and "definitions" not in text and "$schema" not in text
    assert "NotFound" not in text  # the output's error classes are not arguments
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert set(params["properties"]) == {"paths", "max_bytes", "encoding", "from_step"}


def test_before_any_step_there_is_no_step_reference() -> None:
    first = tool_parameters(contract("sort_entries"), step_refs=False)
    later = tool_parameters(contract("sort_entries"))
    assert "from_step" not in first["properties"] and "entries" not in first["properties"]
    assert first["required"] == ["field"]
    assert later["required"] == ["from_step", "field"]
    assert "required" not in tool_parameters(contract("read_files"), step_refs=False)


def test_nested_refs_are_inlined_and_bad_ones_become_any() -> None:
    root = {
        "$ref": "#/definitions/In",
        "definitions": {
            "In": {"type": "object", "properties": {"who": {"$ref": "#/definitions/Name", "description": "the person"}, "bad": {"$ref": "#/definitions/Missing"}}},
            "Name": {"type": "string", "minLength": 1},
        },
    }
    out = inline_refs(root, root)
    assert out["properties"]["who"] == {"type": "string", "minLength": 1, "description": "the person"}
    assert out["properties"]["bad"] == {}


def test_a_self_referencing_schema_stops() -> None:
    root = {"$ref": "#/definitions/Node", "definitions": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/definitions/Node"}}}}}
    out = inline_refs(root, root)
    depth, node = 0, out
    while node.get("properties", {}).get("next"):
        node, depth = node["properties"]["next"], depth + 1
    assert 0 < depth <= 16


# Issue 17 item 5: a small first prompt with a stable prefix.

def test_the_model_gets_the_shape_and_the_validator_keeps_the_rest() -> None:
    from metnos.runtime.step.catalogue import compact_schema
    from metnos.runtime.step.validation import validate_args

    full = contract("find_files")
    shown = compact_schema(tool_parameters(full, step_refs=False))
    text = json.dumps(shown)
    for gone in ("description", "minLength", "maximum", "default", "format", "additionalProperties"):
        assert gone not in text
    assert shown["required"] == ["base_path"] and shown["properties"]["recursive"] == {"type": "boolean"}
    # What the prompt leaves out is still enforced, and the model is told why.
    assert validate_args(full, {"base_path": ""})
    assert validate_args(full, {"base_path": "~", "max_results": 0})
    assert validate_args(full, {"base_path": "~", "surprise": 1})
    assert not validate_args(full, {"base_path": "~"})


def test_nested_shapes_and_enums_survive_compaction() -> None:
    from metnos.runtime.step.catalogue import compact_schema

    shown = compact_schema(tool_parameters(contract("write_files"), step_refs=False))
    item = shown["properties"]["files"]["items"]
    assert item["required"] == ["path", "content"]
    assert item["properties"]["mode"]["enum"] == ["create", "overwrite", "append"]


def test_configured_names_are_offered_as_the_only_choices() -> None:
    params = offered_arguments(tool_parameters(contract("read_events")), {"calendar": {"sources": {"work": {}, "home": {}}}})
    assert params["properties"]["calendar"]["enum"] == ["home", "work"]
    # Nothing configured: the argument is not offered at all (a .ics file still is).
    bare = offered_arguments(tool_parameters(contract("read_events")), {"calendar": {"sources": {}}})
    assert "calendar" not in bare["properties"] and "file" in bare["properties"]
    people = offered_arguments(tool_parameters(contract("read_contacts")), {"contacts": {"sources": {"people": {}}}})
    assert people["properties"]["address_book"]["enum"] == ["people"]


def test_a_hint_is_the_only_prose_shown_and_a_tuning_argument_is_not_offered() -> None:
    shown = compact_schema(offered_arguments(tool_parameters(contract("read_events")), {}))
    assert "in the words the user said" in shown["properties"]["start"]["description"]
    assert "description" not in shown["properties"]["free_busy"]
    assert "max_events" not in shown["properties"]
    # Offered or not, the signed schema still takes it from other callers.
    assert "max_events" in tool_parameters(contract("read_events"))["properties"]
    nested = compact_schema(offered_arguments(tool_parameters(contract("set_events")), {}))
    assert "leave out to create one" in nested["properties"]["events"]["items"]["properties"]["find"]["description"]


def test_an_argument_left_out_is_no_longer_required() -> None:
    schema = {"type": "object", "required": ["account", "to"],
              "properties": {"account": {"type": "string", "x-choices": "mail.accounts"}, "to": {"type": "string"}}}
    assert offered_arguments(schema, {})["required"] == ["to"]
    assert offered_arguments(schema, {"mail": {"accounts": {"home": {}}}})["required"] == ["account", "to"]


def test_a_file_is_offered_instead_of_a_source_only_when_none_is_configured() -> None:
    configured = offered_arguments(tool_parameters(contract("set_events")), {"calendar": {"sources": {"home": {}}}})
    assert "calendar" in configured["properties"] and "file" not in configured["properties"]
    bare = offered_arguments(tool_parameters(contract("set_events")), {})
    assert "calendar" not in bare["properties"] and "file" in bare["properties"]
    people = offered_arguments(tool_parameters(contract("read_contacts")), {"contacts": {"sources": {"people": {}}}})
    assert "file" not in people["properties"]


def test_an_argument_the_model_must_give_is_required_of_it_alone() -> None:
    offered = offered_arguments(tool_parameters(contract("delete_events")), {"calendar": {"sources": {"home": {}}}})
    assert offered["required"] == ["find"] and "uids" not in offered["properties"]
    # The signed schema still takes uids alone, from a plan or a piped step.
    assert "required" not in tool_parameters(contract("delete_events"))
