"""What synt asks the model, and how it reads the answers (stages 2 and 3).

The specification comes back as one JSON object; the draft as two fenced
Python blocks (main.py, tests/birth.py) and, optionally, a JSON block naming
the capabilities the code needs. Code inside JSON strings is what small
models get wrong most often, so code travels in fences.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from metnos.mechanisms.executors.manifest import VERB_CATEGORY
from metnos.mechanisms.llm.messages import Message, SystemMessage, UserMessage
from metnos.runtime.synt.spec import SpecProblem, Specification, first_json_object
from metnos.runtime.synt.static import allowed_modules

SPEC_SYSTEM = f"""You design one small executor (a tool) for Metnos, a personal agent.
Reply with ONE JSON object and nothing else, with these keys:
- "name": verb_object in lower snake case; the verb is one of: {", ".join(VERB_CATEGORY)}
- "summary": one sentence
- "description": what it does, its inputs, its outputs and its errors
- "input_schema": a JSON Schema of type object for the arguments
- "output_schema": a JSON Schema of type object for the result; results carry "ok": true or false, and "error": {{"class", "message"}} when not ok
- "capabilities": what it needs beyond computing, {{}} when nothing; keys among "fs:read" and "fs:write" (lists of paths like "~/notes"), "network" (list of hosts), "code:exec" (list of binaries), "time:read" (true)
- "error_classes": CamelCase names of its errors
- "examples": a list of {{"description": ..., "args": {{...}}}}
Ask for the fewest capabilities that do the job."""

DRAFT_SYSTEM = """You write the code of one Metnos executor from its specification.
Reply with exactly two fenced Python blocks:
```python
# main.py
def run(args, ctx):
    ...
    return {"ok": True, ...}
```
```python
# tests/birth.py
def birth_something(run, tmp):
    out = run(ARGS)
    assert out["ok"] is True
```
main.py defines run(args, ctx), which returns a dict that matches the output schema.
tests/birth.py defines two to four functions birth_<what>(run, tmp): each calls run with a dict of arguments that fits the input schema (ARGS above stands for one, such as {example}) and asserts on the result; tmp is a scratch pathlib.Path.
Use the standard library only, and only these modules: {modules}.
Never use eval, exec, compile, __import__ or importlib.
If the code needs a capability (files, network, binaries, the clock), add a third block:
```json
{"capabilities": {...}}
```"""

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.S)


def spec_messages(request: str, *, existing: list[str]) -> list[Message]:
    taken = ", ".join(sorted(existing)) or "none"
    return [SystemMessage(SPEC_SYSTEM),
            UserMessage(f"Executors that already exist (do not repeat them): {taken}\n\nWhat is wanted: {request}")]


def _spec_text(spec: Specification) -> str:
    return json.dumps(spec.model_dump(mode="json"), indent=1, sort_keys=True)


def draft_messages(spec: Specification, capabilities: Mapping[str, Any]) -> list[Message]:
    modules = ", ".join(sorted(allowed_modules(capabilities)))
    example = json.dumps(spec.examples[0].get("args", {})) if spec.examples else "{}"
    system = DRAFT_SYSTEM.replace("{modules}", modules).replace("{example}", example)
    return [SystemMessage(system), UserMessage("Specification:\n" + _spec_text(spec))]


def repair_messages(spec: Specification, capabilities: Mapping[str, Any], files: Mapping[str, str], failure: str) -> list[Message]:
    shown = "\n\n".join(f"```python\n# {path}\n{source}\n```" for path, source in sorted(files.items()))
    return [*draft_messages(spec, capabilities),
            UserMessage(f"Your draft:\n{shown}\n\nIt failed: {failure}\n\nWrite both files again, fixed.")]


class DraftProblem(ValueError):
    """The model's reply does not hold the two files."""


_LABEL = re.compile(r"^#\s*(main\.py|tests/birth\.py|birth\.py)\s*$", re.M)


def _segments(body: str) -> list[tuple[str | None, str]]:
    """A block cut at its ``# main.py`` / ``# tests/birth.py`` lines: small models put both files in one."""
    marks = list(_LABEL.finditer(body))
    if not marks:
        return [(None, body)]
    out: list[tuple[str | None, str]] = []
    if body[:marks[0].start()].strip():
        out.append((None, body[:marks[0].start()]))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(body)
        out.append(("main" if m.group(1) == "main.py" else "birth", body[m.end():end]))
    return out


def parse_draft(text: str) -> tuple[dict[str, str], dict[str, Any]]:
    """(files, declared capabilities) from a draft reply."""
    main = birth = None
    declared: dict[str, Any] = {}
    for lang, block in _FENCE.findall(text):
        if lang.lower() == "json" or (not lang and block.lstrip().startswith("{")):
            try:
                found = first_json_object(block)
            except SpecProblem:
                continue
            caps = found.get("capabilities", found)
            if isinstance(caps, dict):
                declared = caps
            continue
        for label, body in _segments(block):
            if (label == "birth" or (label is None and "def birth_" in body)) and birth is None:
                birth = body
            elif (label == "main" or (label is None and "def run(" in body)) and main is None:
                main = body
    if main is None or "def run(" not in main:
        raise DraftProblem("the reply has no Python block defining run(args, ctx) (main.py)")
    if birth is None or "def birth_" not in birth:
        raise DraftProblem("the reply has no Python block defining birth_* tests (tests/birth.py)")
    return {"main.py": _without_label(main), "tests/birth.py": _without_label(birth)}, declared


def _without_label(body: str) -> str:
    """The block without the ``# main.py`` line the prompt asks for."""
    lines = body.rstrip().splitlines()
    if lines and re.fullmatch(r"#\s*(main\.py|tests/birth\.py|birth\.py)\s*", lines[0].strip()):
        lines = lines[1:]
    return "\n".join(lines).strip("\n") + "\n"
