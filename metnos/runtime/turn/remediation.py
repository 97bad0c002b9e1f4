"""The auto-remediation registry (seeds/002 ch. 4-ter).

A canonical ``error_class`` (from the shape FSM, or reported by an
executor in its observation) maps to a :class:`RemediationPlan`: run a
prerequisite tool, merge what it produced into the failed call's
arguments, and retry the failed call once; or open a dialog and stop.

The registry is data: a mapping from error class to plan, append-only
(:func:`extend_registry` refuses to overwrite). Plans are pure: the
dynamic choice of prerequisite and the argument builders read only the
:class:`RemediationContext` they are given.

Readings where the spec leaves room:

* ``needs_data_source`` first looks at what the request names
  (:mod:`metnos.runtime.step.intent`): a file is read with read_files, a folder
  searched with find_files, a URL fetched with get_urls. Else it picks
  ``OBJECT_PRIMARY_TOOLS[intent_object][0]`` when that executor is in the
  catalogue, else ``find_urls`` (given the request as ``query``), else
  nothing: a prerequisite that is not installed is reported as
  ``unavailable``, never invented.
* ``needs_content_fetch`` fetches the first 5 URLs of the observation's
  ``needs_urls_html`` hint.
* ``needs_action_target`` never cascades (a mutation target is never
  fabricated): it is a ``get_inputs`` free-text dialog and the turn ends
  there (``skip_retry``).
* ``pipeline_already_closed`` is not in the registry (no prerequisite can
  fix it); :func:`plan_remediation` answers it with ``force_final_answer``.
* Merging appends the prerequisite's list to the list already in the
  argument, dropping exact duplicates, and removes ``from_step`` so the
  retried call carries the data inline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import orjson

from metnos.runtime.step.errors import TurnError
from metnos.runtime.step.intent import named_targets
from metnos.runtime.step.shape import NEEDS_ACTION_TARGET, NEEDS_DATA_SOURCE, PIPELINE_ALREADY_CLOSED
from metnos.settings import i18n

NEEDS_CONTENT_FETCH = "needs_content_fetch"
CONTENT_FETCH_TOP = 5

# The executor that first produces data about an object, by intent object.
OBJECT_PRIMARY_TOOLS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "messages": ("read_messages",),
    "mail": ("read_messages",),
    "files": ("find_files",),
    "notes": ("find_files",),
    "images": ("find_images", "find_files"),
    "photos": ("find_images", "find_files"),
    "events": ("read_events",),
    "calendar": ("read_events",),
    "persons": ("read_persons",),
    "contacts": ("read_persons",),
    "credentials": ("find_credentials",),
    "issues": ("find_issues",),
    "urls": ("find_urls",),
    "web": ("find_urls",),
})
FALLBACK_SOURCE = "find_urls"
DEFAULT_BUILTINS = frozenset({"get_inputs", "scratchpad_read"})


class RemediationError(TurnError):
    pass


@dataclass(frozen=True, slots=True)
class RemediationContext:
    error_class: str
    executor: str  # the call that failed or was refused
    args: Mapping[str, Any]
    request_text: str
    catalogue: frozenset[str]
    observation: Mapping[str, Any] | None = None
    intent_object: str | None = None
    object_primary_tools: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: OBJECT_PRIMARY_TOOLS)


@dataclass(frozen=True, slots=True)
class RemediationPlan:
    # A fixed name, or a chooser that reads the context (None: no choice).
    prereq_tool: str | Callable[[RemediationContext], str | None]
    hint_field: str | None  # observation field fed to arg_builder; None: the context
    arg_builder: Callable[[Any, RemediationContext], dict[str, Any]]
    merge_field: str = "entries"
    merge_source: str = "entries"
    skip_retry: bool = False
    strategy: str = ""


@dataclass(frozen=True, slots=True)
class RemediationAction:
    kind: str  # prereq_then_retry | dialog | force_final_answer | unavailable | none
    error_class: str
    message: str
    prereq_tool: str | None = None
    prereq_args: Mapping[str, Any] = field(default_factory=dict)
    retry_executor: str | None = None
    merge_field: str | None = None
    merge_source: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "error_class": self.error_class,
            "message": self.message,
            "prereq_tool": self.prereq_tool,
            "prereq_args": dict(self.prereq_args),
            "retry_executor": self.retry_executor,
            "merge_field": self.merge_field,
            "merge_source": self.merge_source,
        }


def _named_source(ctx: RemediationContext) -> tuple[str, dict[str, Any]] | None:
    """The source of what the request names: a file is read, a folder
    searched, a page fetched (the first of these that is installed)."""
    named = named_targets(ctx.request_text)
    for tool, args in (
        ("read_files", {"paths": list(named.files)} if named.files else None),
        ("find_files", {"base_path": named.folders[0]} if named.folders else None),
        ("get_urls", {"urls": list(named.urls)} if named.urls else None),
    ):
        if args is not None and tool in ctx.catalogue:
            return tool, args
    return None


def _choose_data_source(ctx: RemediationContext) -> str | None:
    named = _named_source(ctx)
    if named is not None:
        return named[0]
    if ctx.intent_object:
        for tool in ctx.object_primary_tools.get(ctx.intent_object, ())[:1]:
            if tool in ctx.catalogue:
                return tool
    return FALLBACK_SOURCE if FALLBACK_SOURCE in ctx.catalogue else None


def _data_source_args(_: Any, ctx: RemediationContext) -> dict[str, Any]:
    named = _named_source(ctx)
    if named is not None:
        return named[1]
    # Only the generic web search needs to be told what to look for; an
    # object's primary reader runs on its own defaults.
    chosen = _choose_data_source(ctx)
    return {"query": ctx.request_text} if chosen == FALLBACK_SOURCE else {}


def _content_fetch_args(hint: Any, _: RemediationContext) -> dict[str, Any]:
    if not isinstance(hint, list) or not all(isinstance(u, str) for u in hint):
        raise RemediationError("bad_hint", "needs_urls_html must be a list of URLs", {})
    urls = list(dict.fromkeys(u for u in hint if u.strip()))[:CONTENT_FETCH_TOP]
    if not urls:
        raise RemediationError("bad_hint", "needs_urls_html holds no URL", {})
    return {"urls": urls}


def _action_target_args(_: Any, ctx: RemediationContext) -> dict[str, Any]:
    verb, _sep, obj = ctx.executor.partition("_")
    return {
        "mode": "free_text",
        "verb": verb,
        "object": obj,
        "question": i18n.english("turn.question.which" if obj else "turn.question.which_target", obj=obj, verb=verb),
    }


REMEDIATIONS: Mapping[str, RemediationPlan] = MappingProxyType({
    NEEDS_CONTENT_FETCH: RemediationPlan(
        prereq_tool="read_urls_html", hint_field="needs_urls_html",
        arg_builder=_content_fetch_args,
        strategy="fetch the top URLs of the hint, retry with the pages as entries"),
    NEEDS_DATA_SOURCE: RemediationPlan(
        prereq_tool=_choose_data_source, hint_field=None, arg_builder=_data_source_args,
        strategy="run the intent object's primary source (or find_urls), retry with its entries"),
    NEEDS_ACTION_TARGET: RemediationPlan(
        prereq_tool="get_inputs", hint_field=None, arg_builder=_action_target_args,
        skip_retry=True, strategy="ask the user for the target; never fabricate one"),
})


def extend_registry(registry: Mapping[str, RemediationPlan], error_class: str,
                    plan: RemediationPlan) -> Mapping[str, RemediationPlan]:
    """A new registry with one more entry; existing entries are never replaced."""
    if error_class in registry:
        raise RemediationError("duplicate_remediation",
                               f"a remediation for {error_class!r} is already registered",
                               {"error_class": error_class})
    return MappingProxyType({**registry, error_class: plan})


def plan_remediation(ctx: RemediationContext,
                     registry: Mapping[str, RemediationPlan] = REMEDIATIONS, *,
                     builtins: frozenset[str] = DEFAULT_BUILTINS) -> RemediationAction:
    ec = ctx.error_class
    if ec == PIPELINE_ALREADY_CLOSED:
        return RemediationAction(
            "force_final_answer", ec,
            f"the pipeline was already closed; {ctx.executor} was not run, answer now")
    plan = registry.get(ec)
    if plan is None:
        return RemediationAction("none", ec, f"no remediation is registered for {ec}")
    tool = plan.prereq_tool(ctx) if callable(plan.prereq_tool) else plan.prereq_tool
    if tool is None or (tool not in ctx.catalogue and tool not in builtins):
        return RemediationAction(
            "unavailable", ec,
            f"{ec}: no executor is available to provide what {ctx.executor} needs",
            prereq_tool=tool)
    if plan.hint_field is None:
        hint: Any = ctx
    else:
        obs = ctx.observation or {}
        if plan.hint_field not in obs:
            raise RemediationError("missing_hint",
                                   f"{ec}: the observation carries no {plan.hint_field!r} hint",
                                   {"hint_field": plan.hint_field})
        hint = obs[plan.hint_field]
    prereq_args = plan.arg_builder(hint, ctx)
    if plan.skip_retry:
        return RemediationAction(
            "dialog", ec, f"{ctx.executor} has no target: asking the user",
            prereq_tool=tool, prereq_args=prereq_args)
    return RemediationAction(
        "prereq_then_retry", ec,
        f"{ec}: running {tool} first, then retrying {ctx.executor}",
        prereq_tool=tool, prereq_args=prereq_args, retry_executor=ctx.executor,
        merge_field=plan.merge_field, merge_source=plan.merge_source)


def merge_for_retry(original_args: Mapping[str, Any], prereq_observation: Mapping[str, Any],
                    action: RemediationAction) -> dict[str, Any]:
    """The arguments of the retried call."""
    if action.kind != "prereq_then_retry" or not action.merge_field or not action.merge_source:
        raise RemediationError("not_a_retry", f"action {action.kind!r} has no retry", {})
    if prereq_observation.get("ok") is False:
        raise RemediationError("prereq_failed",
                               f"{action.prereq_tool} failed: {str(prereq_observation.get('error', ''))[:200]}",
                               {"prereq_tool": action.prereq_tool})
    produced = prereq_observation.get(action.merge_source)
    if not isinstance(produced, list):
        raise RemediationError("prereq_no_list",
                               f"{action.prereq_tool} produced no {action.merge_source!r} list",
                               {"prereq_tool": action.prereq_tool, "field": action.merge_source})
    existing = original_args.get(action.merge_field)
    merged: list[Any] = list(existing) if isinstance(existing, list) else []
    seen = {orjson.dumps(x, option=orjson.OPT_SORT_KEYS) for x in merged}
    for item in produced:
        key = orjson.dumps(item, option=orjson.OPT_SORT_KEYS)
        if key not in seen:
            seen.add(key)
            merged.append(item)
    out = {k: v for k, v in original_args.items() if k != "from_step"}
    out[action.merge_field] = merged
    return out


__all__ = [
    "NEEDS_CONTENT_FETCH",
    "OBJECT_PRIMARY_TOOLS",
    "REMEDIATIONS",
    "RemediationAction",
    "RemediationContext",
    "RemediationError",
    "RemediationPlan",
    "extend_registry",
    "merge_for_retry",
    "plan_remediation",
]
