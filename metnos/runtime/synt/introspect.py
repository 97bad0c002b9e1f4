"""The introspective cascade (seeds/000 ch. 7): merge, generalise, specialise proposals.

A pure reading of the mnestome, the catalogue and the invocations in the log;
no model is asked. Each candidate carries its evidence, and the maintenance
job opens one ``requested`` Proposal per candidate not already proposed.
Approving one runs the same seven stages as any generation.

- merge: two active executors used together (an active mnest A -> B of
  weight >= 0.5 and uses >= 10) whose schemas overlap (a field of A's output
  is a field of B's input), neither with side effects;
- generalise: two or more active executors with the same verb and the same
  input schema whose names differ by one word: a family that differs by a
  constant;
- merge, from a schedule (seeds/000 ch. 11: "a recurring schedule becomes a
  candidate for fusion into a single executor that incorporates the chain"):
  an active schedule that fires more than once (``count`` none or > 1) with a
  chain of two or more steps, every step active and without side effects;
- specialise: an executor called >= 30 times in the last 14 days with the
  same value for one argument in >= 90% of its calls (seeds/002 ch. 11.2:
  dominance >= 0.9, uses >= 30, window <= 14 days).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from domain.invocation import Invocation
from domain.canonical import canonical_hash, canonical_json
from eventsourcing.utils import get_topic

MERGE_WEIGHT = 0.5
MERGE_USES = 10
SPECIALISE_USES = 30
SPECIALISE_DOMINANCE = 0.9
SPECIALISE_WINDOW_DAYS = 14


def _fields(schema: Mapping[str, Any]) -> set[str]:
    return set((schema.get("properties") or {}).keys())


def _resolve(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object a standalone half (``{"$ref": "#/definitions/X", ...}``) points at."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/definitions/"):
        return (schema.get("definitions") or {}).get(ref.rsplit("/", 1)[1], {})
    return schema


def merge_candidates(mnests: Mapping[str, Any], loaded: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for m in sorted(mnests.values(), key=lambda m: m["key"]):
        a, b = loaded.get(m["src_executor"]), loaded.get(m["dst_executor"])
        if (m["state"] != "active" or m["weight"] < MERGE_WEIGHT or m["uses"] < MERGE_USES or a is None or b is None
                or a.manifest.contract.side_effects or b.manifest.contract.side_effects):
            continue
        shared = sorted(_fields(_resolve(a.output_schema)) & _fields(_resolve(b.input_schema)) - {"ok", "error"})
        if not shared:
            continue
        out.append({"strategy": "merge", "key": f"merge:{a.name}+{b.name}", "executors": [a.name, b.name],
                    "evidence": {"mnest": m["id"], "weight": m["weight"], "uses": m["uses"], "shared_fields": shared},
                    "request": (f"one executor that does what {a.name} then {b.name} do together "
                                f"({a.manifest.executor.summary} Then: {b.manifest.executor.summary})")})
    return out


def schedule_candidates(schedules: Mapping[str, Any], loaded: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Recurring chains, each a merge of its steps into one executor. The key is the merge's, so a
    chain a mnest already proposed (or a second schedule of the same chain) is not proposed again."""
    out, seen = [], set()
    for s in sorted(schedules.values(), key=lambda s: (s["created"], s["id"])):
        target = s["target"]
        if s["status"] != "active" or target.get("kind") != "chain" or (s["count"] is not None and s["count"] <= 1):
            continue
        names = [step.get("executor") for step in target.get("steps") or []]
        steps = [loaded.get(n) for n in names]
        if len(steps) < 2 or any(le is None or le.manifest.contract.side_effects for le in steps):
            continue
        key = "merge:" + "+".join(names)
        if key in seen:
            continue
        seen.add(key)
        out.append({"strategy": "merge", "key": key, "executors": names,
                    "evidence": {"schedule": s["id"], "cron": s["cron"], "timezone": s["timezone"], "fired": s["fired"],
                                 "label": s["label"]},
                    "request": (f"one executor that does at once what the recurring chain {' then '.join(names)} does at each "
                                f"firing of its schedule ({'; '.join(le.manifest.executor.summary for le in steps)})")})
    return out


def generalise_candidates(loaded: Mapping[str, Any]) -> list[dict[str, Any]]:
    families: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for le in loaded.values():
        families[(le.manifest.verb, canonical_hash(_resolve(le.input_schema)))].append(le)
    out = []
    for (verb, _schema), members in sorted(families.items()):
        if len(members) < 2:
            continue
        words = [le.name.split("_")[1:] for le in members]
        if len({len(w) for w in words}) != 1:
            continue
        differing = [i for i in range(len(words[0])) if len({w[i] for w in words}) > 1]
        if len(differing) != 1:
            continue
        names = sorted(le.name for le in members)
        constants = sorted({w[differing[0]] for w in words})
        out.append({"strategy": "generalise", "key": "generalise:" + "+".join(names), "executors": names,
                    "evidence": {"verb": verb, "differs_in": constants, "same_input_schema": True},
                    "request": (f"one {verb} executor that takes as a parameter what {', '.join(names)} each fix as a "
                                f"constant ({', '.join(constants)})")})
    return out


def specialise_candidates(calls: Iterable[Mapping[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """``calls``: the records of InvocationRequested (executor, args, timestamp)."""
    since = now - timedelta(days=SPECIALISE_WINDOW_DAYS)
    by_executor: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for c in calls:
        if datetime.fromisoformat(c["timestamp"]) >= since:
            by_executor[c["executor"]].append(c["args"] or {})
    out = []
    for name, args_list in sorted(by_executor.items()):
        if len(args_list) < SPECIALISE_USES:
            continue
        values: dict[str, Counter] = defaultdict(Counter)
        for args in args_list:
            for k, v in args.items():
                if isinstance(v, (str, int, float, bool)):
                    values[k][canonical_json(v)] += 1
        for arg, counter in sorted(values.items()):
            value, count = counter.most_common(1)[0]
            dominance = count / len(args_list)
            if dominance >= SPECIALISE_DOMINANCE:
                shown = value.decode()
                out.append({"strategy": "specialise", "key": f"specialise:{name}:{arg}={shown}", "executors": [name],
                            "evidence": {"calls": len(args_list), "argument": arg, "value": shown, "with_value": count,
                                         "dominance": round(dominance, 3), "window_days": SPECIALISE_WINDOW_DAYS},
                            "request": f"a specialised {name} with {arg} fixed to {shown}, for its most frequent use"})
                break
    return out


def invocation_calls(log: Any) -> list[dict[str, Any]]:

    topic = get_topic(Invocation.InvocationRequested)
    return [{"executor": r["executor"], "args": r["args"], "timestamp": r["timestamp"]}
            for _nid, _topic, r in log.records(topics=[topic])]


def candidates(runtime: Any, now: datetime) -> list[dict[str, Any]]:
    loaded = {le.name: le for le in runtime.report.defaults.values()}
    active = {n: le for n, le in loaded.items() if runtime._blocked_reason(le) is None}
    mnests = runtime.mnestome.catch_up(runtime.log)["mnests"]
    merges = merge_candidates(mnests, active)
    proposed = {c["key"] for c in merges}
    chains = [c for c in schedule_candidates(runtime.schedules.catch_up(runtime.log)["schedules"], active) if c["key"] not in proposed]
    return [*merges, *chains, *generalise_candidates(active), *specialise_candidates(invocation_calls(runtime.log), now)]
