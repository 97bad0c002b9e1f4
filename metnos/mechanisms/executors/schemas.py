"""The I/O schema of an executor (`schema.json`): checks and resolution.

`schema.json` holds both halves of the contract; the manifest points into it
(``schema.json#/definitions/Input``). Here it is parsed, checked against its
meta-schema with the validator's own ``check_schema``, and split into two
standalone schemas that keep the document's definitions so internal
``$ref``s still resolve.

Checking a schema against the 2020-12 meta-schema costs milliseconds, which
for hundreds of executors would dominate the boot. Because the check is a
pure function of the schema bytes, a verdict can be remembered by digest:
``SchemaCheckCache`` keeps the digests of schemas that passed. It can only
skip work for bytes that are also covered by a verified signature, and the
signer refuses invalid schemas, so a forged entry buys an attacker nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib.metadata import version as _pkg_version
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError

_JSONSCHEMA_VERSION = _pkg_version("jsonschema")


class SchemaProblem(Exception):
    """schema.json is not JSON, not a valid JSON Schema, or a pointer fails."""


@dataclass(frozen=True)
class ContractSchemas:
    document: dict[str, Any]
    input: dict[str, Any]
    output: dict[str, Any]


def _resolve_pointer(doc: Any, pointer: str) -> Any:
    node = doc
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise SchemaProblem(f"pointer {pointer!r} does not resolve (no {part!r})")
    return node


def _standalone(doc: dict[str, Any], ref: str) -> dict[str, Any]:
    pointer = ref.partition("#")[2]
    if not pointer:
        return doc
    _resolve_pointer(doc, pointer)
    out: dict[str, Any] = {"$ref": "#" + pointer}
    # Carry the dialect and every definitions container so nested $refs work.
    for key in ("$schema", "$id", "definitions", "$defs"):
        if key in doc:
            out[key] = doc[key]
    return out


class SchemaCheckCache:
    """Digests of schema documents that passed ``check_schema``.

    Persisted as one digest per line; a missing or unreadable file is an
    empty cache, never an error.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._known: set[str] = set()
        self._dirty = False
        if path is not None:
            try:
                self._known = set(path.read_text().split())
            except OSError:
                pass

    @staticmethod
    def key(schema_digest: str, validator_name: str) -> str:
        return f"{schema_digest}|{validator_name}|jsonschema-{_JSONSCHEMA_VERSION}"

    def __contains__(self, key: str) -> bool:
        return key in self._known

    def add(self, key: str) -> None:
        if key not in self._known:
            self._known.add(key)
            self._dirty = True

    def save(self) -> None:
        if self.path is None or not self._dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # A temporary file of this process's own: two processes booting one workspace at once each replace the file whole.
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text("\n".join(sorted(self._known)) + "\n")
        os.replace(tmp, self.path)
        self._dirty = False


def check_contract_schemas(
    data: bytes,
    input_ref: str,
    output_ref: str,
    *,
    digest: str | None = None,
    cache: SchemaCheckCache | None = None,
) -> ContractSchemas:
    """Parse schema.json, check it is valid JSON Schema, resolve both halves."""
    try:
        doc = json.loads(data)
    except UnicodeDecodeError:
        raise SchemaProblem("not valid UTF-8") from None
    except json.JSONDecodeError as exc:
        raise SchemaProblem(f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    if not isinstance(doc, dict):
        raise SchemaProblem("the top level must be a JSON object")
    validator_cls = jsonschema.validators.validator_for(doc, default=jsonschema.Draft202012Validator)
    key = SchemaCheckCache.key(digest, validator_cls.__name__) if digest else None
    if key is None or cache is None or key not in cache:
        try:
            validator_cls.check_schema(doc)
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "<root>"
            raise SchemaProblem(f"not a valid JSON Schema at {where}: {exc.message}") from None
        if key is not None and cache is not None:
            cache.add(key)
    return ContractSchemas(document=doc, input=_standalone(doc, input_ref), output=_standalone(doc, output_ref))


def validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    """A validator for one resolved half (input or output) of a contract."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)
