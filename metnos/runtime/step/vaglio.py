"""The vaglio: is this one call, with these arguments, lawful? (seeds/002 ch. 9)

Two phases. The *guard* is binary and cannot be relaxed by any autonomy
level; if it stops a call there is no score (``blocked_by="guard"``). The
*judge* scores alignment in [0, 1] and denies below
``METNOS_JUDGE_THRESHOLD`` (``blocked_by="judge"``); a score equal to the
threshold passes.

The autonomy level (metnos/mechanisms/sandbox/autonomy.py) meets the call here too,
after the guard: at ``read_only`` a call with side effects is denied
(``blocked_by="autonomy"``; a turn refuses it by name before, an MCP call
meets it here). At ``supervised`` and ``full`` alike, law 4 below asks: the
seeds let ``full`` widen the sandbox's shell, never this asymmetry.

The spec's list of encoded guard rules did not survive in seeds/002, so
the guard encodes the core rules the seeds do state, as four laws:

1. ``core_forbidden_path`` (seeds/000 ch. 5.5): no argument may name a
   path inside ``~/.ssh``, ``~/.gnupg``, ``~/.config/myclaw``,
   ``~/.config/metnos``, ``<workspace>/.audit``, ``/etc``, ``/proc``,
   ``/sys`` or any extra path the caller adds (Metnos's own log, keys and
   views from ``Workspace.forbidden_paths()``). A few innocuous files the
   Python runtime reads (``/etc/localtime``, ``/etc/ssl/certs`` ...) are
   exempt for calls that do not mutate (E and F verbs) only.
2. ``no_mass_harm``: a mutating call (A verb) may not target the root,
   the home directory, a top-level system directory, or any directory
   that contains a forbidden path. (A read of ``~`` is fine: the sandbox
   masks the core inside a wide grant; a ``delete_files(["~"])`` is not.)
3. ``no_secret_exfiltration``: a mutating call may not carry private key
   material (PEM or OpenSSH private key blocks) in its arguments.
4. ``precautionary_asymmetry`` (seeds/000, the invocation flow): a call to
   an executor with side effects that is not idempotent needs the user's
   explicit approval, "even within the Full autonomy level": without it the
   verdict is ``ask``, not ``allow``, at every level.

Which strings are paths: values under keys that name paths (``path``,
``paths``, ``src``, ``dst``, ``base_path`` ...) and any other string that
starts with ``/``, ``~``, ``./``, ``../``, ``$HOME``, ``$WORKSPACE`` or
``file://``, at any depth, except under keys that carry free text
(``content``, ``body``, ``text`` ...). ``~`` and ``$HOME`` expand to the
given home, ``$WORKSPACE`` and relative paths to the given workspace (or
home), then the path is normalised lexically (no file system access:
symlinks are the sandbox's business).

The judge is the rule-based one of ch. 9.2, in hundredths so the
arithmetic is exact: base 0.70; +0.20 when the request names the executor
(``read_files`` or ``read files``); -0.30 when a path argument has a
``..`` segment; -0.30 when a top-level argument key has a character other
than letters, digits and ``_``. Clamped to [0, 1].

The mnestome's hint (seeds/004 ch. 9): when a strong mnest leads to the
executor from one the turn already ran (metnos/runtime/mnestome/hint.py), the
judge is told so: the verdict's reason says which mnest, ``mnest_hint``
records it and ``judge:mnest_hint`` is among its rules. It is a hint, not a
vote: it moves no score and no decision (the LLM judge, where it runs, reads
it with the call).

The recorded verdict keeps the argument *keys* only, never the values.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from metnos.mechanisms.sandbox import autonomy as levels
from metnos.settings import i18n
from metnos.settings.turn import DEFAULT_JUDGE_THRESHOLD
from metnos.runtime.step.shape import A_VERBS, verb_of
from metnos.runtime.step.text import tokens

CORE_HOME_FORBIDDEN = (".ssh", ".gnupg", ".config/myclaw", ".config/metnos")
CORE_SYSTEM_FORBIDDEN = ("/etc", "/proc", "/sys")
# Read-only exemptions inside /etc: files or trees the Python runtime and
# TLS clients read and that hold nothing private.
CORE_READ_EXCEPTIONS = ("/etc/localtime", "/etc/timezone", "/etc/mime.types", "/etc/hosts",
                        "/etc/resolv.conf", "/etc/nsswitch.conf", "/etc/ssl/certs",
                        "/etc/ca-certificates", "/etc/pki/tls/certs")
SYSTEM_TOP_DIRS = ("/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/opt",
                   "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var")

PATH_KEYS = frozenset({"path", "paths", "src", "source", "sources", "dst", "dest", "destination",
                       "target", "targets", "base_path", "dir", "dirs", "directory", "folder",
                       "file", "files", "filename", "output_path", "input_path"})
TEXT_KEYS = frozenset({"content", "body", "text", "message", "query", "prompt", "question",
                       "summary", "description", "title", "subject", "pattern", "caption"})
_PATH_PREFIXES = ("/", "~", "./", "../", "$HOME", "$WORKSPACE", "file://")
_PRIVATE_KEY = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")
_KEY_OK = re.compile(r"^[A-Za-z0-9_]+$")

JUDGE_BASE = 70
JUDGE_NAME_BONUS = 20
JUDGE_DOTDOT_PENALTY = 30
JUDGE_KEY_PENALTY = 30

ALLOW = "allow"
DENY = "deny"
ASK = "ask"


@dataclass(frozen=True, slots=True)
class GuardPolicy:
    home: str
    workspace: str | None
    forbidden: tuple[str, ...]
    read_exceptions: tuple[str, ...] = CORE_READ_EXCEPTIONS

    @classmethod
    def core(cls, home: str, *, workspace: str | None = None,
             extra_forbidden: Sequence[str] = ()) -> GuardPolicy:
        """The non-negotiable core for a user whose home is ``home``."""
        if not home.startswith("/"):
            raise ValueError("home must be an absolute path")
        if workspace is not None and not workspace.startswith("/"):
            raise ValueError("workspace must be an absolute path")
        home = posixpath.normpath(home)
        paths = [posixpath.join(home, p) for p in CORE_HOME_FORBIDDEN]
        paths += list(CORE_SYSTEM_FORBIDDEN)
        if workspace is not None:
            workspace = posixpath.normpath(workspace)
            paths.append(posixpath.join(workspace, ".audit"))
        for extra in extra_forbidden:
            if not str(extra).startswith("/"):
                raise ValueError(f"forbidden path {extra!r} must be absolute")
            paths.append(posixpath.normpath(str(extra)))
        return cls(home, workspace, tuple(sorted(set(paths))))


@dataclass(frozen=True, slots=True)
class Verdict:
    executor: str
    decision: str  # allow | deny | ask
    reason: str
    score: float | None
    blocked_by: str | None  # guard | autonomy | judge | None
    rules: tuple[str, ...]  # guard laws and judge adjustments that fired
    args_keys: tuple[str, ...]
    judge_kind: str = "rule"
    ts: str | None = None
    mnest_hint: dict[str, Any] | None = None
    # Who the call works for (seeds/002 ch. 11.2.4): "host" or "guest_<id>".
    principal: str = "host"

    @property
    def approved(self) -> bool:
        return self.decision == ALLOW

    def to_json(self) -> dict[str, Any]:
        return {"executor": self.executor, "approved": self.approved, "decision": self.decision,
                "reason": self.reason, "score": self.score, "blocked_by": self.blocked_by,
                "rules": list(self.rules), "args_keys": list(self.args_keys),
                "judge_kind": self.judge_kind, "ts": self.ts,
                # Only when there is one: verdicts recorded before the hint keep their shape.
                **({"mnest_hint": self.mnest_hint} if self.mnest_hint is not None else {}),
                # Only for a guest: the host's verdicts keep the shape they were recorded with.
                **({"principal": self.principal} if self.principal != "host" else {})}


def hinted(verdict: Verdict, hint: dict[str, Any] | None) -> Verdict:
    """The judge's verdict with the mnestome's hint in its reason (a guard or autonomy stop is not judged)."""
    if hint is None or verdict.blocked_by in ("guard", "autonomy"):
        return verdict
    said = i18n.english("turn.vaglio.mnest_hint", source=hint["from"], weight=f"{hint['weight']:.2f}", uses=hint["uses"],
                        executor=verdict.executor)
    return replace(verdict, reason=f"{verdict.reason}; {said}", rules=(*verdict.rules, "judge:mnest_hint"), mnest_hint=hint)


def _walk_strings(value: Any, key: str | None) -> Iterator[tuple[str | None, str]]:
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _walk_strings(v, str(k))
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _walk_strings(v, key)


def path_strings(args: Mapping[str, Any]) -> list[str]:
    """The argument strings the guard treats as paths (module docstring)."""
    found = []
    for key, s in _walk_strings(args, None):
        k = (key or "").lower()
        if k in TEXT_KEYS:
            continue
        stripped = s.strip()
        if k in PATH_KEYS or k.endswith("_path") or stripped.startswith(_PATH_PREFIXES):
            if stripped and "://" not in stripped.replace("file://", "", 1):
                found.append(stripped)
    return found


def resolve_path(raw: str, policy: GuardPolicy) -> str:
    p = raw
    if p.startswith("file://"):
        p = p[len("file://"):]
    if p == "~" or p.startswith("~/"):
        p = policy.home + p[1:]
    elif p == "$HOME" or p.startswith("$HOME/"):
        p = policy.home + p[5:]
    elif p == "$WORKSPACE" or p.startswith("$WORKSPACE/"):
        p = (policy.workspace or policy.home) + p[10:]
    if not p.startswith("/"):
        p = posixpath.join(policy.workspace or policy.home, p)
    # normpath keeps a leading "//"; the kernel treats it as "/".
    p = posixpath.normpath(p)
    return "/" + p.lstrip("/")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _guard(name: str, args: Mapping[str, Any], policy: GuardPolicy) -> tuple[str, str] | None:
    mutating = verb_of(name) in A_VERBS
    for raw in path_strings(args):
        path = resolve_path(raw, policy)
        for root in policy.forbidden:
            if _inside(path, root):
                if not mutating and any(_inside(path, ok) for ok in policy.read_exceptions):
                    continue
                return ("core_forbidden_path", i18n.english("turn.vaglio.forbidden_path", path=repr(raw), root=root))
        if mutating:
            if path in SYSTEM_TOP_DIRS or path == policy.home:
                return ("no_mass_harm", i18n.english("turn.vaglio.whole_of", name=name, path=path))
            for root in policy.forbidden:
                if _inside(root, path):
                    return ("no_mass_harm", i18n.english("turn.vaglio.reaches_forbidden", name=name, path=repr(raw), root=root))
    if mutating:
        for _, s in _walk_strings(args, None):
            if _PRIVATE_KEY.search(s):
                return ("no_secret_exfiltration", i18n.english("turn.vaglio.private_key", name=name))
    return None


def _names_executor(intent_text: str, name: str) -> bool:
    folded = intent_text.casefold()
    if name in folded:
        return True
    words = " ".join(tokens(intent_text))
    return f" {name.replace('_', ' ')} " in f" {words} "


def judge(name: str, args: Mapping[str, Any], intent_text: str) -> tuple[float, tuple[str, ...]]:
    hundredths = JUDGE_BASE
    fired = []
    if _names_executor(intent_text, name):
        hundredths += JUDGE_NAME_BONUS
        fired.append("judge:names_executor")
    if any(".." in raw.replace("\\", "/").split("/") for raw in path_strings(args)):
        hundredths -= JUDGE_DOTDOT_PENALTY
        fired.append("judge:dotdot_in_path")
    if any(not _KEY_OK.match(str(k)) for k in args):
        hundredths -= JUDGE_KEY_PENALTY
        fired.append("judge:anomalous_arg_key")
    return max(0, min(100, hundredths)) / 100, tuple(fired)


def vaglio(name: str, args: Mapping[str, Any], *, intent_text: str, policy: GuardPolicy,
           threshold: float = DEFAULT_JUDGE_THRESHOLD, side_effects: bool = False,
           idempotent: bool = True, user_approved: bool = False, autonomy: str = levels.DEFAULT,
           ts: str | None = None, untrusted: Sequence[str] = (), mnest_hint: dict[str, Any] | None = None,
           principal: str = "host", approvable: Collection[str] = ()) -> Verdict:
    """Judge one resolved call at the autonomy level ``autonomy``. ``ts`` is
    recorded as given (no clock here); ``user_approved`` is the outcome of an
    approval the loop obtained: only the user's answer turns an ``ask`` into
    ``allow``, never the level. ``untrusted``: why targets of the call came from
    content the user did not write (metnos/runtime/turn/rules/provenance.py); a
    side effect with any asks, whatever else holds, and says where they came from.
    ``mnest_hint``: see the module's note. ``principal``: who the call works for; a guest gives no
    approval, so what would ask the user is refused for a guest, saying so, unless the executor is among
    ``approvable`` (``[actors.guest] approvals``): then it asks the guest. Only an ask becomes one: what the
    guard or the guest's level refuses stays refused."""
    verdict = _verdict(name, args, intent_text=intent_text, policy=policy, threshold=threshold, side_effects=side_effects,
                       idempotent=idempotent, user_approved=user_approved, autonomy=autonomy, ts=ts, untrusted=untrusted)
    return hinted(_for_principal(verdict, principal, approvable), mnest_hint)


