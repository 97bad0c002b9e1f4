"""BFCL's single-call categories through Metnos's calling layer, beside the same model through the server's plain chat template.

    PYTHONPATH=$PWD nice -n 10 python3 bench/bfcl.py --model ~/.local/share/metnos/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
        --per-category 25 --seed 32 --threads 1 --json bfcl-0.5b.json
    PYTHONPATH=$PWD python3 bench/bfcl.py --markdown bfcl-0.5b.json        # the table of a saved report

A yardstick nobody here wrote (issue 32, item 4): the Berkeley Function Calling
Leaderboard's cases and its AST checker, from the ``bfcl-eval`` package
(``./install.sh --bench`` installs it with ``--no-deps``: its own dependencies
are a model-serving stack this bench does not use). Four categories:
simple (BFCL_v4_simple_python), multiple, parallel and irrelevance.

Two llama.cpp servers (xllamacpp, as Metnos's embedded model runs them) are
started on the same GGUF:

* **metnos**: Metnos's chat template; each case is asked the way the planner
  asks a round (turn/asking.py): the planner's system prompt, the tools offered
  as ``ToolSpec``s (rendered by Metnos's template as signatures), the round's
  grammar from ``call_schema.planner_constraint`` sent by ``OpenAICompatProvider``
  (llguidance, ``grammar`` beside the tools), and the reply read and validated
  by the constraint (jsonschema against the tool's parameters). The grammar
  admits a final answer, so "no call" is a reply it can give. Metnos's runtime
  grammar admits one call a reply; the reply form (its template, the loop's
  ``for call in reply.tool_calls``) carries several, so this bench widens the
  grammar to one or more fenced calls (``several_calls``), the same for every
  category; ``--one-call`` measures the runtime's grammar as it is. The first
  reply's calls then pass the runtime's ``made_up_values`` rule (rules/calls.py,
  on turn/invented.py): a call before any step ran that gives required values and
  takes none of them from the request is not run, and the turn is asked for words,
  so it counts as no call; the calls that run lose the optional values the
  runtime's ``unasked_options`` rule leaves out (strings none of whose words the
  request gives). The same replies are also scored without either rule
  (``metnos_unchecked``, in the report's notes): what the rules changed, with no
  extra model call.
* **plain**: the GGUF's own chat template (llama.cpp ``--jinja``), the request
  sent as OpenAI ``tools`` to /v1/chat/completions with no system prompt, the
  calls read from ``tool_calls`` only, no grammar: what BFCL's OpenAI-style
  function-calling handler sends. The same replies are scored twice:

  - **plain (tool_calls only)**: as above, what the server parsed;
  - **plain (+ calls read from text)**: where the server parsed no call, the calls a
    user of the plain template would read from the reply's text (``text_calls``:
    each JSON object written in the text, bare, fenced or in ``<tool_call>`` tags,
    with a ``name`` and ``arguments`` is a call, and each such object of a list).
    The coder models write their calls as fenced JSON, which llama.cpp's
    parser for the GGUF's Hermes-style template does not read, so the first column
    can never call (and never calls wrongly on irrelevance). No extra model call:
    one reply, two readings. The reader is the bench's own, not the runtime's
    ``textcalls.parse_text_call``: that one takes a reply only when it is one lone
    call whose arguments validate against the tool's schema, so a wrong call would
    read as no call (a point on irrelevance it did not earn) and a second call
    would be dropped; here the checker judges what was written.

Both get the same tools: BFCL's functions converted by bfcl-eval's own
``convert_to_tool`` (OpenAI form: ``dict`` -> ``object``, ``float`` -> ``number``,
dots in names -> underscores), and all three columns are scored by bfcl-eval's ``ast_checker``
(with ``underscore_to_dot``, as BFCL scores the OpenAI-style models) and, for
irrelevance, by its rule: right when the reply holds no call.

BFCL's modules that hold these two functions import its model handlers (openai,
tree_sitter, torch...): the checker module is loaded by file with a stand-in
for the one table it reads (the model's ``underscore_to_dot``), and the two
conversion functions are compiled from bfcl-eval's source file as they are.
"""

