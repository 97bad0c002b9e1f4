"""The planner's recurring-task tools (seeds/002 ch. 11.2.1), as data plus pure handlers.

``TOOLS`` maps a tool name to a :class:`BuiltinTool`: the description and
JSON schema a ``ToolSpec`` needs, its contract for the vaglio (side effects,
idempotent, and the executor calls it would make later, ``targets``), and
``handler(service, args, approval) -> observation``. The turn loop passes
every builtin call through the vaglio and, where it asks, the user, exactly
as an executor's; ``approval`` is what the user said (None when nobody was
asked), and schedule_recurring records it on the schedule. ``call_tool`` checks the arguments against the schema and
turns every refusal into an ``{"ok": false, "error": ...}`` observation, as
an executor's would be, so the turn loop can offer these next to executors.
Only executors and chains can be scheduled from here; builtin callbacks are
the runtime's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jsonschema

from domain.schedule import CHANNELS, ON_FAILURE
from domain.errors import MetnosError


@dataclass(frozen=True)
class BuiltinTool:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[[Any, dict[str, Any], dict[str, Any] | None], dict[str, Any]]
    # Fail closed: a builtin that does not say it is harmless is treated as
    # an irreversible action, and the loop asks the user before it runs.
    side_effects: bool = True
    idempotent: bool = False
    # The executor calls (name, args) this builtin sets up to run later,
    # judged with it: a schedule of delete_files is a delete_files.
    targets: Callable[[dict[str, Any]], list[tuple[str, dict[str, Any]]]] = lambda args: []

    def spec(self) -> dict[str, Any]:
        """Fields of metnos.mechanisms.llm.messages.ToolSpec."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


# An ISO 8601 instant with its zone, the one form an expiry is read in (domain/due.py:parse).
INSTANT_PATTERN = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$"

_REF = {"type": "object", "required": ["schedule_id"], "additionalProperties": False,
        "properties": {"schedule_id": {"type": "string", "minLength": 4, "description": "the schedule's id (or a unique prefix)"}}}

_STEP = {"type": "object", "required": ["executor"], "additionalProperties": False,
         "properties": {"executor": {"type": "string", "minLength": 1}, "args": {"type": "object"}}}

_SCHEDULE = {
    "type": "object",
    "required": ["cron"],
    # Exactly one target: an executor (with its args) or a chain. Said in the schema so the
    # round's grammar offers the two forms apart (metnos/runtime/turn/call_schema.py).
    "oneOf": [{"required": ["executor"], "not": {"required": ["chain"]}},
              {"required": ["chain"], "not": {"required": ["executor"]}}],
    "additionalProperties": False,
    "properties": {
        "executor": {"type": "string", "minLength": 1, "description": "the executor to run at each firing"},
        "chain": {"type": "array", "minItems": 1, "items": _STEP, "description": "or a chain of steps, piping with from_step"},
        "args": {"type": "object", "description": "arguments for the executor (or the chain's first step)"},
        "cron": {"type": "string", "minLength": 1, "description": "five-field cron, e.g. '0 8 * * *' for every day at 8"},
        "timezone": {"type": "string", "description": "IANA zone for the cron times; default UTC"},
        "channel": {"enum": list(CHANNELS), "description": "where each result goes; default outbox"},
        "count": {"type": ["integer", "null"], "minimum": 1, "description": "1 = once, N = N firings, null = forever"},
        # Held to the form domain/due.py:parse takes (a zone included): the grammar admitted "never" before.
        "expiry": {"type": ["string", "null"], "pattern": INSTANT_PATTERN, "description": "ISO timestamp after which it stops"},
        "on_failure": {"enum": list(ON_FAILURE), "description": "default notify (after one retry)"},
        "max_consecutive_failures": {"type": ["integer", "null"], "minimum": 1},
        "label": {"type": "string", "maxLength": 200, "description": "a short name the user will recognise"},
    },
}