def _for_principal(verdict: Verdict, principal: str, approvable: Collection[str] = ()) -> Verdict:
    if principal == "host":
        return verdict
    if verdict.decision == ASK and verdict.executor not in approvable:
        return replace(verdict, decision=DENY, principal=principal, blocked_by="actor", rules=(*verdict.rules, "actor:guest"),
                       reason=f"{verdict.reason}; {i18n.english('turn.vaglio.guest', principal=principal)}")
    return replace(verdict, principal=principal)


def _verdict(name: str, args: Mapping[str, Any], *, intent_text: str, policy: GuardPolicy, threshold: float,
             side_effects: bool, idempotent: bool, user_approved: bool, autonomy: str, ts: str | None,
             untrusted: Sequence[str] = ()) -> Verdict:
    keys = tuple(sorted(map(str, args)))
    blocked = _guard(name, args, policy)
    if blocked is not None:
        law, reason = blocked
        return Verdict(name, DENY, reason, None, "guard", (f"guard:{law}",), keys, ts=ts)
    if not levels.offers(autonomy, side_effects=side_effects):
        return Verdict(name, DENY, i18n.english("turn.vaglio.autonomy", name=name, autonomy=autonomy),
                       None, "autonomy", (f"autonomy:{autonomy}",), keys, ts=ts)
    score, fired = judge(name, args, intent_text)
    if score < threshold:
        return Verdict(name, DENY, i18n.english("turn.vaglio.judge_score", score=f"{score:.2f}", threshold=f"{threshold:.2f}"),
                       score, "judge", fired, keys, ts=ts)
    if side_effects and untrusted and not user_approved:
        return Verdict(name, ASK, i18n.english("turn.vaglio.untrusted_target", name=name, why="; ".join(untrusted)),
                       score, None, fired + ("provenance:untrusted_target",), keys, ts=ts)
    if side_effects and not idempotent and not user_approved:
        # Worded as before for supervised, so a turn recorded then replays to the same verdict.
        even_full = "" if autonomy != levels.FULL else "_even_full"
        return Verdict(name, ASK, i18n.english(f"turn.vaglio.cannot_repeat{even_full}", name=name), score, None,
                       fired + ("guard:precautionary_asymmetry",), keys, ts=ts)
    return Verdict(name, ALLOW, "approved", score, None, fired, keys, ts=ts)
