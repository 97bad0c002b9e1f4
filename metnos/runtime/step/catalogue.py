"""What a turn may call: the active executors, as the pre-filter and the model see them.

Built once per turn from the loader's verified executors and the catalogue
projection. For executors that take a list (``entries``/``with_entries``),
the model is offered ``from_step``/``with_step`` instead (seeds/002 ch. 7.1):
it names the step whose list to use and never types the list out itself.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from domain.canonical import canonical_hash
from metnos.mechanisms.executors.loader import LoadedExecutor
from metnos.mechanisms.executors.manifest import Manifest
from metnos.mechanisms.llm.messages import ToolSpec
from metnos.runtime.step.dialog_tools import DIALOG_AFFINITY, DIALOG_TOOLS
from metnos.runtime.step.schedule_tools import TOOLS
from metnos.runtime.step.piping import LIST_REFERENCES
from metnos.runtime.step.prefilter import CatalogueEntry, PrefilterIndex
from metnos.runtime.step.scratchpad import SCRATCHPAD_READ_TOOL

SCRATCHPAD_READ = "scratchpad_read"


@dataclass(frozen=True)
class QuarantinedExecutor:
    """A quarantined executor as a turn ranks and tells of it."""

    entry: CatalogueEntry
    origin: str
    reason: str
    # The check that failed ("digest", "birth", "manual", "approval" for an imported skill...).
    check: str = ""

    @property
    def name(self) -> str:
        return self.entry.name

    def to_json(self) -> dict[str, str]:
        return {"name": self.entry.name, "version": self.entry.version, "origin": self.origin, "check": self.check, "reason": self.reason}


@dataclass(frozen=True)
class TurnExecutor:
    loaded: LoadedExecutor
    entry: CatalogueEntry
    tool: ToolSpec
    first_tool: ToolSpec  # the same tool before any step has run: no step references

    @property
    def name(self) -> str:
        return self.loaded.name


_MAX_REF_DEPTH = 16


def inline_refs(node: Any, root: dict[str, Any], depth: int = 0) -> Any:
    """``node`` with its local ``#/...`` references replaced by what they point to.

    A contract schema is ``{"$ref": "#/definitions/Input", "definitions": {...}}``
    over the whole schema.json; shown as is, the model reads the output
    half as well and invents arguments from it. A reference that does not
    resolve, or that nests deeper than a sane schema would, becomes ``{}``
    (any value): the validator, which keeps the full schema, still decides.
    """
    if isinstance(node, list):
        return [inline_refs(v, root, depth) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#"):
        if depth >= _MAX_REF_DEPTH:
            return {}
        target: Any = root
        for raw in ref[1:].split("/")[1:]:
            part = raw.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        if not isinstance(target, dict):
            return {}
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return inline_refs({**target, **siblings}, root, depth + 1)
    return {k: inline_refs(v, root, depth) for k, v in node.items() if k not in ("$schema", "$id", "definitions", "$defs")}


def tool_parameters(input_schema: dict[str, Any], *, step_refs: bool = True) -> dict[str, Any]:
    """The input schema as offered to the model: self-contained, list arguments become step references.

    ``step_refs=False`` is for the first round, when no step has run: a step
    reference could only point at nothing, and a small model given one fills
    it in anyway (``"from_step": 1`` at step 1), so the list argument is
    simply not offered yet.
    """
    schema = inline_refs(copy.deepcopy(input_schema), input_schema)
    props = schema.get("properties")
    if not isinstance(props, dict):
        return schema
    required = list(schema.get("required", []))
    for ref_arg, list_arg in LIST_REFERENCES:
        if list_arg in props and props[list_arg].get("type") == "array":
            props.pop(list_arg)
            if not step_refs:
                required = [r for r in required if r != list_arg]
                continue
            props[ref_arg] = {
                "type": "integer",
                "minimum": 1,
                "description": f"the number of the earlier step whose list to use as {list_arg}",
            }
            if list_arg in required:
                required[required.index(list_arg)] = ref_arg
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    schema.pop("$schema", None)
    schema.pop("definitions", None)
    return schema


# What a model needs of a schema to write a call: the shape. The rest (bounds,
# formats, defaults, per-field prose) costs prompt tokens on every turn and is
# still enforced: arguments are validated against the full signed schema, and
# a violation comes back to the model with the reason.
_SHAPE_KEYS = ("type", "enum", "const", "properties", "items", "required", "anyOf", "oneOf")
# Data the executor computes on, naming nothing to open (the policy's mark): the grammar must not hold
# it to the form of a path even when its name is a path's ("folder" of a mail box). Read by
# call_schema, which takes it out before the grammar is sent.
OPAQUE_KEY = "x-opaque"
# What a round's grammar holds besides the shape: the bounds the 1.5B broke ("first": 0 for a
# minimum of 1; "since": "yesterday" for a date of the form YYYY-MM-DD), which cost prompt tokens
# and are cheap for the grammar.
_BOUND_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems", "maxItems",
               "pattern", OPAQUE_KEY)


def compact_schema(node: Any, *, bounds: bool = False) -> Any:
    """The shape of a JSON Schema: types, fields, required fields, enums and an argument's hint (HINT_KEY),
    nothing else (with ``bounds``, also the bounds of numbers, strings and arrays)."""
    if isinstance(node, list):
        return [compact_schema(v, bounds=bounds) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    if isinstance(node.get(HINT_KEY), str):
        out["description"] = node[HINT_KEY]
    for key in _SHAPE_KEYS + (_BOUND_KEYS if bounds else ()):
        if key not in node:
            continue
        value = node[key]
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: compact_schema(sub, bounds=bounds) for name, sub in value.items()}
        elif key in ("items", "anyOf", "oneOf"):
            out[key] = compact_schema(value, bounds=bounds)
        else:
            out[key] = value
    return out


def catalogue_entry(m: Manifest) -> CatalogueEntry:
    """What the pre-filter knows of an executor, from its manifest."""
    return CatalogueEntry(
        name=m.name,
        version=m.version,
        summary=m.executor.summary,
        descriptions=tuple(sorted(m.description.items())),
        affinity=tuple(m.executor.affinity),
        side_effects=m.contract.side_effects,
        idempotent=m.contract.idempotent,
        output_varies=m.contract.output_varies,
    )


# What a schema tells the model of an argument beyond its shape, opt-in per argument:
# - "x-choices": "calendar.sources": its values are the keys of that table of the executors' config
#   (ctx.config). Asked for a free string, a small model invents one ("your_calendar_name"); offered
#   the names as an enum, it picks one or leaves the argument out. None configured: not offered.
# - "x-hint": a few words on its form that its name cannot say ("as the user says it: \"tomorrow\"");
#   compact_schema offers it as the argument's description (and drops every other prose).
# - "x-offered": false: a tuning argument the model is not offered (the 1.5B set max_events to 1 and
#   lost the events after the first); other callers may still pass it, the executor's default holds.
# - "x-alternative-to": "calendar": offered only when that argument is not, i.e. nothing is configured
#   for it (a local .ics file instead of a configured calendar: offered both, the 1.5B gave a
#   configured calendar and an invented file).
# - "x-offer-required": true: required of the model though the schema, which other callers also
#   answer to, has another way (delete_events: find, or uids from a plan; offered find alone, the
#   1.5B gave only its day).
CHOICES_KEY = "x-choices"
HINT_KEY = "x-hint"
OFFERED_KEY = "x-offered"
ALTERNATIVE_KEY = "x-alternative-to"
OFFER_REQUIRED_KEY = "x-offer-required"


def configured_names(config: Mapping[str, Any], where: str) -> list[str]:
    """The keys of the table ``where`` ("calendar.sources") of the executors' config, sorted; none if absent."""
    node: Any = config
    for part in where.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return sorted(str(k) for k in node) if isinstance(node, Mapping) else []


