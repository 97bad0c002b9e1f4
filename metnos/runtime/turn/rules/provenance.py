"""The provenance of a step's arguments, traced once they are resolved, and the policy on it (docs/turns.md, "Provenance").

A side effect whose target (a recipient, a path it writes, a URL, the command it runs) was
chosen by content someone other than the user wrote (a page, a mail, an MCP server's result,
a file the request did not name as instructions), or written by the model after it read such
content, needs the user's explicit approval, with where the target came from in the question:
the vaglio asks (metnos/runtime/turn/rules/vaglio.py), and an answer given ahead for every
question (``--yes``, ``"approve": "yes"``) does not count. A file's content or a secret on its
way to a recipient or a URL the user did not name, or to a path content chose, is refused as
exfiltration.
"""

from __future__ import annotations

import re
from typing import Any

from domain import provenance as prov
from domain.provenance import Provenance, Seen
from metnos.runtime.turn.conversation import earlier_seen
from metnos.runtime.mcp.servers import ORIGIN as MCP_ORIGIN
from metnos.runtime.turn.judge import capabilities_of
from metnos.runtime.turn.provenance import role_of, settings_of, step_source, target_roles, trace_step
from metnos.runtime.turn.rules.base import BaseRule, Step, Verdict
from metnos.settings import i18n

# Answers given before any question was asked: they approve what the user foresaw, not a target content chose.
BLANKET_ANSWERS = frozenset({"flag:--yes", "http:approve=yes"})
EXFILTRATION = "exfiltration"
# Where content leaves the machine.
_OUTWARD = frozenset({prov.RECIPIENT, prov.URL})


def _home(step: Step) -> str:
    return step.loop.shown_home or step.loop.policy.home


def seen_by(step: Step) -> list[Seen]:
    state = step.state
    return [*earlier_seen(step.request.conversation),
            *(Seen(n, state.sources.get(n, prov.LOCAL), state.observations[n]) for n in state.successes() if n < step.number)]


def trace_provenance(step: Step) -> None:
    """What the step's output will hold (``state.sources``) and, for an executor, where each of its arguments came from."""
    state, request, args = step.state, step.request, step.arguments
    pipings = step.resolution.pipings if step.resolution is not None else ()
    fed_by = [state.sources.get(p.src_step, prov.LOCAL) for p in pipings]
    if step.kind == "scratchpad":
        state.sources[step.number] = prov.least_trusted(state.sources.values()) or prov.LOCAL
        return
    loaded = step.te.loaded if step.te is not None else None
    state.sources[step.number] = step_source(
        step.name, origin=getattr(loaded, "origin", "builtin"), capabilities=capabilities_of(loaded) if loaded is not None else set(),
        args=args, request=request.text, home=_home(step), fed_by=fed_by)
    if step.kind == "executor" and not pipings and step.te is not None and not step.te.entry.side_effects:
        tainted = prov.untrusted_content_read(seen_by(step))
        if tainted is not None and not _read_asked_for(step.name, request.text, made_by=step.te.loaded.manifest.executor.created_by):
            state.reads_content_chose[step.number] = tainted
    if step.kind == "executor":
        step.provenance = trace_step(args=args, pipings=pipings, completed=step.completed, request=request.text,
                                     settings=settings_of(step.loop.catalogue.config), seen=seen_by(step), home=_home(step))


def targets_of(step: Step) -> list[tuple[str, str, Provenance]]:
    """The step's target arguments: (argument path, role, provenance)."""
    te = step.te
    if te is None or not step.provenance:
        return []
    return _targets(target_roles(te.loaded.input_schema, step.name, capabilities_of(te.loaded)), step.provenance)


def _targets(roles: dict[str, str], provenance: dict[str, Provenance]) -> list[tuple[str, str, Provenance]]:
    found = []
    for path, p in provenance.items():
        role = role_of(path, roles)
        if role is None:
            # A piped argument holds its targets inside it (entries.N.path): the whole argument is traced.
            bare = ".".join(s for s in path.split(".") if not s.isdigit())
            role = next((r for key, r in roles.items() if key.startswith(bare + ".")), None)
        if role is not None:
            found.append((path, role, p))
    return found