def _schedule_targets(args: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    first = args.get("args") if isinstance(args.get("args"), dict) else {}
    if isinstance(args.get("executor"), str):
        return [(args["executor"], first)]
    steps = args.get("chain") if isinstance(args.get("chain"), list) else []
    out = []
    for number, step in enumerate(steps, start=1):
        if isinstance(step, dict) and isinstance(step.get("executor"), str):
            step_args = step.get("args") if isinstance(step.get("args"), dict) else {}
            out.append((step["executor"], {**first, **step_args} if number == 1 else step_args))
    return out


def _schedule(service: Any, args: dict[str, Any], approval: dict[str, Any] | None) -> dict[str, Any]:
    if ("executor" in args) == ("chain" in args):
        return _error("BadArguments", "give exactly one of executor or chain")
    target = {"kind": "executor", "name": args["executor"]} if "executor" in args else {"kind": "chain", "steps": args["chain"]}
    options = {k: args[k] for k in ("timezone", "channel", "count", "expiry", "on_failure", "max_consecutive_failures", "label") if k in args}
    if approval is not None:
        options.update(approved_by=approval["by"], turn_id=approval.get("turn_id"))
    # The cron field also takes the words the user said ("every morning at 8"):
    # read into a cron here, and shown back with the next firings.
    reading = service.read_when(args["cron"], options.get("timezone", "UTC"))
    if reading["words"] is not None and reading["count"] is not None and options.get("count") is None:
        options["count"] = reading["count"]
    confirm = getattr(service, "confirm", None)
    if confirm is not None:
        service.check_quota()  # a schedule the quota refuses is not shown for a yes
        # Shown back before it is saved: the cron read and the next three firings; only a yes saves it.
        shown = {"executor" if "executor" in args else "chain": args.get("executor") or args["chain"], "cron": reading["cron"],
                 "timezone": reading["timezone"], "next_fires": reading["next_fires"], **({"said": reading["words"]} if reading["words"] else {})}
        yes, by = confirm(shown)
        if not yes:
            return _error("NotConfirmed", f"the user did not confirm the schedule ({reading['cron']}, next firings "
                                          f"{', '.join(reading['next_fires'])}; answered by {by}); nothing was scheduled")
        options["confirmed"] = {"by": by, "next_fires": reading["next_fires"]}
    out = service.create(target=target, args=args.get("args") or {}, cron=reading["cron"], **options)
    if reading["words"] is None:
        return {"ok": True, **out}
    return {"ok": True, **out, "cron": reading["cron"], "said": reading["words"], "next_fires": reading["next_fires"]}


def _list(service: Any, args: dict[str, Any], approval: dict[str, Any] | None = None) -> dict[str, Any]:
    rows = service.list(status=args.get("status"), owner="user" if not args.get("include_builtin") else None)
    return {"ok": True, "entries": [_brief(r) for r in rows]}


def _brief(s: dict[str, Any]) -> dict[str, Any]:
    target = s["target"]
    what = target.get("name") or target.get("key") or " -> ".join(step["executor"] for step in target.get("steps", []))
    return {"schedule_id": s["id"], "label": s["label"], "target": what, "cron": s["cron"], "timezone": s["timezone"],
            "status": s["status"], "next_fire": s["next_fire"], "fired": s["fired"], "count": s["count"],
            "consecutive_failures": s["consecutive_failures"]}


def _history(service: Any, args: dict[str, Any], approval: dict[str, Any] | None = None) -> dict[str, Any]:
    history = service.history(args["schedule_id"])
    events = history["events"][-int(args.get("limit", 20)):]
    return {"ok": True, "schedule_id": history["schedule_id"], "entries": events}


def _toggle(service: Any, args: dict[str, Any], approval: dict[str, Any] | None = None) -> dict[str, Any]:
    if "paused" in args:
        s = service.pause(args["schedule_id"]) if args["paused"] else service.resume(args["schedule_id"])
    else:
        s = service.toggle(args["schedule_id"])
    return {"ok": True, **_brief(s)}


# The builtins that set up a call to run later: the keys of the executor's name and of its arguments
# (a round's grammar holds those arguments to that executor's schema: metnos/runtime/turn/call_schema.py).
# The tool that makes a recurring schedule.
SCHEDULE_TOOL = "schedule_recurring"
SCHEDULED_CALLS: dict[str, tuple[str, str]] = {SCHEDULE_TOOL: ("executor", "args")}

TOOLS: dict[str, BuiltinTool] = {t.name: t for t in (
    # What a schedule will do is judged through its targets: the loop asks
    # the user when one of them has side effects (it will repeat them).
    BuiltinTool("schedule_recurring", "Schedule a recurring task: run an executor (or a chain) at the times of a cron expression, and deliver each result.",
                _SCHEDULE, _schedule, idempotent=True, targets=_schedule_targets),
    # Cancelling cannot be taken back: it asks, like any irreversible action.
    BuiltinTool("cancel_recurring", "Cancel a recurring task for good.", _REF,
                lambda s, a, _=None: {"ok": True, **_brief(s.cancel(a["schedule_id"]))}),
    BuiltinTool("list_recurring", "List the user's recurring tasks with their next firing.",
                {"type": "object", "additionalProperties": False, "properties": {
                    "status": {"enum": ["active", "paused", "completed", "cancelled"]}, "include_builtin": {"type": "boolean"}}},
                _list, side_effects=False, idempotent=True),
    BuiltinTool("show_recurring", "Show one recurring task: target, cadence, counts, last firing.", _REF,
                lambda s, a, _=None: {"ok": True, **s.show(a["schedule_id"])}, side_effects=False, idempotent=True),
    # Pausing or resuming runs nothing new: a resumed schedule fires only
    # within its own approval.
    BuiltinTool("toggle_recurring", "Pause a recurring task, or resume a paused one (paused: true/false to be explicit).",
                {**_REF, "properties": {**_REF["properties"], "paused": {"type": "boolean"}}}, _toggle, idempotent=True),
    BuiltinTool("history_recurring", "The history of one recurring task: creation, changes, every firing and its outcome.",
                {**_REF, "properties": {**_REF["properties"], "limit": {"type": "integer", "minimum": 1, "maximum": 200}}}, _history,
                side_effects=False, idempotent=True),
    # A run-now is a firing: it runs only within the schedule's approval.
    BuiltinTool("run_now_recurring", "Run a recurring task once now, outside its cadence (not counted as a firing).", _REF,
                lambda s, a, _=None: {"ok": True, **s.run_now(a["schedule_id"])}, idempotent=True),
)}


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"kind": kind, "message": message}}


def call_tool(service: Any, name: str, args: Any, approval: dict[str, Any] | None = None) -> dict[str, Any]:
    tool = TOOLS.get(name)
    if tool is None:
        return _error("UnknownTool", f"no recurring-task tool named {name!r}")
    errors = sorted(jsonschema.Draft7Validator(tool.parameters).iter_errors(args), key=lambda e: list(e.path))
    if errors:
        if errors[0].validator == "oneOf" and not errors[0].path:
            forms = " or ".join("+".join(a.get("required", [])) for a in errors[0].validator_value)
            return _error("BadArguments", f"give exactly one of {forms}")
        where = "/".join(str(p) for p in errors[0].path) or "(args)"
        return _error("SchemaViolation", f"{where}: {errors[0].message}")
    try:
        return tool.handler(service, args, approval)
    except MetnosError as e:
        return _error(type(e).__name__, str(e))