def offered_arguments(schema: Any, config: Mapping[str, Any]) -> Any:
    """The schema's arguments as the model is offered them: CHOICES_KEY, OFFERED_KEY, ALTERNATIVE_KEY and
    OFFER_REQUIRED_KEY applied (the hints stay, for compact_schema to show)."""
    if isinstance(schema, list):
        return [offered_arguments(v, config) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: offered_arguments(value, config) for key, value in schema.items() if key != "properties"}
    if isinstance(schema.get("properties"), dict):
        props = {}
        for name, sub in schema["properties"].items():
            if isinstance(sub, dict) and sub.get(OFFERED_KEY) is False:
                continue
            if isinstance(sub, dict) and isinstance(sub.get(CHOICES_KEY), str):
                names = configured_names(config, sub[CHOICES_KEY])
                if not names:
                    continue
                sub = {**sub, "enum": names}
            props[name] = offered_arguments(sub, config)
        props = {name: sub for name, sub in props.items()
                 if not (isinstance(sub, dict) and isinstance(sub.get(ALTERNATIVE_KEY), str) and sub[ALTERNATIVE_KEY] in props)}
        out["properties"] = props
        required = [r for r in schema.get("required", []) if r in props] if isinstance(schema.get("required"), list) else []
        required += [name for name, sub in props.items()
                     if isinstance(sub, dict) and sub.get(OFFER_REQUIRED_KEY) is True and name not in required]
        if required:
            out["required"] = required
        else:
            out.pop("required", None)
    elif "properties" in schema:
        out["properties"] = schema["properties"]
    return out


