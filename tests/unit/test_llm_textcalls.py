from __future__ import annotations

import json

import pytest

from metnos.mechanisms.llm.messages import ToolSpec
from metnos.mechanisms.llm.textcalls import find_text_call, parse_text_call

READ = ToolSpec(
    "read_files",
    "Read files.",
    {"type": "object", "properties": {"paths": {"type": "array", "items": {"type": "string"}, "minItems": 1}}, "required": ["paths"], "additionalProperties": False},
)
TOOLS = [READ, ToolSpec("list_files", "List a folder.", {"type": "object", "properties": {"folder": {"type": "string"}}, "required": ["folder"]})]
CALL = {"name": "read_files", "arguments": {"paths": ["notes.txt"]}}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(CALL),
        f"```json\n{json.dumps(CALL)}\n```",
        f"  ```JSON\n{json.dumps(CALL, indent=2)}\n```\n",
        f"```\n{json.dumps(CALL)}\n```",
        f"<tool_call>\n{json.dumps(CALL)}\n</tool_call>",
    ],
)
def test_accepts_a_lone_valid_call(text: str) -> None:
    call = parse_text_call(text, TOOLS, call_id="c1")
    assert call is not None
    assert (call.id, call.name, call.arguments) == ("c1", "read_files", {"paths": ["notes.txt"]})


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("The file says: buy milk.", "not a lone JSON object"),
        (f"Sure! ```json\n{json.dumps(CALL)}\n```", "not a lone JSON object"),
        (f"```json\n{json.dumps(CALL)}\n```\nDone.", "not a lone JSON object"),
        ('{"name": "read_files", "arguments": {"paths": ["x"]}', "not valid JSON"),
        (json.dumps({"name": "delete_files", "arguments": {"paths": ["x"]}}), "'delete_files' is not an offered tool"),
        (json.dumps({"name": "read_files", "arguments": {"paths": []}}), "do not validate"),
        (json.dumps({"name": "read_files", "arguments": {"paths": ["x"], "force": True}}), "do not validate"),
        (json.dumps({"name": "read_files", "arguments": {}}), "do not validate"),
        (json.dumps({"name": "read_files", "arguments": '{"paths": ["x"]}'}), "not an object"),
        (json.dumps({"name": "read_files", "arguments": {"paths": ["x"]}, "why": "because"}), "exactly 'name' and 'arguments'"),
        (json.dumps({"tool": "read_files", "args": {"paths": ["x"]}}), "exactly 'name' and 'arguments'"),
        (json.dumps([CALL]), "not a lone JSON object"),
        (f"```json\n{json.dumps(CALL)}\n```\n```json\n{json.dumps(CALL)}\n```", "not"),
    ],
)
def test_rejects_anything_less_than_a_strict_call(text: str, reason: str) -> None:
    verdict = find_text_call(text, TOOLS, call_id="c1")
    assert verdict.call is None
    assert reason in (verdict.reason or "")


def test_no_tools_offered_means_no_text_call() -> None:
    assert parse_text_call(json.dumps(CALL), [], call_id="c1") is None


def test_a_tool_with_an_invalid_schema_never_validates() -> None:
    broken = ToolSpec("read_files", "", {"type": "no-such-type"})
    verdict = find_text_call(json.dumps(CALL), [broken], call_id="c1")
    assert verdict.call is None and "schema is invalid" in (verdict.reason or "")