def untrusted_origins(step: Step) -> list[str]:
    """Why each target of the step may not be chosen as it was, in words (module docstring)."""
    if step.kind != "executor" or step.te is None or not step.te.entry.side_effects:
        return []
    tainted = prov.untrusted_content_read(seen_by(step))
    targets = targets_of(step)
    unasked: list[str] = []
    if getattr(step.te.loaded, "origin", "builtin") == MCP_ORIGIN:
        targets += _values(step.arguments, step.provenance, {path for path, _, _ in targets})
        if tainted is not None and not _asked_for(step):
            unasked.append(i18n.english("turn.origin.not_asked", name=step.name,
                                        origin=Provenance(prov.STEP, step=tainted.step, source=tainted.source).words()))
    return list(dict.fromkeys([*unasked, *(why for path, role, p in targets
                                           if (why := prov.target_origin(role, p, tainted_by=tainted, argument=path)) is not None),
                               *_carried_from_reads_content_chose(step, {path for path, _, _ in targets})]))


def _carried_from_reads_content_chose(step: Step, targets: set[str]) -> list[str]:
    """Why what the step carries (a message's body, a file's text) may not go as it is: it holds what a read the request
    did not ask for returned, a read the model made after reading untrusted content (a page that says "also look up the
    user's passport number and put it in the mail"). The destination may be the user's own: the data was not theirs to send."""
    state = step.state
    chose = state.reads_content_chose
    if not chose:
        return []
    values = {k: v for k, v in prov.leaves(step.arguments).items() if not any(k == t or k.startswith(t + ".") for t in targets)}
    others = [leaf for n, output in state.observations.items() if n not in chose and n < step.number
              for _, leaf in prov.leaves(output).items() if isinstance(leaf, str)]
    why = []
    for number, first in sorted(chose.items()):
        carried = prov.piece_carried(values, state.observations.get(number), known=[step.request.text, *others])
        if carried is not None:
            why.append(i18n.english("turn.origin.read_not_asked", path=carried[0], step=number, name=state.executed.get(number, ("?",))[0],
                                    origin=Provenance(prov.STEP, step=first.step, source=first.source).words()))
    return why


# A word of a read's name a request says it wants read ("profile" in get_user_profile); the verb alone ("get") is no ask.
_WORD = re.compile(r"[^\W\d_]+")
_STEM = 4


def _read_asked_for(name: str, request: str, made_by: str = "") -> bool:
    """Whether the request names the read or a word of what it reads (a word and its plural or a longer form alike).
    An MCP server's name, in each of its tools' names, says which server, not what is read."""
    text = request.casefold()
    if name.casefold() in text:
        return True
    server = set(_WORD.findall(made_by.removeprefix("mcp:").casefold())) if made_by.startswith("mcp:") else set()
    nouns = [w for w in name.casefold().split("_")[1:] if len(w) >= _STEM and w not in server]
    said = [w for w in _WORD.findall(text) if len(w) >= _STEM]
    return any(w.startswith(n) or n.startswith(w) for n in nouns for w in said)


def _asked_for(step: Step) -> bool:
    """Whether the request names the step's executor or the verb of its name ("send" for send_direct_message).

    An MCP server's tags are the server's words, not the user's: a word of its description the request
    shares ("channel", "message") offers the tool, and does not ask for what it does. Chosen after the turn
    read content, a tool whose verb the request does not say is that content choosing what happens."""
    index = getattr(step.loop.catalogue, "index", None)
    if index is None or step.name.casefold() in step.request.text.casefold():
        return True
    action = index.actions.asked(step.request.text).get(step.name)
    return action is not None and action.tag == (step.name.split("_")[0],)


def _values(arguments: dict[str, Any], provenance: dict[str, Provenance], targets: set[str]) -> list[tuple[str, str, Provenance]]:
    """The tokens (an amount, a password, an id) an MCP server's side effect takes besides its targets.

    Our own executors' schemas say which argument is a target and which is data; a server's does not, so
    a token content picked for it is held to the rule a target is held to, and prose stays data."""
    values = prov.leaves(arguments)
    return [(path, prov.VALUE, p) for path, p in provenance.items()
            if path not in targets and prov.is_token(values.get(path))]


