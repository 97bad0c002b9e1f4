"""Stage 2's specification: what the model proposed, checked, and the folder it becomes.

The model writes the specification as JSON; here it is validated by the same
rules every executor meets (a name in the closed verb_object vocabulary, JSON
Schemas, capabilities the manifest model accepts, examples that fit the
input schema). The manifest and schema.json of the new executor are then
written from the approved specification by this code, never by the model:
what the user approved is what gets signed.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from metnos.mechanisms.executors.manifest import VERB_CATEGORY, Capabilities, ManifestError, parse_manifest
from metnos.mechanisms.executors.schemas import SchemaProblem, check_contract_schemas
from metnos.mechanisms.executors.verbs import in_vocabulary
from metnos.runtime.step.text import STOPWORDS, tokens

VERSION = "1.0.0"
# The caps of a synthesised executor: small, since it was asked for one small job.
CAPS = {"max_duration_s": 5, "max_memory_mb": 128, "max_output_bytes": 1024 * 1024}


class SpecProblem(ValueError):
    """The specification cannot become an executor: says which field and why."""


class Specification(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str
    summary: str = Field(min_length=1, max_length=300)
    description: str = Field(min_length=1)
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    capabilities: dict[str, Any] = Field(default_factory=dict)
    error_classes: list[str] = Field(default_factory=list)
    examples: list[dict[str, Any]] = Field(default_factory=list)


def first_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in a model's reply, fenced or not."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    msg = "the reply holds no JSON object"
    raise SpecProblem(msg)


def _as_object(schema: Any, key: str, *, output: bool) -> Any:
    """A schema of one value, as the object with that value under ``key`` (and ``ok`` for a result)."""
    if not isinstance(schema, dict) or schema.get("type") in ("object", None):
        return schema
    wrapped: dict[str, Any] = {"type": "object", "required": [key], "properties": {key: schema}}
    if output:
        wrapped["properties"]["ok"] = {"type": "boolean"}
    return wrapped


def normalise(raw: Mapping[str, Any]) -> dict[str, Any]:
    """What a small model gets almost right, made right without changing its meaning:
    a verb outside the vocabulary that is a known synonym of one (``count_words`` ->
    ``compute_words``), a bare input or output schema (``{"type": "string"}``)
    as an object with one field, and an output that requires ``error`` even on success. The user approves the result, not the reply."""
    out = dict(raw)
    if isinstance(out.get("name"), str):
        out["name"] = in_vocabulary(out["name"].strip().lower().replace("-", "_").replace(" ", "_"))
    if "input_schema" in out:
        kind = out["input_schema"].get("type") if isinstance(out["input_schema"], dict) else None
        out["input_schema"] = _as_object(out["input_schema"], "text" if kind == "string" else "value", output=False)
    if "output_schema" in out:
        out["output_schema"] = _as_object(out["output_schema"], "result", output=True)
        schema = out["output_schema"]
        # "error" is there only when ok is false (the prompt's convention): required, it breaks every success.
        if isinstance(schema, dict) and isinstance(schema.get("required"), list) and "error" in schema["required"]:
            out["output_schema"] = {**schema, "required": [k for k in schema["required"] if k != "error"]}
    return out


def validate_spec(raw: Mapping[str, Any], *, taken: Collection[str]) -> Specification:
    try:
        spec = Specification.model_validate(normalise(raw))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<root>"
        raise SpecProblem(f"specification field {where}: {first['msg']}") from None
    if spec.name in taken:
        raise SpecProblem(f"an executor named {spec.name!r} already exists; a new one needs a name of its own")
    try:
        Capabilities.model_validate(spec.capabilities)
    except ValidationError as e:
        first = e.errors()[0]
        raise SpecProblem(f"specification capabilities: {first['msg']}") from None
    for half in ("input_schema", "output_schema"):
        if getattr(spec, half).get("type") != "object":
            raise SpecProblem(f"specification {half} must be a JSON Schema of type object")
    # The manifest model checks the name, the error classes and the rest.
    manifest_text(spec, spec.capabilities, run_id="check", created_at="2026-01-01T00:00:00+00:00")
    schemas = schema_document(spec)
    try:
        check_contract_schemas(json.dumps(schemas).encode(), "schema.json#/definitions/Input", "schema.json#/definitions/Output")
    except SchemaProblem as e:
        raise SpecProblem(f"specification schemas: {e}") from None
    check = jsonschema.Draft7Validator(spec.input_schema)
    for i, example in enumerate(spec.examples, 1):
        err = next(iter(check.iter_errors(example.get("args", {}))), None)
        if err is not None:
            raise SpecProblem(f"specification example {i}: its args break the input schema: {err.message}")
    return spec


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if value is None:
        msg = "TOML has no null"
        raise SpecProblem(msg)
    return json.dumps(str(value))


def affinity(spec: Specification) -> list[str]:
    words = [t for t in [*tokens(spec.name), *tokens(spec.summary)] if t not in STOPWORDS]
    seen: dict[str, None] = {}
    for w in words:
        if w.isascii() and w.isalnum() and w.islower():
            seen.setdefault(w, None)
    return list(seen)[:16] or [spec.name.split("_", 1)[0]]


def manifest_text(spec: Specification, capabilities: Mapping[str, Any], *, run_id: str, created_at: str,
                  created_by: str | None = None) -> str:
    verb = spec.name.split("_", 1)[0]
    side_effects = VERB_CATEGORY.get(verb) == "A" or bool(capabilities.get("fs:write"))
    varies = "world" if capabilities.get("network") else ("time" if capabilities.get("time:read") else None)
    lines = [
        "[executor]",
        f"name = {_toml_value(spec.name)}",
        f'version = "{VERSION}"',
        f"created_at = {created_at}",
        f"created_by = {_toml_value(created_by or f'synt:{run_id}')}",
        f"summary = {_toml_value(spec.summary)}",
        f"affinity = {_toml_value(affinity(spec))}",
        "",
        "[description]",
        f"en = {_toml_value(spec.description)}",
        "",
        "[contract]",
        'input_schema = "schema.json#/definitions/Input"',
        'output_schema = "schema.json#/definitions/Output"',
        f"error_classes = {_toml_value(spec.error_classes)}",
        f"idempotent = {_toml_value(not side_effects)}",
        f"side_effects = {_toml_value(side_effects)}",
        *([f"output_varies = {_toml_value(varies)}"] if varies else []),
        "",
        "[capabilities]",
        *(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in sorted(capabilities.items()) if v),
        "",
        "[caps]",
        *(f"{k} = {v}" for k, v in CAPS.items()),
    ]
    for example in spec.examples:
        lines += ["", "[[examples]]", f"description = {_toml_value(str(example.get('description') or spec.summary))}",
                  f"args = {_toml_value(example.get('args', {}))}"]
    text = "\n".join(lines) + "\n"
    try:
        parse_manifest(text.encode())
    except ManifestError as e:
        raise SpecProblem(f"specification does not make a valid manifest: {e.message}"
                          + (f" ({e.field})" if e.field else "")) from None
    return text


def schema_document(spec: Specification) -> dict[str, Any]:
    return {"$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"Input": spec.input_schema, "Output": spec.output_schema}}


def write_folder(dest: Path, spec: Specification, files: Mapping[str, str], capabilities: Mapping[str, Any], *,
                 run_id: str, created_at: str, created_by: str | None = None) -> Path:
    """The executor folder as it will be signed: manifest and schema from the spec, code from the draft."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "manifest.toml").write_text(manifest_text(spec, capabilities, run_id=run_id, created_at=created_at,
                                                      created_by=created_by))
    (dest / "schema.json").write_text(json.dumps(schema_document(spec), indent=2, sort_keys=True) + "\n")
    for rel, source in files.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return dest
