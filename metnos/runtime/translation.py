"""The nightly drafts of missing translations (seeds/002 ch. 11.2, ``i18n_translate_pending``).

For each language the catalogue knows besides English, the texts (the
executors' summaries and descriptions among them) with no
fresh translation (never translated, or their English changed since) are
sent to the model in one request, at most ``limit`` texts a night (20 by
default: the model is shared with the user's turns). A draft is kept only
if it is a string that fills exactly the fields its English fills; it goes
to ``<data>/i18n/_pending/<lang>.json`` with the source hash it translates,
never into use: `metnos i18n review` shows it, `metnos i18n promote` puts it
in the catalogue. What was drafted and refused is a DigestWritten event.
"""

from __future__ import annotations

import json
from typing import Any

from metnos.mechanisms.llm.errors import LLMError
from metnos.mechanisms.llm.messages import SystemMessage, UserMessage
from metnos.runtime.executor_texts import with_executors
from metnos.runtime.jobs import CallbackContext, CallbackResult, digest
from metnos.settings import i18n

JOB = "i18n_translate_pending"
LIMIT = 20
TIER = "wise"
MAX_TOKENS = 4096

INSTRUCTIONS = (
    "You translate the user-facing texts of a personal assistant from English into the language whose "
    "ISO 639-1 code is given. Keep every {placeholder} exactly as it is, untranslated, and keep line breaks. "
    "Use the informal register. Reply with one JSON object only: each key as given, mapped to its translation."
)


def owed(catalogue: i18n.Catalogue, folder: Any, limit: int) -> dict[str, list[str]]:
    """language -> the keys to draft tonight, at most ``limit`` in all; a key already drafted for its current English is not owed."""
    out: dict[str, list[str]] = {}
    left = limit
    for language in catalogue.languages():
        if language == i18n.SOURCE or left <= 0:
            continue
        drafted = i18n.read_pending(folder, language)
        keys = [k for k in catalogue.missing(language)
                if drafted.get(k, {}).get("source_hash") != i18n.source_hash(catalogue.source[k])][:left]
        if keys:
            out[language] = keys
            left -= len(keys)
    return out


def checked(catalogue: i18n.Catalogue, keys: list[str], reply: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(key -> translation kept, key -> why refused)."""
    kept, refused = {}, {}
    for key in keys:
        draft = reply.get(key)
        if not isinstance(draft, str) or not draft.strip():
            refused[key] = "no translation in the reply"
        elif (problem := i18n.template_problem(draft)) is not None:
            refused[key] = problem
        elif i18n.fields_of(draft) != i18n.fields_of(catalogue.source[key]):
            refused[key] = (f"the fields differ: {sorted(i18n.fields_of(draft))} for "
                            f"{sorted(i18n.fields_of(catalogue.source[key]))}")
        else:
            kept[key] = draft
    return kept, refused


def run_i18n_translate_pending(ctx: CallbackContext, args: dict[str, Any]) -> CallbackResult:
    limit = args.get("limit", LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        return CallbackResult(ok=False, kind="BadArguments", error={"message": f"limit must be a positive integer, got {limit!r}"})
    folder = ctx.runtime.workspace.i18n_dir
    catalogue = with_executors(i18n.load(folder), ctx.runtime.report.defaults)
    work = owed(catalogue, folder, limit)
    if work and ctx.models is None:
        return CallbackResult(ok=False, kind="NoModel", error={
            "message": "texts wait for a translation and the scheduler has no model; run the daemon without --no-model"})
    drafted: dict[str, list[str]] = {}
    refused: dict[str, dict[str, str]] = {}
    for language, keys in work.items():
        provider = ctx.models(str(args.get("tier", TIER)))
        request = {"language": language, "texts": {k: catalogue.source[k] for k in keys}}
        try:
            reply = provider.complete([SystemMessage(INSTRUCTIONS), UserMessage(json.dumps(request, ensure_ascii=False))],
                                      max_tokens=MAX_TOKENS)
            answer = _json_object(reply.text)
        except (LLMError, ValueError) as e:
            refused[language] = {k: f"the model did not give a usable reply: {e}" for k in keys}
            continue
        kept, refused_here = checked(catalogue, keys, answer)
        pending = i18n.read_pending(folder, language)
        for key, text in kept.items():
            pending[key] = {"text": text, "source_hash": i18n.source_hash(catalogue.source[key]), "model": reply.model or provider.model}
        i18n.write_pending(folder, language, pending)
        if kept:
            drafted[language] = sorted(kept)
        if refused_here:
            refused[language] = refused_here
    return digest(ctx, JOB, {"drafted": drafted, "refused": refused})


def _json_object(text: str) -> dict[str, Any]:
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON object in the reply")
    found, _ = json.JSONDecoder().raw_decode(text[start:])
    if not isinstance(found, dict):
        raise ValueError("the reply's JSON is not an object")
    return found