from __future__ import annotations

import argparse
import ast
import copy
import dataclasses
import importlib.util
import json
import os
import random
import re
import sys
import tempfile
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from metnos.mechanisms.llm.constraint import CallConstraint  # noqa: E402
from metnos.mechanisms.llm.messages import (  # noqa: E402
    Message,
    SystemMessage,
    ToolCall,
    ToolSpec,
    UserMessage,
)
from metnos.mechanisms.llm.textcalls import parse_text_call  # noqa: E402
from metnos.runtime.turn.call_schema import planner_constraint  # noqa: E402
from metnos.runtime.turn.invented import made_up_arguments, unasked_options  # noqa: E402
from metnos.runtime.turn.prompt import PLANNER_PROMPT  # noqa: E402

# Our name for a category -> BFCL's (its data file is BFCL_v4_<name>.json).
CATEGORIES = {"simple": "simple_python", "multiple": "multiple", "parallel": "parallel", "irrelevance": "irrelevance"}
SYSTEMS = ("metnos", "plain")
# The columns of the report: the plain replies are scored twice, their tool_calls alone and with calls read from their text.
PLAIN_TEXT = "plain_text"
COLUMNS = ("metnos", "plain", PLAIN_TEXT)
COLUMN_NAMES = {"metnos": "Metnos's layer", "plain": "plain (tool_calls only)", PLAIN_TEXT: "plain (+ calls read from text)"}
# Metnos's replies scored again as if the runtime had no made_up_values rule: what the rule changed, on the same replies.
UNCHECKED = "metnos_unchecked"
INSTALL_HINT = "install it: ./install.sh --bench (pip install --no-deps 'bfcl-eval>=2026.3.23,<2026.4' filelock)"
# The key the checker's stand-in table is read with (convert_func_name swaps "_" for "/").
CHECKER_MODEL = "metnos_bench"
MAX_TOKENS = 512

# The published BFCL V4 rows for models of this size, from the leaderboard
# (https://gorilla.cs.berkeley.edu/leaderboard.html, "Last Updated: 2026-04-12").
# Their "simple" is the leaderboard's Non-live Simple, the mean of Python, Java and
# JavaScript; their "irrelevance" the mean of non-live and live irrelevance.
PUBLISHED_SOURCE = "BFCL V4 leaderboard, last updated 2026-04-12 (gorilla.cs.berkeley.edu/leaderboard.html)"
PUBLISHED = {
    "Qwen3-0.6B (FC)": {"simple": 64.17, "multiple": 86.0, "parallel": 67.5, "irrelevance": 80.84},
    "Qwen3-1.7B (FC)": {"simple": 70.67, "multiple": 92.5, "parallel": 88.5, "irrelevance": 76.54},
    "Hammer2.1-1.5b (FC)": {"simple": 73.92, "multiple": 92.0, "parallel": 85.5, "irrelevance": 79.4},
    "xLAM-2-1b-fc-r (FC)": {"simple": 64.17, "multiple": 82.5, "parallel": 73.5, "irrelevance": 64.47},
}


# bfcl-eval, the light way.

@dataclasses.dataclass(frozen=True)
class Bfcl:
    """What this bench takes from bfcl-eval: its cases, its answers, its checker and its tool conversion."""

    version: str
    load_cases: Callable[[str], list[dict[str, Any]]]
    load_answers: Callable[[str], list[dict[str, Any]]]
    ast_checker: Callable[..., dict[str, Any]]
    is_function_calling_format_output: Callable[[Any], bool]
    is_empty_output: Callable[[Any], bool]
    convert_to_tool: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
    python: Any


