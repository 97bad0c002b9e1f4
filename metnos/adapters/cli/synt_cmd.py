"""``metnos synt``: generate an executor with the user at both gates, and see the proposals."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import orjson

from domain.proposal import CLOSED
from metnos.adapters.cli.ask_cmd import progress_line
from domain.errors import MetnosError
from metnos.settings import i18n


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("synt", help="generate new executors from a description or a suggestion, with your approval")
    inner = p.add_subparsers(dest="synt_command", required=True, metavar="SUBCOMMAND")

    gen = inner.add_parser("generate", help="propose a new executor: specification, code, tests, then install on approval")
    what = gen.add_mutually_exclusive_group(required=True)
    what.add_argument("description", nargs="?", help="what the executor should do, in plain words")
    what.add_argument("--from", dest="suggestion", metavar="SUGGESTION_ID", help="start from a suggestion of `synt list`")
    gen.add_argument("--yes", action="store_true", help="approve both gates (for scripts and tests)")
    gen.set_defaults(run=run_generate)

    ls = inner.add_parser("list", help="proposals and suggestions, with their status")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(run=run_list)

    show = inner.add_parser("show", help="one proposal, every stage it went through")
    show.add_argument("id")
    show.add_argument("--json", action="store_true")
    show.set_defaults(run=run_show)

    approve = inner.add_parser("approve", help="approve the gate a proposal waits at, and go on")
    approve.add_argument("id")
    approve.add_argument("--yes", action="store_true", help="approve the next gate too")
    approve.set_defaults(run=run_approve)

    defuse = inner.add_parser("defuse", help="undo a merge: the executors it replaced are active again, it is archived")
    defuse.add_argument("name")
    defuse.set_defaults(run=run_defuse)

    reject = inner.add_parser("reject", help="close a proposal; nothing of it is installed")
    reject.add_argument("id")
    reject.add_argument("--reason", required=True)
    reject.set_defaults(run=run_reject)


def _synt():  # noqa: ANN202
    # Deferred: synt loads the runtime and its pipeline, which `metnos --help` does not need.
    from metnos.services import synt

    return synt


def _print_gate(gate: str, view: dict[str, Any]) -> None:
    out = sys.stderr
    spec = next((s["spec"] for s in reversed(view["stages"]) if s["stage"] == "specification"), {})
    if gate == "specification":
        out.write(f"\nproposal {view['run_id']}: the specification\n")
        out.write(f"  name:         {spec.get('name')}\n  summary:      {spec.get('summary')}\n")
        out.write(f"  description:  {spec.get('description')}\n")
        out.write(f"  input:        {json.dumps(spec.get('input_schema'))}\n")
        out.write(f"  output:       {json.dumps(spec.get('output_schema'))}\n")
        out.write(f"  capabilities: {json.dumps(spec.get('capabilities') or {}) if spec.get('capabilities') else 'none'}\n")
        for ex in spec.get("examples") or []:
            out.write(f"  example:      {ex.get('description')}: {json.dumps(ex.get('args'))}\n")
    else:
        draft = next(s for s in reversed(view["stages"]) if s["stage"] == "draft")
        profile = next(s for s in reversed(view["stages"]) if s["stage"] == "profile")
        birth = next(s for s in reversed(view["stages"]) if s["stage"] == "birth tests")
        out.write(f"\nproposal {view['run_id']}: the code of {spec.get('name')}, its profile and its birth tests\n")
        for path, source in sorted(draft["files"].items()):
            out.write(f"--- {path}\n{source}")
        caps = profile["capabilities"]
        out.write(f"--- profile: capabilities {json.dumps(caps) if caps else 'none'}; "
                  f"{profile['profile'].get('max_duration_s')} s, {profile['profile'].get('max_memory_mb')} MB\n")
        for case in birth["cases"]:
            out.write(f"--- birth {case['name']}: {'passed' if case['ok'] else 'FAILED ' + str(case['error'])}\n")
    out.flush()


def cli_approver(args: argparse.Namespace, *, first: str | None = None) -> Any:
    """Asks at each gate: --yes says yes, a terminal asks, anything else leaves the proposal waiting.
    ``first`` answers the first gate with yes (``synt approve``)."""
    answered: list[str] = []

    def approve(gate: str, view: dict[str, Any]) -> tuple[bool | None, str]:
        if first is not None and not answered:
            answered.append(gate)
            return True, first
        _print_gate(gate, view)
        if args.yes:
            return True, "flag:--yes"
        stdin = sys.stdin
        named = i18n.said(f"cli.synt_gate_{gate}")
        if stdin is None or stdin.closed or not stdin.isatty():
            print(f"metnos: {i18n.said('cli.synt_waits', run_id=view['run_id'], gate=named)}", file=sys.stderr)
            return None, ""
        try:
            reply = input(i18n.said("cli.synt_approve", gate=named)).strip().lower()
        except EOFError:
            return None, ""
        return reply in i18n.said("ask.yes_words").split(), "user:prompt"

    return approve


def _report(synt: Any, p: Any) -> int:
    view = synt.view(p)
    last = view["stages"][-1] if view["stages"] else {}
    line = f"proposal {view['run_id']}: {view['status']}"
    if view["status"] == "installed":
        line += f" {last['name']} {last['version']} at {last['path']}"
    elif view["status"] in ("failed", "rejected"):
        line += f" at {last.get('at_stage')}: {last.get('reason')}"
    print(line)
    return {"failed": 1, "rejected": 3}.get(view["status"], 0)


def _advance(args: argparse.Namespace, key: str | None, *, first: str | None = None) -> int:
    with _synt().SyntSession(progress_line) as synt:
        p = synt.get(key) if key is not None else _open(args, synt)
        if key is not None and p.status in CLOSED:
            raise MetnosError(f"proposal {p.run_id} is already {p.status}; nothing to approve")
        if p.status == "requested":
            # Approving a request starts it; the specification it leads to is shown and asked for.
            first = None
        p = synt.advance(p, cli_approver(args, first=first))
        if p.status == "installed":
            _synt().activate(synt)
            state = synt.runtime.catalogue_state()["executors"].get(f"synt/{p.spec['name']}")
            if state:
                print(f"{p.spec['name']} 1.0.0: {state['versions'].get('1.0.0', {}).get('state')}")
        return _report(synt, p)


def _open(args: argparse.Namespace, synt: Any) -> Any:
    if args.suggestion is None:
        text = " ".join(args.description.split())
        if not text:
            raise MetnosError("say what the executor should do")
        return synt.open(text, source={"kind": "user", "via": "cli"})
    s = _synt().find(synt.state(), args.suggestion, table="suggestions")
    if s is None or s["last"] is None:
        raise MetnosError(f"no suggestion {args.suggestion!r}; see `metnos synt list`")
    last = s["last"]
    request = (f"an executor named {s['wanted']} that takes the output of {last['source']} "
               f"(wanted {last['uses']} times and no chain of existing executors stands in for it)")
    return synt.open(request, source={"kind": "suggestion", "id": s["id"], "wanted": s["wanted"], "from": last["source"]})


def run_generate(args: argparse.Namespace) -> int:
    return _advance(args, None)


def run_approve(args: argparse.Namespace) -> int:
    return _advance(args, args.id, first="user:approve")


def run_reject(args: argparse.Namespace) -> int:
    with _synt().SyntSession(progress_line) as synt:
        p = synt.reject(args.id, reason=args.reason, by="user")
        return _report(synt, p) and 0


def run_defuse(args: argparse.Namespace) -> int:
    sources = _synt().defuse(args.name)
    print(f"{args.name}: archived; active again: {', '.join(sources)}")
    return 0


def _state() -> dict[str, Any]:
    return _synt().proposals_state()


def run_list(args: argparse.Namespace) -> int:
    state = _state()
    proposals = sorted(state["proposals"].values(), key=lambda p: p["opened"])
    suggestions = sorted(state["suggestions"].values(), key=lambda s: s["opened"])
    if args.json:
        print(orjson.dumps({"proposals": [{k: v for k, v in p.items() if k != "stages"} for p in proposals],
                            "suggestions": suggestions}).decode())
        return 0
    print(i18n.said("list.synt"))
    for p in proposals:
        print(f"{p['run_id']:<9} {p['kind']:<10} {p['status']:<14} {p['name'] or '-':<20} {p['request'][:60]}")
    if suggestions:
        print("\nsuggestions (start one with `metnos synt generate --from ID`):")
        for s in suggestions:
            last = s["last"] or {}
            print(f"{s['id'][:8]}  {s['wanted']:<24} from {last.get('source')}, {last.get('uses')} uses: {last.get('outcome')}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    view = _synt().find(_state(), args.id)
    if view is None:
        raise MetnosError(f"no proposal {args.id!r} (or more than one starts so); see `metnos synt list`")
    if args.json:
        print(orjson.dumps(view).decode())
        return 0
    print(f"proposal {view['run_id']} ({view['kind']}): {view['status']}\n  request: {view['request']}")
    for s in view["stages"]:
        print(f"  {s['at'][:19]}  {s['stage']}{_stage_detail(s)}")
    return 0


def _stage_detail(s: dict[str, Any]) -> str:
    stage = s["stage"]
    if stage == "specification":
        spec = s["spec"]
        return f": {spec['name']}: {spec['summary']} (capabilities: {json.dumps(spec.get('capabilities')) if spec.get('capabilities') else 'none'}; {s['tier']} tier, {s['model']})"
    if stage == "draft":
        return f" (round {s['round']}): " + ", ".join(f"{p} {src.count(chr(10))} lines" for p, src in sorted(s["files"].items()))
    if stage == "profile":
        return f" (round {s['round']}): " + ("capabilities " + (json.dumps(s["capabilities"]) if s["capabilities"] else "none")
                                             if s["ok"] else "REFUSED: " + "; ".join(s["problems"]))
    if stage == "static checks":
        return f" (round {s['round']}): " + ("passed" if s["ok"] else "FAILED: " + "; ".join(s["problems"]))
    if stage == "birth tests":
        passed = sum(1 for c in s["cases"] if c["ok"])
        return f" (round {s['round']}): {passed}/{len(s['cases'])} passed" + ("" if s["ok"] else f"; FAILED: {s['failure']}")
    if stage in ("specification approved", "code approved"):
        return f" by {s['by']}"
    if stage == "installed":
        return f": {s['name']} {s['version']} at {s['path']}"
    if stage in ("rejected", "failed"):
        return f" at {s['at_stage']}: {s['reason']}"
    if stage == "evaluated":
        return f" by the promoter: {s['verdict']}" + (f" ({'; '.join(s['killers'])})" if s["killers"] else "")
    return ""