def _tool(le: LoadedExecutor, *, step_refs: bool = True, config: Mapping[str, Any] | None = None) -> ToolSpec:
    # The one-line summary, not the long description: the pre-filter reads
    # the long one; the model gets the few tokens it needs to choose.
    m = le.manifest
    description = m.executor.summary or m.description.get("en", "")
    offered = offered_arguments(tool_parameters(le.input_schema, step_refs=step_refs), config or {})
    return ToolSpec(name=le.name, description=description, parameters=compact_schema(offered),
                    grammar_parameters=compact_schema(offered, bounds=True))


# Words that make the pre-filter offer the recurring-task builtins.
BUILTIN_AFFINITY: dict[str, tuple[str, ...]] = {
    # "every" alone is in many requests that schedule nothing ("list every file"):
    # the cadences it forms are phrases. Each English word has its Italian beside it, as the seeds'
    # descriptions have (seeds/000).
    "schedule_recurring": ("schedule", "recurring", "daily", "weekly", "hourly", "monthly", "remind", "reminder", "cron",
                           "every day", "every week", "every month", "every hour", "every minute", "every morning",
                           "every evening", "every night", "every weekday", "every monday", "every tuesday",
                           "every wednesday", "every thursday", "every friday", "every saturday", "every sunday",
                           "ogni", "ricorda", "pianifica", "promemoria", "ricorrente"),
    "cancel_recurring": ("cancel", "stop", "recurring", "schedule", "reminder", "annulla", "promemoria", "ricorrente"),
    "list_recurring": ("schedules", "recurring", "scheduled", "reminder", "reminders", "pianificati", "promemoria",
                       "ricorrenti", "programmati"),
    "show_recurring": ("show", "schedule", "recurring", "reminder", "promemoria", "ricorrente"),
    "toggle_recurring": ("pause", "resume", "toggle", "schedule", "reminder", "sospendi", "riprendi", "pausa", "riattiva",
                         "promemoria"),
    "history_recurring": ("history", "schedule", "firings", "recurring", "storia", "storico", "cronologia", "promemoria"),
    "run_now_recurring": ("run", "now", "schedule", "recurring", "esegui", "subito", "promemoria"),
}


@dataclass(frozen=True)
class Builtin:
    """A runtime builtin offered as a tool (not an executor: no manifest, no sandbox)."""

    entry: CatalogueEntry
    tool: ToolSpec
    # The executor calls (name, args) the builtin sets up to run later.
    targets: Callable[[dict[str, Any]], list[tuple[str, dict[str, Any]]]] = lambda args: []


def builtin_tools() -> dict[str, Builtin]:
    found = {}
    for name, tool in sorted({**TOOLS, **DIALOG_TOOLS}.items()):
        spec = ToolSpec(**tool.spec())
        spec = ToolSpec(name=spec.name, description=spec.description, parameters=compact_schema(spec.parameters),
                        grammar_parameters=compact_schema(spec.parameters, bounds=True))
        found[name] = Builtin(CatalogueEntry(name=name, summary=tool.description, descriptions=(("en", tool.description),),
                                             affinity=BUILTIN_AFFINITY.get(name) or DIALOG_AFFINITY.get(name, ()), side_effects=tool.side_effects,
                                             idempotent=tool.idempotent), spec, tool.targets)
    return found


