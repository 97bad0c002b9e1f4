"""``metnos mnestome list|show|private|graph|age``: what Metnos thinks it knows how to do together."""

from __future__ import annotations

import argparse
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson
from metnos.settings import i18n

from domain.errors import MetnosError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mnestome", help="the memory of what fed what")
    inner = p.add_subparsers(dest="mnestome_command", required=True, metavar="SUBCOMMAND")
    ls = inner.add_parser("list", help="mnests, heaviest first")
    ls.add_argument("--tag", help="only mnests with this tag")
    ls.add_argument("--state", action="append", help="only these states (repeatable; default: proto, active, decaying)")
    ls.add_argument("--limit", type=int, default=20)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(run=run_list)
    show = inner.add_parser("show", help="the mnests from SRC to DST (name or name@version) and their history")
    show.add_argument("src")
    show.add_argument("dst")
    show.add_argument("--json", action="store_true")
    show.set_defaults(run=run_show)
    private = inner.add_parser("private", help="mark the mnests from SRC to DST private: the host's, never read in a guest's turn")
    private.add_argument("src")
    private.add_argument("dst")
    private.add_argument("--undo", action="store_true", help="mark them shared again")
    private.set_defaults(run=run_private)
    graph = inner.add_parser("graph", help="the graph in Graphviz dot (and a PNG when Graphviz is installed)")
    graph.add_argument("--out", help="where to write the .dot file (default: DATA_DIR/mnestome.dot; - for stdout)")
    graph.add_argument("--state", action="append", help="states to draw (default: proto, active, decaying)")
    graph.add_argument("--min-weight", type=float, default=0.0)
    graph.set_defaults(run=run_graph)
    age = inner.add_parser("age", help="run the ager at a date: decay, demotions, archive proposals, purges")
    age.add_argument("--at", help="ISO date or date-time (UTC if no zone; default: now)")
    age.add_argument("--dry-run", action="store_true", help="show what would be recorded")
    age.add_argument("--json", action="store_true")
    age.set_defaults(run=run_age)


def _mnestome():  # noqa: ANN202
    # Deferred: the mnestome's service boots the runtime, which `metnos --help` does not need.
    from metnos.services import mnestome

    return mnestome


def _row(m: dict[str, Any]) -> str:
    src = f"{m['src_executor']}@{m['src_version']}"
    dst = f"{m['dst_executor']}@{m['dst_version'] or '?'}"
    return f"{m['weight']:.3f}  {m['uses']:>5}  {m['state']:<10} {src} -> {dst}  [{', '.join(m['tags'])}]  last {m['ts_last'][:10]}"


def run_list(args: argparse.Namespace) -> int:
    states = _mnestome().check_states(args.state)
    if args.limit < 1:
        raise MetnosError("--limit must be at least 1")
    rows = _mnestome().heaviest(args.limit, tag=args.tag, states=states)
    if args.json:
        print(orjson.dumps(rows).decode())
        return 0
    if not rows:
        print("no mnests" + (f" tagged {args.tag!r}" if args.tag else "") + " yet: they form when one step's output feeds another")
        return 0
    print(i18n.said("list.mnestome"))
    for m in rows:
        print(_row(m))
    return 0


def run_private(args: argparse.Namespace) -> int:
    marked = _mnestome().mark_private(args.src, args.dst, private=not args.undo)
    said = "shared again" if args.undo else "private (left out of a guest's turn)"
    print(f"{len(marked)} mnest(s) from {args.src} to {args.dst}: {said}")
    return 0


def _split(ref: str) -> tuple[str, str | None]:
    name, _, version = ref.partition("@")
    return name, version or None