def load_bfcl() -> Bfcl:
    """bfcl-eval's data, checker and conversion, without its model-serving dependencies; fails with the fix."""
    try:
        from importlib.metadata import version

        from bfcl_eval import utils
        from bfcl_eval.constants.enums import Language, ModelStyle
        from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    except ImportError as e:
        raise SystemExit(f"bfcl: bfcl-eval is not importable ({e}); {INSTALL_HINT}") from None
    package = Path(utils.__file__).parent
    checker = _load_checker(package / "eval_checker" / "ast_eval" / "ast_checker.py")
    namespace = _compile_functions(package / "model_handler" / "utils.py", ("_cast_to_openai_type", "convert_to_tool"),
                                   {"copy": copy, "re": re, "json": json, "ModelStyle": ModelStyle, "GORILLA_TO_OPENAPI": GORILLA_TO_OPENAPI})
    convert = namespace["convert_to_tool"]
    return Bfcl(
        version=version("bfcl-eval"),
        load_cases=utils.load_dataset_entry,
        load_answers=utils.load_ground_truth_entry,
        ast_checker=checker.ast_checker,
        is_function_calling_format_output=utils.is_function_calling_format_output,
        is_empty_output=utils.is_empty_output,
        convert_to_tool=lambda functions: convert(functions, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS),
        python=Language.PYTHON,
    )


