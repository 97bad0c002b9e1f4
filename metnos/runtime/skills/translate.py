"""The deterministic translator: one executor folder for each Python script of a skill.

No model is asked. The same skill, grants and clock reading give the same
folders, byte for byte:

- the name: the script's words in the closed verb_object vocabulary
  (``fetch_weather.py`` -> ``get_weather``; a first word that is no verb and
  no known synonym of one makes ``get_<words>``);
- ``main.py``: a fixed runner that starts the script with the interpreter in
  isolated mode (``python -I -S -B``), its arguments and stdin from the call,
  an environment holding only PATH, HOME, LANG and the credentials the
  manifest names, and returns exit code, stdout and stderr;
- ``schema.json``: ``args`` (a list of strings) and ``stdin`` in, ``ok``,
  ``exit_code``, ``stdout``, ``stderr`` (and ``error``) out;
- ``manifest.toml``: summary and description from SKILL.md, the capabilities
  the user confirmed at import and nothing else (running the script is
  declared as ``code:exec = ["python3"]``);
- ``tests/birth.py``: the script starts and reports (``--help``);
- the skill's SKILL.md, the script and ``references/`` copied in, so the
  signature covers the code that runs and the documents that explain it.

What the scripts appear to use (credentials read from the environment, hosts
named in URLs) is reported as ``hints`` for the user to confirm or not.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from metnos.mechanisms.executors.manifest import VERB_CATEGORY
from metnos.mechanisms.executors.verbs import VERB_SYNONYMS
from metnos.runtime.skills.skill_folder import Skill, SkillFormatError
from metnos.runtime.step.text import STOPWORDS, tokens

VERSION = "1.0.0"
CAPS = {"max_duration_s": 30, "max_memory_mb": 256, "max_output_bytes": 1024 * 1024}
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_URL = re.compile(r"https?://[^\s'\"<>)]+")


@dataclass(frozen=True)
class Translation:
    name: str
    script: str  # the path inside the skill, e.g. scripts/fetch_weather.py
    files: dict[str, bytes]
    hints: dict[str, list[str]] = field(default_factory=dict)


def executor_name(script: Path, skill: str, taken: Collection[str]) -> str:
    words = [w for w in tokens(script.stem) if w.isascii()]
    if words and words[0] in VERB_CATEGORY:
        verb, rest = words[0], words[1:]
    elif words and words[0] in VERB_SYNONYMS:
        verb, rest = VERB_SYNONYMS[words[0]], words[1:]
    else:
        verb, rest = "get", words
    rest = [w for w in rest if w not in STOPWORDS] or [w for w in tokens(skill) if w.isascii()]
    obj = "_".join(rest) or "results"
    if obj[0].isdigit():
        obj = "n" + obj
    name = f"{verb}_{obj}"
    if name in taken:
        skill_word = "_".join(w for w in tokens(skill) if w.isascii())
        name = f"{verb}_{skill_word}_{obj}"
    return name


def script_hints(source: str) -> dict[str, list[str]]:
    """What a script seems to need: env names it reads, hosts its URLs name."""
    env, hosts = set(), set()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Subscript) and _is_environ(node.value):
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and _ENV_NAME.match(key.value):
                env.add(key.value)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
            getter = called == "getenv" or (called == "get" and isinstance(func, ast.Attribute) and _is_environ(func.value))
            if getter and isinstance(node.args[0].value, str) and _ENV_NAME.match(node.args[0].value):
                env.add(node.args[0].value)
    for url in _URL.findall(source):
        host = urlsplit(url).hostname
        if host:
            hosts.add(host)
    return {"env": sorted(env), "network": sorted(hosts)}


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (isinstance(node, ast.Name) and node.id == "environ")


def _main_py(name: str, skill: Skill, script: str, credentials: list[str]) -> str:
    return f'''"""{name}: runs {script} of the skill {skill.name!r}, translated by Metnos's skill importer.