def run_show(args: argparse.Namespace) -> int:
    src, sv = _split(args.src)
    dst, dv = _split(args.dst)
    found = _mnestome().mnests_between(src, sv, dst, dv, f"{args.src} to {args.dst}")
    if args.json:
        print(orjson.dumps(found).decode())
        return 0
    for m in found:
        print(_row(m))
        print(f"  id {m['id']}  lambda {m['decay_lambda']}/day  first {m['ts_first']}  origin {m['origin']}")
        if m["desired_signature"]:
            print(f"  desired: {orjson.dumps(m['desired_signature']).decode()}")
        if m["superseded_by"]:
            print(f"  superseded by {m['superseded_by']} on {m['superseded_at'][:10]}")
        for h in m["history"]:
            print(f"    {h['at'][:19]}  {h['event']:<21} weight {h['weight']:.4f}  uses {h['uses']}  {h['state']}")
    return 0


def dot_source(rows: list[dict[str, Any]]) -> str:
    """The graph in Graphviz dot: executors as nodes, mnests as edges sized by weight."""
    def q(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["digraph mnestome {", "  rankdir=LR;", "  node [shape=box, fontname=Helvetica];"]
    nodes = sorted({(m["src_executor"], False) for m in rows} | {(m["dst_executor"], m["dst_version"] is None) for m in rows})
    seen: set[str] = set()
    for name, proto in nodes:
        if name in seen:
            continue
        seen.add(name)
        lines.append(f"  {q(name)}" + (" [style=dashed];" if proto else ";"))
    for m in sorted(rows, key=lambda m: m["key"]):
        style = {"proto": "dashed", "decaying": "dotted"}.get(m["state"], "solid")
        label = f"{m['weight']:.2f} ({m['uses']})"
        width = 0.5 + 4.5 * m["weight"]
        lines.append(f"  {q(m['src_executor'])} -> {q(m['dst_executor'])} [label={q(label)}, penwidth={width:.2f}, style={style}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def run_graph(args: argparse.Namespace) -> int:
    states = _mnestome().check_states(args.state)
    rows, data_dir = _mnestome().graph_rows(states, args.min_weight)
    text = dot_source(rows)
    if args.out == "-":
        print(text, end="")
        return 0
    out = Path(args.out) if args.out else data_dir / "mnestome.dot"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out} ({len(rows)} mnests)")
    dot = shutil.which("dot")
    if dot is None:
        print("Graphviz is not installed (no `dot` on PATH): no PNG; the .dot file opens in any Graphviz viewer")
        return 0
    png = out.with_suffix(".png")
    done = subprocess.run([dot, "-Tpng", "-o", str(png), str(out)], capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise MetnosError(f"dot failed: {done.stderr.strip()[:200]}")
    print(f"wrote {png}")
    return 0


def parse_at(text: str | None, now: datetime) -> datetime:
    if not text:
        return now
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise MetnosError(f"--at {text!r} is not an ISO date or date-time (e.g. 2026-05-01 or 2026-05-01T09:00:00Z)") from None
    return at if at.tzinfo else at.replace(tzinfo=timezone.utc)


def run_age(args: argparse.Namespace) -> int:
    aged = _mnestome().age(args.at, dry_run=args.dry_run, parse_at=parse_at)
    at, snap = aged.at, aged.snapshot
    if aged.due is not None:
        if args.json:
            print(orjson.dumps([{"id": mid, "actions": acts} for mid, acts in aged.due]).decode())
        else:
            for mid, acts in aged.due:
                m = aged.state["mnests"][mid]
                print(f"{m['src_executor']} -> {m['dst_executor']}: {', '.join(acts)}")
            print(f"{len(aged.due)} mnests would change at {at.isoformat()}")
        return 0
    if args.json:
        print(orjson.dumps({"at": at.isoformat(), "mnests": aged.changed, "events": aged.events, "snapshot": str(snap) if snap else None}).decode())
        return 0
    summary = ", ".join(f"{n} {k}" for k, n in sorted(aged.events.items())) or "nothing to record"
    print(f"aged at {at.isoformat()}: {aged.changed} mnests; {summary}")
    if snap:
        print(f"snapshot {snap}")
    return 0
