"""A tiny executor written from scratch, for the signing and loader tests."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

MANIFEST = textwrap.dedent("""\
    [executor]
    name = "{name}"
    version = "{version}"
    created_at = 2026-05-01T00:00:00Z
    created_by = "{created_by}"
    summary = "Echo a word back."
    affinity = ["echo", "word"]

    [description]
    en = "Return the word it is given."
    it = "Restituisce la parola ricevuta."

    [contract]
    error_classes = ["Empty"]
    idempotent = true
    side_effects = false

    [capabilities]
    "fs:read" = ["~/notes"]

    [caps]
    max_duration_s = 2
    """)

SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "definitions": {
        "Input": {"type": "object", "required": ["word"], "properties": {"word": {"type": "string"}},
                  "additionalProperties": False},
        "Output": {"type": "object", "required": ["ok"],
                   "properties": {"ok": {"type": "boolean"}, "content": {"type": "string"}}},
    },
}

MAIN = textwrap.dedent("""\
    def run(args, ctx):
        return {"ok": True, "content": args["word"]}
    """)

BIRTH = textwrap.dedent("""\
    def birth_echo(run, tmp):
        assert run({"word": "ciao"})["content"] == "ciao"
    """)


def write_executor(d: Path, *, name: str = "get_word", version: str = "1.0.0", created_by: str = "seed",
                   main: str = MAIN, birth: str = BIRTH, schema: dict | str = SCHEMA) -> Path:
    (d / "tests").mkdir(parents=True, exist_ok=True)
    (d / "manifest.toml").write_text(MANIFEST.format(name=name, version=version, created_by=created_by))
    (d / "main.py").write_text(main)
    (d / "schema.json").write_text(schema if isinstance(schema, str) else json.dumps(schema, indent=2))
    (d / "tests" / "birth.py").write_text(birth)
    return d