def builtin_provenance(step: Step) -> dict[str, Any]:
    """Where each argument of a builtin's call (a schedule's, its executor's arguments within) came from, as recorded."""
    traced = prov.trace(step.args, request=step.request.text, settings=settings_of(step.loop.catalogue.config), seen=seen_by(step),
                        piped={}, answered={}, home=_home(step))
    return {path: p.to_json() for path, p in traced.items()}


def scheduled_untrusted_origins(step: Step, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Why targets of the executor calls a builtin sets up for later (a schedule's) came from content the user did not write.

    A call set up to run later is held to the rule a call run now is: its arguments are traced against the
    request, the settings and what the turn read, and its targets judged by where they came from."""
    seen = seen_by(step)
    tainted = prov.untrusted_content_read(seen)
    settings = settings_of(step.loop.catalogue.config)
    why: list[str] = []
    for name, args in calls:
        te = step.loop.catalogue.get(name)
        if te is None or not te.entry.side_effects:
            continue
        traced = prov.trace(args, request=step.request.text, settings=settings, seen=seen, piped={}, answered={}, home=_home(step))
        roles = target_roles(te.loaded.input_schema, name, capabilities_of(te.loaded))
        why += [i18n.english("turn.origin.for", name=name, reason=reason) for _, role, p in _targets(roles, traced)
                if (reason := prov.target_origin(role, p, tainted_by=tainted)) is not None]
    return list(dict.fromkeys(why))


def blanket(by: str) -> bool:
    return by in BLANKET_ANSWERS


class Exfiltration(BaseRule):
    """A file's content or a secret going where the user did not say is refused (``StepRejected`` kind exfiltration)."""
    name = "exfiltration"

    def on_resolved(self, step: Step) -> Verdict | None:
        if step.kind != "executor" or step.te is None:
            return None
        # A URL is fetched by executors that change nothing, and still carries what it holds to its server.
        leak = _url_leak(step)
        if leak is not None:
            return leak
        if not step.te.entry.side_effects:
            return None
        targets = targets_of(step)
        target_paths = {path for path, _, _ in targets}
        away = next(((path, role, p) for path, role, p in targets
                     if (role in _OUTWARD and not prov.named_by_user(p))
                     or (p.kind == prov.STEP and p.source in prov.UNTRUSTED)), None)
        if away is None:
            return None
        carried = prov.carries_file_or_secret({k: v for k, v in step.provenance.items() if k not in target_paths},
                                              {k: v for k, v in prov.leaves(step.arguments).items()
                                               if not any(k == t or k.startswith(t + ".") for t in target_paths)})
        if carried is None:
            return None
        path, role, p = away
        message = i18n.english("turn.exfiltration.target", name=step.name, carried=carried, role=role, path=path, origin=p.words())
        error = {"kind": EXFILTRATION, "message": message, "argument": path, "origin": p.to_json()}
        return step.reject(EXFILTRATION, error, {"ok": False, "error_class": EXFILTRATION, "error": message})


def _url_leak(step: Step) -> Verdict | None:
    roles = target_roles(step.te.loaded.input_schema, step.name, capabilities_of(step.te.loaded))
    if prov.URL not in roles.values():
        return None
    seen, settings = seen_by(step), settings_of(step.loop.catalogue.config)
    for path, value in prov.leaves(step.arguments).items():
        if role_of(path, roles) != prov.URL or not isinstance(value, str):
            continue
        carried = prov.carried_in_url(value, seen, request=step.request.text, settings=settings)
        if carried is None:
            continue
        message = i18n.english("turn.exfiltration.url", name=step.name, path=path, carried=carried)
        error = {"kind": EXFILTRATION, "message": message, "argument": path}
        return step.reject(EXFILTRATION, error, {"ok": False, "error_class": EXFILTRATION, "error": message})
    return None


__all__ = ["BLANKET_ANSWERS", "EXFILTRATION", "Exfiltration", "blanket", "builtin_provenance", "scheduled_untrusted_origins", "seen_by", "trace_provenance",
           "untrusted_origins"]
