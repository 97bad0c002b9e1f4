"""``metnos i18n``: the languages' state, the nightly drafts to review, promoting them, adding a language."""

from __future__ import annotations

import argparse

import orjson

from metnos.services import languages
from metnos.settings import i18n


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("i18n", help="the languages Metnos answers in: status, review and promote drafts, add one")
    inner = p.add_subparsers(dest="i18n_command", required=True, metavar="SUBCOMMAND")

    st = inner.add_parser("status", help="each language: texts translated, missing, stale, drafts waiting")
    st.add_argument("--json", action="store_true")
    st.set_defaults(run=run_status)

    rv = inner.add_parser("review", help="a language's drafts beside the English they translate")
    rv.add_argument("language")
    rv.add_argument("--json", action="store_true")
    rv.set_defaults(run=run_review)

    pr = inner.add_parser("promote", help="put reviewed drafts in use")
    pr.add_argument("language")
    pr.add_argument("keys", nargs="*", help="the texts to promote; all the drafts when none is given")
    pr.set_defaults(run=run_promote)

    ad = inner.add_parser("add", help="start a language: the nightly job drafts its texts for review")
    ad.add_argument("language", help="its ISO 639-1 code (fr, de, ...)")
    ad.set_defaults(run=run_add)


def run_status(args: argparse.Namespace) -> int:
    rows = languages.status()
    if args.json:
        print(orjson.dumps(rows).decode())
        return 0
    print(i18n.said("list.i18n"))
    for r in rows:
        print(f"{r['language']:<9} {r['translated']:>6}/{r['texts']:<3} {r['missing']:>8} {r['stale']:>6} {r['drafts']:>7}")
    return 0


def run_review(args: argparse.Namespace) -> int:
    rows = languages.review(args.language)
    if args.json:
        print(orjson.dumps(rows).decode())
        return 0
    if not rows:
        print(f"no drafts for {args.language}; the nightly job i18n_translate_pending writes them")
        return 0
    for r in rows:
        print(f"{r['key']}" + (" (OUTDATED: its English changed since; it will not be promoted)" if r["outdated"] else ""))
        print(f"  en:    {r['english']}")
        if r["in_use"]:
            print(f"  now:   {r['in_use']}")
        print(f"  draft: {r['draft']}")
    print(f"promote with `metnos i18n promote {args.language}` (all) or name the keys")
    return 0


def run_promote(args: argparse.Namespace) -> int:
    done = languages.promote(args.language, args.keys or None)
    print(f"{args.language}: {len(done['promoted'])} promoted" + (f"; left, their English changed since: {', '.join(done['outdated'])}"
                                                                  if done["outdated"] else ""))
    return 1 if done["outdated"] else 0


def run_add(args: argparse.Namespace) -> int:
    added = languages.add(args.language)
    print(f"{added['language']}: added; {added['missing']} texts to translate, drafted at night by i18n_translate_pending "
          f"(`metnos i18n review {added['language']}`)")
    return 0