def _load_checker(path: Path) -> types.ModuleType:
    """ast_checker.py, with a stand-in for the model table it imports (which would import every model handler):
    it reads only whether the model's calls name functions with "_" for "." (OpenAI-style tools do)."""
    table = types.ModuleType("bfcl_eval.constants.model_config")
    table.MODEL_CONFIG_MAPPING = {CHECKER_MODEL.replace("_", "/"): types.SimpleNamespace(underscore_to_dot=True)}  # type: ignore[attr-defined]
    name = "bfcl_eval.constants.model_config"
    before = sys.modules.get(name)
    sys.modules[name] = table
    try:
        spec = importlib.util.spec_from_file_location("bfcl_eval.eval_checker.ast_eval.ast_checker", path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"bfcl: no AST checker at {path}; {INSTALL_HINT}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if before is None:
            del sys.modules[name]
        else:
            sys.modules[name] = before
    return module


def _compile_functions(path: Path, names: Sequence[str], namespace: dict[str, Any]) -> dict[str, Any]:
    """The named top-level functions of ``path``, compiled from its source as they are."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in names]
    missing = set(names) - {node.name for node in found}
    if missing:
        raise SystemExit(f"bfcl: {path} has no {', '.join(sorted(missing))} (another bfcl-eval version?); {INSTALL_HINT}")
    exec(compile(ast.Module(body=found, type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102 - bfcl-eval's own code
    return namespace


# The pure parts: sampling, conversion, the bench's grammar, scoring.

def sample(cases: Sequence[dict[str, Any]], n: int | None, seed: int, category: str) -> list[dict[str, Any]]:
    """``n`` cases of a category, the same for the same seed whatever else is run; all of them when ``n`` is None or larger."""
    ordered = sorted(cases, key=lambda c: c["id"])
    if n is None or n >= len(ordered):
        return ordered
    chosen = set(random.Random(f"{seed}:{category}").sample(range(len(ordered)), n))
    return [c for i, c in enumerate(ordered) if i in chosen]


def interleave(lists: Sequence[Sequence[Any]]) -> list[Any]:
    """One of each list in turn: a run cut short has measured every category on nearly as many cases."""
    longest = max((len(items) for items in lists), default=0)
    return [items[i] for i in range(longest) for items in lists if i < len(items)]


def offered_tools(bfcl: Bfcl, functions: list[dict[str, Any]]) -> tuple[list[ToolSpec], list[dict[str, Any]]]:
    """A case's functions as Metnos offers tools (``ToolSpec``) and as OpenAI ``tools``, from one conversion."""
    openai_tools = bfcl.convert_to_tool(functions)
    specs = [ToolSpec(name=t["function"]["name"], description=t["function"].get("description", ""),
                      parameters=t["function"]["parameters"]) for t in openai_tools]
    return specs, openai_tools


_CALL_LINE = "start: call | answer"
_CALL_BLOCK = re.compile(r"```json\n.*?\n```(?=\n```json|\s*\Z)", re.DOTALL)


@dataclasses.dataclass(frozen=True)
class SeveralCalls(CallConstraint):
    """The round's grammar widened to one or more fenced calls, written one after the other
    as Metnos's chat template renders several calls of one reply; each call is read and
    validated by the runtime's own ``read_reply``."""

    def grammar(self) -> str:
        one = super().grammar()
        if self.call_schema is None:
            return one
        if _CALL_LINE not in one.splitlines():
            raise RuntimeError(f"the round's grammar no longer opens with {_CALL_LINE!r}: widen several_calls to its new form")
        return one.replace(_CALL_LINE, 'start: calls | answer\ncalls: call ("\\n" call)*', 1)

    def read_calls(self, text: str, *, call_id: str, cut_off: bool) -> tuple[ToolCall, ...]:
        single = CallConstraint(self.call_schema)
        blocks = _CALL_BLOCK.findall(text.strip()) or [text]
        calls = (single.read_reply(block, call_id=f"{call_id}_{i}", cut_off=cut_off) for i, block in enumerate(blocks))
        return tuple(c for c in calls if c is not None)


def several_calls(constraint: CallConstraint) -> SeveralCalls:
    return SeveralCalls(constraint.call_schema)


@dataclasses.dataclass
class Output:
    """What a system replied, in BFCL's decoded form (``[{name: {arg: value}}]``), or why it could not be decoded."""

    calls: list[dict[str, Any]] | None
    error: str | None = None
    text: str = ""
    # Metnos's layer: the calls its made_up_values rule intercepted, with the arguments it found made up.
    intercepted: list[str] = dataclasses.field(default_factory=list)
    # Metnos's layer: the optional values its unasked_options rule left out, as call(argument).
    unasked: list[str] = dataclasses.field(default_factory=list)


def score(bfcl: Bfcl, category: str, case: dict[str, Any], answer: dict[str, Any] | None, output: Output) -> tuple[bool, str]:
    """BFCL's verdict on one reply: its irrelevance rule, or its AST checker (eval_runner's glue, as it is)."""
    if category == "irrelevance":
        made_a_call = output.calls is not None and not bfcl.is_empty_output(output.calls)
        return (not made_a_call, "a call where none was right" if made_a_call else "")
    if output.calls is None:
        return False, f"not decoded: {output.error}"
    if not bfcl.is_function_calling_format_output(output.calls):
        return False, "not in the function-calling format"
    assert answer is not None, f"no possible answer for {case['id']}"
    verdict = bfcl.ast_checker(case["function"], output.calls, answer["ground_truth"], bfcl.python, CATEGORIES[category], CHECKER_MODEL)
    return bool(verdict["valid"]), "" if verdict["valid"] else f"{verdict.get('error_type')}: {str(verdict.get('error'))[:200]}"


def metnos_output(calls: Sequence[ToolCall], text: str, *, tools: Sequence[ToolSpec] = (), known: str | None = None) -> Output:
    """A call Metnos's validation refused is a call it would not run: the reply is not decoded.
    With ``known`` (the request), a call the runtime's ``made_up_values`` rule intercepts is not run
    either: the turn is asked for words, so a reply all of whose calls it intercepts is no call; and the
    calls that run lose the optional values its ``unasked_options`` rule leaves out."""
    refused = [c for c in calls if c.arguments_error]
    if refused:
        return Output(None, f"refused by Metnos's validation: {refused[0].arguments_error}", text)
    intercepted: list[str] = []
    unasked: list[str] = []
    decoded = [{c.name: dict(c.arguments)} for c in calls]
    if known is not None:
        calls, made_up = run_or_intercepted(calls, tools, known)
        intercepted = [f"{c.name}({', '.join(made_up_arguments(c.arguments, _spec(tools, c.name).parameters, known))})" for c in made_up]
        decoded = []
        for c in calls:
            left_out = unasked_options(c.arguments, _spec(tools, c.name).parameters, known) if _has_spec(tools, c.name) else ()
            unasked += [f"{c.name}({key})" for key in left_out]
            decoded.append({c.name: {k: v for k, v in c.arguments.items() if k not in left_out}})
    if not calls:
        return Output(None, f"intercepted as made up: {'; '.join(intercepted)}" if intercepted else "no call", text, intercepted)
    return Output(decoded, None, text, intercepted, unasked)


def _has_spec(tools: Sequence[ToolSpec], name: str) -> bool:
    return any(t.name == name for t in tools)


def _spec(tools: Sequence[ToolSpec], name: str) -> ToolSpec:
    return next(t for t in tools if t.name == name)


def run_or_intercepted(calls: Sequence[ToolCall], tools: Sequence[ToolSpec], known: str) -> tuple[list[ToolCall], list[ToolCall]]:
    """The first reply's calls the runtime would run, and those its ``made_up_values`` rule
    (rules/calls.py, on invented.py) intercepts: each call of the turn's first reply comes
    before any step ran, and an intercepted call adds no observation, so each is judged alike."""
    run, made_up = [], []
    for call in calls:
        spec = next((t for t in tools if t.name == call.name), None)
        (made_up if spec is not None and made_up_arguments(call.arguments, spec.parameters, known) else run).append(call)
    return run, made_up


def plain_output(raw: dict[str, Any]) -> Output:
    """BFCL's OpenAI function-calling decoder: each tool call's arguments parsed as JSON; no tool call, no decoded output."""
    message = (raw.get("choices") or [{}])[0].get("message") or {}
    text = message.get("content") or ""
    tool_calls = message.get("tool_calls") or []
    if not tool_calls:
        return Output(None, "no tool_calls", text)
    try:
        return Output([{c["function"]["name"]: json.loads(c["function"]["arguments"] or "{}")} for c in tool_calls], None, text)
    except (ValueError, KeyError, TypeError) as e:
        return Output(None, f"tool_calls not decodable ({type(e).__name__}: {e})", text)


def text_calls(text: str) -> list[dict[str, Any]] | None:
    """The calls a user of the plain template would read from a reply's text, in BFCL's decoded form.

    Each JSON object (or list) written in the text, bare, fenced (```json) or in ``<tool_call>``
    tags alike, is read; an object with a string ``name`` and an object ``arguments`` (or
    ``parameters``; a JSON string of one is decoded) is a call, and so is each such object of a
    list. The name need not be an offered tool and the arguments are not checked against its
    schema: the checker judges them, and for the irrelevance rule a call is a call. None: no
    call in the text.
    """
    calls = [call for value in _json_objects(text) for call in _as_calls(value)]
    return calls or None


def _json_objects(text: str) -> list[Any]:
    """Each JSON object or list written in ``text``, outermost first, left to right."""
    decoder = json.JSONDecoder()
    found, i = [], 0
    while True:
        starts = [j for j in (text.find("{", i), text.find("[", i)) if j >= 0]
        if not starts:
            return found
        i = min(starts)
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            i += 1
            continue
        found.append(value)
        i = end


def _as_calls(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, list):
        return [call for item in value for call in _as_calls(item)]
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return []
    arguments = value.get("arguments", value.get("parameters"))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return []
    return [{value["name"]: arguments}] if isinstance(arguments, dict) else []


def plain_text_output(plain: Output) -> Output:
    """The plain reply with calls also read from its text: its tool_calls when the server parsed any, else the text's."""
    if plain.calls is not None:
        return plain
    calls = text_calls(plain.text)
    return Output(calls, None if calls else f"{plain.error}; no call in the text", plain.text)


def request_text(case: dict[str, Any]) -> str:
    """What the request (and the conversation it continues) wrote: where a call's values may come from."""
    return "\n".join(m["content"] for m in question_messages(case))


def question_messages(case: dict[str, Any]) -> list[dict[str, str]]:
    """The case's one turn (these categories have one)."""
    return [{"role": m["role"], "content": m["content"]} for m in case["question"][0]]


# The two systems.

@dataclasses.dataclass
class CaseRun:
    category: str
    case: str
    system: str
    passed: bool
    why: str
    seconds: float
    calls: int
    constrained: bool | None = None
    text: str = ""
    # Plain only, not scored: the reply wrote a valid call to an offered tool as text, which the server did not parse.
    call_in_text: bool | None = None
    # The calls as scored, in BFCL's decoded form (None: no call decoded).
    decoded: list[dict[str, Any]] | None = None
    # Metnos's layer only: the calls its made_up_values rule intercepted.
    intercepted: list[str] | None = None
    # Metnos's layer only: the optional values its unasked_options rule left out.
    unasked: list[str] | None = None


def ask_metnos(url: str, case: dict[str, Any], tools: list[ToolSpec], *, one_call: bool) -> tuple[tuple[ToolCall, ...], str, bool]:
    """One planner round on the case: Metnos's prompt, tools, grammar and validation; (calls, reply text, grammar taken)."""
    from metnos.mechanisms.llm.openai_compat import OpenAICompatProvider

    messages: list[Message] = [SystemMessage(PLANNER_PROMPT)]
    for m in question_messages(case):
        messages.append(SystemMessage(m["content"]) if m["role"] == "system" else UserMessage(m["content"]))
    constraint = planner_constraint(tools, {}, words_only=False)
    if not one_call:
        constraint = several_calls(constraint)
    # A provider a case: one refused grammar must not turn it off for the cases after.
    provider = OpenAICompatProvider(url=url, model="bench", grammar="on", max_tokens=MAX_TOKENS, temperature=0.0,
                                    api_key_env=None, timeout_s=600.0)
    try:
        reply = provider.complete(messages, tools, constraint=constraint)
    finally:
        provider.close()
    taken = bool((reply.constraint or {}).get("sent"))
    calls = reply.tool_calls
    if taken and isinstance(constraint, SeveralCalls):
        calls = constraint.read_calls(reply.text, call_id="call", cut_off=reply.stop_reason == "length")
    return tuple(calls), reply.text, taken


def ask_plain(url: str, case: dict[str, Any], openai_tools: list[dict[str, Any]]) -> Output:
    body = {"model": "bench", "messages": question_messages(case), "tools": openai_tools, "temperature": 0.0,
            "max_tokens": MAX_TOKENS, "stream": False}
    response = httpx.post(f"{url.rstrip('/')}/v1/chat/completions", json=body, timeout=600.0, trust_env=False)
    if response.status_code != 200:
        return Output(None, f"HTTP {response.status_code}: {response.text[:200]}")
    return plain_output(response.json())


def run_case(bfcl: Bfcl, category: str, case: dict[str, Any], answer: dict[str, Any] | None, system: str, url: str,
             *, one_call: bool) -> list[CaseRun]:
    """The case asked of one system: one run, or for plain two, its one reply scored both ways."""
    specs, openai_tools = offered_tools(bfcl, case["function"])
    started = time.monotonic()
    constrained = None
    unchecked = None
    try:
        if system == "metnos":
            calls, text, constrained = ask_metnos(url, case, specs, one_call=one_call)
            output = metnos_output(calls, text, tools=specs, known=request_text(case))
            unchecked = metnos_output(calls, text)
        else:
            output = ask_plain(url, case, openai_tools)
    except Exception as e:  # noqa: BLE001 - one case's failure is that case's, said
        output = Output(None, f"bench error: {type(e).__name__}: {e}")
    seconds = time.monotonic() - started
    runs = [scored_run(bfcl, category, case, answer, system, output, seconds, constrained, specs)]
    if system == "plain":
        runs.append(scored_run(bfcl, category, case, answer, PLAIN_TEXT, plain_text_output(output), seconds, None, specs))
    elif unchecked is not None:
        runs.append(scored_run(bfcl, category, case, answer, UNCHECKED, unchecked, seconds, constrained, specs))
    return runs


def scored_run(bfcl: Bfcl, category: str, case: dict[str, Any], answer: dict[str, Any] | None, column: str, output: Output,
               seconds: float, constrained: bool | None, specs: list[ToolSpec]) -> CaseRun:
    passed, why = score(bfcl, category, case, answer, output)
    why = why or ""
    if output.error and not passed:
        why = why if why.startswith("not decoded") else f"{why}; {output.error}"
    call_in_text = None
    if column == "plain" and output.calls is None and output.text:
        call_in_text = parse_text_call(output.text, specs, call_id="text") is not None
    return CaseRun(category, case["id"], column, passed, why, round(seconds, 2), len(output.calls or []), constrained, output.text,
                   call_in_text, output.calls, output.intercepted or None, output.unasked or None)


# Summary and output.

def summarize(runs: Sequence[CaseRun]) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for category in CATEGORIES:
        row: dict[str, Any] = {}
        for system in (*COLUMNS, UNCHECKED):
            mine = [r for r in runs if r.category == category and r.system == system]
            if mine:
                row[system] = {"n": len(mine), "passed": sum(r.passed for r in mine),
                               "accuracy": round(100 * sum(r.passed for r in mine) / len(mine), 1),
                               "median_s": round(sorted(r.seconds for r in mine)[len(mine) // 2], 2)}
                if system == "metnos":
                    row[system]["constrained"] = sum(bool(r.constrained) for r in mine)
                    row[system]["intercepted"] = sum(bool(r.intercepted) for r in mine)
                    row[system]["unasked_left_out"] = sum(bool(r.unasked) for r in mine)
                elif system == "plain":
                    row[system]["call_in_text"] = sum(bool(r.call_in_text) for r in mine)
        if "metnos" in row and "plain" in row:
            row["ratio"] = round(row["metnos"]["accuracy"] / row["plain"]["accuracy"], 2) if row["plain"]["accuracy"] else None
        if "metnos" in row and PLAIN_TEXT in row:
            row["ratio_text"] = round(row["metnos"]["accuracy"] / row[PLAIN_TEXT]["accuracy"], 2) if row[PLAIN_TEXT]["accuracy"] else None
        if row:
            table[category] = row
    return table


def _cell(row: dict[str, Any], system: str) -> str:
    found = row.get(system)
    return f"{found['accuracy']:.1f}% ({found['passed']}/{found['n']})" if found else "-"


def table_lines(report: dict[str, Any]) -> list[str]:
    names = list(PUBLISHED)
    head = ["category", "n", *COLUMN_NAMES.values(), "ratio to text-read", *names]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for category, row in report["summary"].items():
        n = max((row[s]["n"] for s in COLUMNS if s in row), default=0)
        ratio = row.get("ratio_text")
        published = [f"{PUBLISHED[m][category]:.1f}%" if category in PUBLISHED[m] else "n/a" for m in names]
        lines.append("| " + " | ".join([category, str(n), *(_cell(row, c) for c in COLUMNS),
                                         "n/a" if ratio is None else f"{ratio:.2f}", *published]) + " |")
    return lines


def markdown(report: dict[str, Any]) -> str:
    meta = (f"{report['model_file']}, bfcl-eval {report['bfcl_eval']}, seed {report['seed']}, "
            f"{report['per_category'] or 'all'} a category, {report['calls']} call(s) a reply under Metnos's grammar, "
            f"started {report['started']}")
    rows = report["summary"].values()
    taken = sum(r["metnos"].get("constrained", 0) for r in rows if "metnos" in r)
    asked = sum(r["metnos"]["n"] for r in rows if "metnos" in r)
    in_text = sum(r["plain"].get("call_in_text", 0) for r in rows if "plain" in r)
    plain = sum(r["plain"]["n"] for r in rows if "plain" in r)
    notes = [f"Metnos's rounds under the grammar: {taken}/{asked}.",
             f"Plain replies with no tool_calls that wrote a valid call to an offered tool as text: {in_text}/{plain}"
             " (scored in the text-read column only).",
             f"Published rows: {PUBLISHED_SOURCE}."]
    unchecked = [f"{category} {_cell(row, UNCHECKED)} ({row['metnos'].get('intercepted', 0)} intercepted, "
                 f"{row['metnos'].get('unasked_left_out', 0)} with optional values left out)"
                 for category, row in report["summary"].items() if UNCHECKED in row and "metnos" in row]
    if unchecked:
        notes.insert(1, "Metnos's layer on the same replies without its made_up_values and unasked_options rules: " + "; ".join(unchecked) + ".")
    return "\n".join([meta, "", *table_lines(report), "", *notes])


def write_report(path: Path, meta: dict[str, Any], runs: Sequence[CaseRun], *, complete: bool) -> None:
    report = {**meta, "complete": complete, "summary": summarize(runs), "runs": [dataclasses.asdict(r) for r in runs]}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".partial")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, help="a GGUF file (default: the installed embedded model)")
    ap.add_argument("--per-category", type=int, help="cases sampled from each category (default: all, ~1,000 in all)")
    ap.add_argument("--seed", type=int, default=32, help="the sample's seed (default 32)")
    ap.add_argument("--categories", default=",".join(CATEGORIES), help=f"comma list of {', '.join(CATEGORIES)}")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma list of {', '.join(SYSTEMS)}")
    ap.add_argument("--one-call", action="store_true", help="Metnos's runtime grammar as it is: one call a reply")
    ap.add_argument("--threads", type=int, default=0, help="llama.cpp threads (default: its choice)")
    ap.add_argument("--json", type=Path, help="write the report here (rewritten after each case)")
    ap.add_argument("--markdown", type=Path, metavar="JSON", help="print a saved report as a Markdown table and exit")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())))
        return 0
    categories = [c.strip() for c in args.categories.split(",") if c.strip()]
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [c for c in categories if c not in CATEGORIES] + [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise SystemExit(f"bfcl: unknown {unknown} (categories: {', '.join(CATEGORIES)}; systems: {', '.join(SYSTEMS)})")
    bfcl = load_bfcl()
    by_category: list[list[tuple[str, dict[str, Any], dict[str, Any] | None]]] = []
    for category in categories:
        name = CATEGORIES[category]
        answers = {} if category == "irrelevance" else {a["id"]: a for a in bfcl.load_answers(name)}
        by_category.append([(category, case, answers.get(case["id"])) for case in sample(bfcl.load_cases(name), args.per_category, args.seed, category)])
    work = interleave(by_category)

    from bench.agent_tasks import default_model
    from metnos.mechanisms.llm.embedded import BUILTIN_TEMPLATE, EmbeddedServer

    model = args.model or default_model()
    servers: dict[str, EmbeddedServer] = {}
    urls: dict[str, str] = {}
    started = time.time()
    meta = {"model": str(model), "model_file": model.name, "bfcl_eval": bfcl.version, "seed": args.seed,
            "per_category": args.per_category, "categories": categories, "systems": systems, "threads": args.threads or None,
            "calls": "one" if args.one_call else "several", "max_tokens": MAX_TOKENS,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)), "published_source": PUBLISHED_SOURCE}
    runs: list[CaseRun] = []
    try:
        # The plain system on the model's own template, as the agent benchmark's --baseline-template builtin.
        for system in systems:
            log = Path(tempfile.gettempdir()) / f"bfcl-{system}-llm.log"
            template = None if system == "metnos" else BUILTIN_TEMPLATE
            servers[system] = EmbeddedServer(model, threads=args.threads or None, log_path=log, chat_template=template)
            t0 = time.monotonic()
            urls[system] = servers[system].start()
            print(f"{system}: server for {model.name} at {urls[system]}, up in {time.monotonic() - t0:.1f} s (log {log})", file=sys.stderr)
        for n, (category, case, answer) in enumerate(work, 1):
            # Case by case, each system in turn: a run cut short still compares them on the same cases.
            for system in systems:
                for r in run_case(bfcl, category, case, answer, system, urls[system], one_call=args.one_call):
                    runs.append(r)
                    print(f"[{n}/{len(work)} {r.system}] {r.case}: {'pass' if r.passed else 'FAIL'} in {r.seconds:.1f} s"
                          f"{'' if r.passed else ' (' + r.why[:160] + ')'}", file=sys.stderr, flush=True)
            if args.json:
                write_report(args.json, meta, runs, complete=n == len(work))
    finally:
        for server in servers.values():
            server.stop()
    print("\n".join(table_lines({"summary": summarize(runs)})))
    if args.json:
        print(f"\nwrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