The script runs as its own process, in isolated mode, with an environment
that holds only PATH, HOME, LANG and the credentials the manifest names.
"""

import os
import subprocess
import sys

SCRIPT = {script!r}
CREDENTIALS = {tuple(credentials)!r}
TIMEOUT_S = {CAPS["max_duration_s"] - 2}
KEEP = 200000


def run(args, ctx):
    here = os.path.dirname(os.path.abspath(__file__))
    env = {{"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8"}}
    for name in CREDENTIALS:
        if name in os.environ:
            env[name] = os.environ[name]
    argv = [sys.executable, "-I", "-S", "-B", os.path.join(here, SCRIPT), *args.get("args", [])]
    try:
        done = subprocess.run(argv, input=args.get("stdin", ""), capture_output=True, text=True,
                              timeout=TIMEOUT_S, env=env, cwd="/tmp")
    except subprocess.TimeoutExpired:
        return {{"ok": False, "error": {{"class": "ScriptTimedOut", "message": f"{{SCRIPT}} ran past {{TIMEOUT_S}} s"}}}}
    out = {{"ok": done.returncode == 0, "exit_code": done.returncode,
           "stdout": done.stdout[-KEEP:], "stderr": done.stderr[-2000:]}}
    if done.returncode != 0:
        out["error"] = {{"class": "ScriptFailed", "message": f"{{SCRIPT}} exited with {{done.returncode}}"}}
    return out
'''


_BIRTH_PY = '''def birth_the_script_starts_and_reports(run, tmp):
    out = run({"args": ["--help"]})
    assert isinstance(out.get("exit_code"), int), out
    assert out["ok"] or out["error"]["class"] == "ScriptFailed", out
'''

_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "definitions": {
        "Input": {
            "type": "object",
            "properties": {
                "args": {"type": "array", "maxItems": 64, "description": "the script's command-line arguments",
                         "items": {"type": "string", "maxLength": 4096, "x-opaque": True}},
                "stdin": {"type": "string", "maxLength": 1000000, "description": "what the script reads on its standard input",
                          "x-opaque": True},
            },
            "additionalProperties": False,
        },
        "Output": {
            "type": "object",
            "required": ["ok"],
            "properties": {
                "ok": {"type": "boolean"},
                "exit_code": {"type": "integer"},
                "stdout": {"type": "string"},
                "stderr": {"type": "string"},
                "error": {"type": "object", "required": ["class", "message"],
                          "properties": {"class": {"enum": ["ScriptFailed", "ScriptTimedOut"]}, "message": {"type": "string"}}},
            },
            "additionalProperties": False,
        },
    },
}


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def _manifest(name: str, skill: Skill, script: str, grants: Mapping[str, Any], created_at: str) -> str:
    verb = name.split("_", 1)[0]
    side_effects = VERB_CATEGORY[verb] == "A" or bool(grants.get("fs:write"))
    summary = re.split(r"(?<=[.!?])\s", skill.description, maxsplit=1)[0][:300]
    affinity = list(dict.fromkeys(t for t in [*tokens(name), *tokens(skill.name), *tokens(skill.description)]
                                  if t not in STOPWORDS and t.isascii() and t.isalnum()))[:16]
    capabilities = {"code:exec": ["python3"], **{k: v for k, v in grants.items() if v}}
    lines = [
        "[executor]", f"name = {_toml(name)}", f'version = "{VERSION}"', f"created_at = {created_at}",
        f"created_by = {_toml('skill:' + skill.name)}", f"summary = {_toml(summary)}", f"affinity = {_toml(affinity)}", "",
        "[description]",
        f"en = {_toml(skill.description + f' Runs {script} of the skill {skill.name}: args are its command-line arguments, stdin its input.')}",
        "",
        "[contract]", 'input_schema = "schema.json#/definitions/Input"', 'output_schema = "schema.json#/definitions/Output"',
        'error_classes = ["ScriptFailed", "ScriptTimedOut"]', f"idempotent = {_toml(not side_effects)}",
        f"side_effects = {_toml(side_effects)}", 'output_varies = "world"', "",
        "[capabilities]", *(f"{json.dumps(k)} = {_toml(v)}" for k, v in sorted(capabilities.items())), "",
        "[caps]", *(f"{k} = {v}" for k, v in CAPS.items()), "",
    ]
    return "\n".join(lines)


def translate(skill: Skill, grants: Mapping[str, Any], *, taken: Collection[str], created_at: str) -> list[Translation]:
    python = [p for p in skill.scripts if p.suffix == ".py"]
    if not python:
        others = ", ".join(str(p.relative_to(skill.dir)) for p in skill.scripts) or "none"
        raise SkillFormatError(f"{skill.dir}: no Python script under scripts/ to translate (scripts found: {others}); "
                               "only Python scripts become executors")
    out: list[Translation] = []
    used = set(taken)
    shared = {"SKILL.md": (skill.dir / "SKILL.md").read_bytes()}
    for ref in skill.references:
        shared[str(ref.relative_to(skill.dir))] = ref.read_bytes()
    for path in python:
        rel = str(path.relative_to(skill.dir))
        name = executor_name(path, skill.name, used)
        used.add(name)
        source = path.read_bytes()
        hints = script_hints(source.decode("utf-8", errors="replace"))
        credentials = [e for e in grants.get("env", ())]
        files = {
            **shared,
            rel: source,
            "main.py": _main_py(name, skill, rel, credentials).encode(),
            "schema.json": (json.dumps(_SCHEMA, indent=2, sort_keys=True) + "\n").encode(),
            "tests/birth.py": _BIRTH_PY.encode(),
            "manifest.toml": _manifest(name, skill, rel, grants, created_at).encode(),
        }
        out.append(Translation(name=name, script=rel, files=files, hints=hints))
    return out


def write_translation(t: Translation, dest: Path) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    for rel, data in t.files.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return dest