class TurnCatalogue:
    def __init__(self, executors: list[LoadedExecutor], builtins: dict[str, Builtin] | None = None,
                 quarantined: Sequence[QuarantinedExecutor] = (), config: Mapping[str, Any] | None = None) -> None:
        """``config``: the executors' config (ctx.config), whose configured names the tools offer (CHOICES_KEY)."""
        self.builtins = builtins or {}
        # What the executors are configured with: values an argument may take from a setting.
        self.config: Mapping[str, Any] = config or {}
        ordered = sorted(executors, key=lambda e: e.name)
        self.executors = {le.name: TurnExecutor(le, catalogue_entry(le.manifest), _tool(le, config=config),
                                                _tool(le, step_refs=False, config=config)) for le in ordered}
        entries = [te.entry for te in self.executors.values()] + [b.entry for b in self.builtins.values()]
        self.index = PrefilterIndex(sorted(entries, key=lambda e: e.name)) if ordered else None
        identities = [{"name": te.name, "version": te.loaded.version, "digest": te.loaded.digest} for te in self.executors.values()]
        # Each signed file's digest rides along, so a replay can say which file of an executor changed.
        self.entries = [{**ident, "files": dict(te.loaded.file_digests)} for ident, te in zip(identities, self.executors.values(), strict=True)]
        self.digest = canonical_hash(identities)
        # Never offered; ranked with the live ones only to say which a request would have had.
        self.quarantined = tuple(q for q in quarantined if q.name not in self.executors and q.name not in self.builtins)
        self._with_quarantined: PrefilterIndex | None = None

    def index_with_quarantined(self) -> PrefilterIndex:
        """One index over the live entries and the quarantined ones, built once: what the pre-filter would rank if nothing were quarantined."""
        if self._with_quarantined is None:
            entries = [te.entry for te in self.executors.values()] + [b.entry for b in self.builtins.values()]
            self._with_quarantined = PrefilterIndex([*entries, *(q.entry for q in self.quarantined)])
        return self._with_quarantined

    @functools.cached_property
    def machine_names(self) -> frozenset[str]:
        """What the tools and their arguments are called, quarantined ones included: names an answer may
        give ("read_files is out of service") without a result holding them."""
        tools = self.tools([*self.executors, *self.builtins], with_scratchpad=True)
        return frozenset([*(t.name for t in tools), *(q.name for q in self.quarantined),
                          *(p for t in tools for p in t.parameters.get("properties", {}))])

    @functools.cached_property
    def verdict_words(self) -> dict[str, dict[str, frozenset[str]]]:
        """Executor -> verdict field -> the words of a request that ask it, in every language: what an
        output schema's ``is_<word>`` property names under ``x-asked-by`` (read_events's is_free: free,
        libero), else the field's own word."""
        found: dict[str, dict[str, frozenset[str]]] = {}
        for name, te in self.executors.items():
            schema = te.loaded.output_schema
            resolved = inline_refs(schema, schema)
            properties = (resolved.get("properties") if isinstance(resolved, Mapping) else None) or {}
            for field, spec in properties.items():
                if not field.startswith("is_") or not isinstance(spec, Mapping):
                    continue
                asked = spec.get("x-asked-by") or {}
                words = {w.casefold() for ws in asked.values() if isinstance(ws, list) for w in ws if isinstance(w, str)}
                found.setdefault(name, {})[field] = frozenset(words | {field[3:].casefold()})
        return found

    def __len__(self) -> int:
        return len(self.executors)

    def get(self, name: str) -> TurnExecutor | None:
        return self.executors.get(name)

    def tools(self, names: list[str], *, with_scratchpad: bool, step_refs: bool = True) -> list[ToolSpec]:
        """The tools for ``names``, in name order whatever the ranking: the same
        tools make the same prompt prefix, which llama.cpp's cache reuses."""
        tools = []
        for n in sorted(names):
            if n in self.executors:
                tools.append(self.executors[n].tool if step_refs else self.executors[n].first_tool)
            elif n in self.builtins:
                tools.append(self.builtins[n].tool)
        if with_scratchpad:
            spec = SCRATCHPAD_READ_TOOL
            tools.append(ToolSpec(name=spec["name"], description=spec["description"], parameters=dict(spec["parameters"])))
        return tools
