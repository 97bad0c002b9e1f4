"""The shortlist a turn's model is shown: the pre-filter's ranking, completed.

The bag-of-words ranking (:mod:`metnos.runtime.step.prefilter`) misses the source a
request needs when the request does not use its words ("the total of the
amount column in X.csv" scores compute_entries, never read_files), and it
offers executors with side effects to requests that only read, on a shared
word ("files"). Two rules, measured by bench/shortlist_recall.py, complete it:

* What the request names is where the data comes from
  (:mod:`metnos.runtime.step.intent`): a named file brings read_files, a folder
  find_files, a URL get_urls, when the catalogue has them.
* An executor with side effects stays only when the request names its
  action: one of its action tags (:attr:`PrefilterIndex.action_tags`), in any
  form (:mod:`metnos.runtime.step.asked`), or its own name is in the request. The others are withheld, and the ranking says
  which and why. One whose action the request names comes in even when the
  ranking cut it ("fetch the page, save it to X": ``save`` is write_files's,
  which tied with two others past the pre-filter's K).
* A folder the request names as where something goes, after another path
  ("... from ~/logs into ~/logs/old", "di ~/Scaricati in ~/Immagini";
  :func:`metnos.runtime.step.intent.destination`), asks for move_files whatever
  verb says it, unless the request holds a negation.
* An executor with side effects whose tags say it acts on files (move_files,
  write_files) is withheld when the request names no file, folder or path and
  another executor it asks for acts on something else: "move my
  appointment" asks set_events, not move_files, and "add lunch to my calendar"
  set_events, not write_files.
* An executor with side effects is withheld from a request that says to change
  nothing (:func:`metnos.runtime.step.asked.forbids_change`: "only look, don't
  change it", "senza modificare niente"), unless its output reads the world.
* An executor with side effects is withheld from a request of questions only
  (:func:`metnos.runtime.step.asked.asks_only_questions`: "which files did I
  save yesterday?") unless its output reads the world (``output_varies``:
  run_commands answers "how much space does ~/Music take?") or the request
  says its name.
* A dialog tool (get_inputs, request_location_from_user) stays only when one of
  its own tags or its name is in the request: met by a word of its description
  ("saying"), it was offered beside send_messages and the 1.5B asked the user for
  an address the request had given.
* A recurring-task builtin stays only when the request speaks of schedules
  (one of its affinity phrases other than an everyday verb such as "cancel", or its name): their descriptions share
  everyday verbs ("list", "show", "run") with requests about files, and a
  small model given ``list_recurring`` for "list the files in ~/x" calls it.

With ``[turn] offer = "catalogue"`` (``METNOS_ENGINE_OFFER``)
every executor the two rules above leave is offered, not only the ranked
ones, when they fit in the pool (``via: "catalogue"``; the ``offer`` field
says which was made and, if the shortlist, why): on the 420 written requests
of bench/shortlist_requests.jsonl it finds what a request needs far more often
than the ranking, for about 230 more tokens of first prompt (docs/benchmarks.md).
``offer = "shaped"`` is the shortlist with filter_entries and compute_entries
offered beside any executor that reads entries (``via: "alongside"``, the
reader its ``phrase``): on the same requests the shortlist's recall goes from
77% to 82% on the held-out half, for about 70 more tokens of first prompt at
the median. ``offer = "learned"`` is the shortlist with the executors a
classifier learned from written requests names (:mod:`metnos.runtime.step.learned_offer`,
``via: "learned"``): one it names with side effects counts as asked, and a file
tool it names stays beside another taker of the request's verb, but a request
of questions only, or one that says to change nothing, is still offered none,
nor is one the classifier reads as asking for no change at all, whatever rule
brought the executor (an executor named by its own name stays, and one whose
output reads the world, run_commands, when the classifier names it). Of the
executors the classifier was trained on, it alone decides which the
ranking's guesses stay: one it does not name is left out (withheld as "the
learned offer does not name it"); an executor it never learned (an MCP
server's tool, a synt, a skill) is offered as the ranking brings it. The
executors it knows are shown most likely first, in the places they held.
``offer = "learned"`` is the default.
``offer = "gated"`` is the shortlist with that reading alone: nothing added, and
no side effect offered to a request the classifier reads as changing nothing.
``offer = "shortlist"`` keeps the ranking, completed.

With ``[runtime] intent = "model"`` the executors the intent extractor names
(:mod:`metnos.runtime.turn.intent_model`) join too, before the rule on side effects,
which holds for them as for any.

All are recorded in the ranking (``via: "named_source"``, ``"named_action"`` and ``"intent"`` candidates and the
``withheld`` list), so a replay that runs the same code compares them.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from metnos.runtime.step.catalogue import BUILTIN_AFFINITY
from metnos.runtime.step.dialog_tools import DIALOG_AFFINITY
from metnos.runtime.step.asked import NEGATIONS, AskedAction, asks_only_questions, forbids_change
from metnos.runtime.step.intent import destination, destination_file, named_targets
from metnos.runtime.step.learned_offer import OfferModel, shipped as shipped_offer_model
from metnos.runtime.step.prefilter import PrefilterIndex
from metnos.settings.turn import OFFERS
from metnos.runtime.step.text import content_tokens

# The words by which an executor's tags say it acts on files, and by which a request speaks of them.
FILE_WORDS = frozenset({"file", "files", "folder", "folders", "directory", "cartella", "cartelle"})


# The recurring-task builtins' tags that are everyday verbs: alone, they do not speak of schedules
# ("cancel the team meeting on Wednesday" is the calendar's, not cancel_recurring's). Only "cancel":
# "show" and the others were tried, and changed the pool of turns recorded before (the layered log).
EVERYDAY_VERBS = frozenset({"cancel", "annulla"})


def acts_on_files(entry: Any) -> bool:
    return any(tag in FILE_WORDS for tag in entry.affinity)


# The executor that puts files where a request says they go, and the one that writes a file a request says
# something goes into (unless the request holds one of the NEGATIONS).
MOVER = "move_files"
WRITER = "write_files"

# executor -> which of the request's named targets it reads
# The executors that read entries from a source, and those that shape a list of entries, offered beside
# any of them with ``offer = "shaped"``: the two a request most often needs without saying it in their words
# ("files changed today", "the peak value"). sort_entries, describe_entries and filter_lists were measured
# too and earned less than the tokens they cost (docs/benchmarks.md).
READERS = frozenset({"read_files", "find_files", "get_urls", "read_events", "read_messages", "read_contacts", "find_urls",
                     "read_urls_html"})
SHAPERS = ("filter_entries", "compute_entries")
NAMED_SOURCES: tuple[tuple[str, str], ...] = (("read_files", "files"), ("find_files", "folders"), ("get_urls", "urls"))


def first_by_words(ranking: Mapping[str, Any]) -> tuple[str, ...]:
    """The executors the request's own words rank first: the offered candidates of the ranking (not
    those added for a named source, an intent or the catalogue) with the highest score on tags the
    request says. None when no word of the request met a tag."""
    ranked = [c for c in ranking.get("candidates", []) if c.get("via", "rank") == "rank" and c.get("affinity_hits")]
    best = max((c.get("score", 0.0) for c in ranked), default=0.0)
    return tuple(c["name"] for c in ranked if c.get("score", 0.0) == best and best > 0)


# Why a side effect is withheld when the learned offer reads the request as asking for no change.
READ_AS_NO_CHANGE = "the learned offer reads the request as changing nothing"
# Why the learned offer leaves out an executor the bag-of-words ranking brought: the classifier knows it and does
# not name it. The ranking guesses from any shared word; on the seven blind sets, leaving out the guesses the
# classifier does not make missed 9 more needed executors of 5,106 and offered 3.1 to 3.8 executors a request in
# place of 5.1 to 5.5 (docs/benchmarks.md).
NOT_NAMED_BY_LEARNED = "the learned offer does not name it"


def read_as_no_change(ranking: Mapping[str, Any]) -> list[str]:
    """The executors with side effects ``ranking`` (a ``PrefilterRanked``'s) withheld because the learned
    offer read the request as changing nothing."""
    return [w["name"] for w in ranking.get("withheld", []) if w.get("reason") == READ_AS_NO_CHANGE]


def complete(ranking: Mapping[str, Any], index: PrefilterIndex, request_text: str,
             intent_tools: Sequence[str] = (), *, offer: str = "shortlist", pool_size: int | None = None) -> dict[str, Any]:
    """``ranking`` (the pre-filter event's payload) with named sources (and the
    executors the intent extractor named) added, side effects the request
    does not ask for withheld and, with ``offer="catalogue"``, every other
    executor added when all of them fit in ``pool_size``."""
    if offer not in OFFERS:
        raise ValueError(f"offer must be one of {', '.join(OFFERS)}, not {offer!r}")
    out = copy.deepcopy(dict(ranking))
    candidates: list[dict[str, Any]] = out.get("candidates", [])
    known = {e.name: e for e in index.entries}
    in_pool = {c["name"] for c in candidates}

    def add(name: str, via: str, phrase: str = "", hits: Sequence[str] = ()) -> None:
        candidates.append({"name": name, "version": known[name].version, "score": 0.0, "affinity_hits": list(hits),
                           "description_hits": [], "via": via, "phrase": phrase})
        in_pool.add(name)

    named = named_targets(request_text).to_json()
    for executor, kind in NAMED_SOURCES:
        if named[kind] and executor in known and executor not in in_pool:
            add(executor, "named_source", named[kind][0])
    for name in intent_tools:
        if name in known and name not in in_pool:
            add(name, "intent")
    learned: frozenset[str] = frozenset()
    reads_as_change = True
    likeliest: tuple[str, ...] = ()
    model = None
    if offer in ("learned", "gated"):
        model = shipped_offer_model()
        if model is not None and offer == "learned":
            learned, reads_as_change, likeliest = learned_reading(model, index, request_text)
        out["offer"] = {"asked": offer, "made": offer if model is not None else "shortlist",
                        "model": model.digest if model is not None else None}
    for name in sorted(learned):
        if name not in in_pool:
            add(name, "learned")
    if offer == "shaped":
        reader = next((c["name"] for c in candidates if c["name"] in READERS), None)
        for name in SHAPERS if reader is not None else ():
            if name in known and name not in in_pool:
                add(name, "alongside", reader)
    # The recurring-task builtins' tags are cadences ("weekly", "every monday"), met
    # only as written: in another form they are everyday words ("week", "day").
    words = content_tokens(request_text)
    asked = {name: action for name, action in index.actions.asked(request_text).items() if name not in BUILTIN_AFFINITY}
    # A tag of one word is met only as an instruction ("did it run last night?" asks for no run).
    meant = index.actions.meant(request_text)
    for name in BUILTIN_AFFINITY:
        cadence = next((tag for tag in index.action_tags.get(name, ()) if tag <= words and (len(tag) > 1 or tag <= meant)), None)
        if cadence is not None:
            asked[name] = AskedAction(name, tuple(sorted(cadence)), tuple(sorted(cadence)))
    # A folder named as where something goes asks for a move, whatever verb says it ("shove the
    # photos in ~/a over to ~/b"), unless the request says not to.
    goes_to = destination(request_text)
    if goes_to is not None and MOVER in index.action_tags and MOVER not in asked and not words & NEGATIONS:
        asked[MOVER] = AskedAction(MOVER, (goes_to,), ("destination folder",))
    # Likewise a file named as where something goes, or made ("... in a file ~/index.txt", "make ~/x.txt say done").
    written = destination_file(request_text)
    if written is not None and WRITER in index.action_tags and WRITER not in asked and not words & NEGATIONS:
        asked[WRITER] = AskedAction(WRITER, (written,), ("destination file",))
    lowered = request_text.casefold()
    for entry in index.entries:
        action = asked.get(entry.name)
        if action is not None and entry.name not in in_pool and entry.name not in BUILTIN_AFFINITY:
            add(entry.name, "named_action", " ".join(action.words), sorted(action.tag))

    # The request's action has a taker that does not act on files, and the request names no file:
    # the file executors that share its verb ("move my appointment": move_files) stay out.
    names_files = bool(named["files"] or named["folders"]) or bool(words & FILE_WORDS)
    other_taker = any(name in index.action_tags and not acts_on_files(known[name]) for name in asked if name in known)

    if offer == "gated" and model is not None and any(known[c["name"]].side_effects for c in candidates if c["name"] in known):
        # Read only when there is a side effect to withhold: most requests are offered none.
        _, reads_as_change, _ = learned_reading(model, index, request_text)

    # Under the learned offer, an action the rules read as asked ("... write it to ~/t.txt") overrules the
    # reading of no change when the classifier's own output for that executor reaches its threshold: on two
    # asks in one message, the reading takes one change in five for none (training/train_offer.py). On the
    # blind sets, the rules' words alone took the side effects offered to read-only requests from 2.1% to
    # 7.0%; held to that output, to 2.7% (docs/benchmarks.md). For an executor it never learned (an MCP
    # server's tool), the reading holds unless the request says the verb of its name; the gated offer is
    # that reading alone.
    instructed: set[str] = set()
    if offer == "learned" and model is not None and not reads_as_change and asked:
        likely = model.probabilities(request_text)
        instructed = {name for name in asked if name in model.names
                      and likely[name] >= model.side_thresholds.get(name, model.side_threshold)}
        # One it never learned, when the request says the verb of its name ("set the door code": set_door_code).
        instructed |= {name for name in asked if name not in model.names and name.split("_")[0] in meant}
    # A request of questions only asks for no change: an executor with side effects stays for it only
    # when its output reads the world (run_commands: "how much space does ~/Music take?").
    only_questions = asks_only_questions(request_text)
    # A request that says to change nothing ("only look, don't change it") is offered no change at all.
    no_change = forbids_change(request_text)

    # A tool that changes nothing whose name's verb the request says, as no other ranked tool's ("... and
    # describe them": describe_entries), stays though the learned offer does not name it.
    said_alone = said_only_of(candidates, words, known) if offer == "learned" else frozenset()

    def withheld_because(c: Mapping[str, Any]) -> str | None:
        if (c["name"] in DIALOG_AFFINITY and not c.get("affinity_hits") and c["name"] not in lowered and c.get("via") != "intent"
                and c["name"] not in learned):
            return "a question to the user the request does not call for"
        if (c["name"] in BUILTIN_AFFINITY and not set(c.get("affinity_hits") or ()) - EVERYDAY_VERBS
                and c["name"] not in lowered and c["name"] not in learned):
            return "a recurring-task tool the request does not ask for"
        if c["name"] in index.action_tags and c["name"] not in lowered and c["name"] not in asked and c["name"] not in learned:
            return "side effects the request does not ask for"
        if (no_change and c["name"] in index.action_tags and c["name"] in known
                and known[c["name"]].output_varies is None and c["name"] not in lowered):
            return "the request says to change nothing"
        if (only_questions and c["name"] in index.action_tags and c["name"] in known
                and known[c["name"]].output_varies is None and c["name"] not in lowered):
            return "a request of questions only asks for no change"
        if (not reads_as_change and c["name"] in known and known[c["name"]].side_effects and c["name"] not in lowered
                and c["name"] not in learned and c["name"] not in instructed):
            return READ_AS_NO_CHANGE
        if (c["name"] in index.action_tags and not names_files and other_taker and c["name"] in known
                and acts_on_files(known[c["name"]]) and c["name"] not in lowered and c["name"] not in learned):
            return "acts on files, and the request names none while another tool takes its action"
        if (offer == "learned" and model is not None and c.get("via", "rank") == "rank" and c["name"] in model.names
                and c["name"] not in learned and c["name"] not in lowered and c["name"] not in instructed
                and c["name"] not in said_alone):
            return NOT_NAMED_BY_LEARNED
        return None

    if offer == "catalogue":
        by_name = {c["name"]: c for c in candidates}
        whole = [e.name for e in index.entries if withheld_because(by_name.get(e.name, {"name": e.name})) is None]
        if len(whole) <= (pool_size if pool_size is not None else len(index.entries)):
            for name in [e.name for e in index.entries]:
                if name not in in_pool:
                    # Those not in ``whole`` are withheld below, and so listed with why.
                    add(name, "catalogue")
            out["offer"] = {"asked": "catalogue", "made": "catalogue", "size": len(whole)}
        else:
            out["offer"] = {"asked": "catalogue", "made": "shortlist", "size": len(whole),
                            "why": f"the {len(whole)} executors the request may use are more than the pool of {pool_size}"}
    kept, withheld = [], []
    for c in candidates:
        reason = withheld_because(c)
        if reason is None:
            kept.append(c)
        else:
            withheld.append({"name": c["name"], "reason": reason})
    if out.get("offer", {}).get("made") == "catalogue":
        # In the catalogue's own order, the same from request to request: the tools are the prompt's
        # first part, and a server's prompt cache reuses what did not move since the last ask.
        place = {e.name: n for n, e in enumerate(index.entries)}
        kept.sort(key=lambda c: place.get(c["name"], len(place)))
    if likeliest:
        kept = likeliest_first(kept, likeliest)
    out["candidates"] = kept
    if withheld:
        out["withheld"] = withheld
    if (offer == "gated" and out["offer"]["made"] == "gated"
            and not any(w["reason"] == READ_AS_NO_CHANGE for w in withheld)):
        # The reading changed nothing: the ranking is the shortlist's, byte for byte, and so replays as one.
        del out["offer"]
    return out


def said_only_of(candidates: Sequence[Mapping[str, Any]], words: set[str], known: Mapping[str, Any]) -> frozenset[str]:
    """The ranked executors without side effects whose name's verb is a word of the request, as written, that
    begins no other ranked executor's name."""
    verbs = {c["name"]: c["name"].split("_")[0] for c in candidates if c.get("via", "rank") == "rank"}
    shared = Counter(verbs.values())
    return frozenset(name for name, verb in verbs.items()
                     if verb in words and shared[verb] == 1 and name in known and not known[name].side_effects)


def likeliest_first(kept: list[dict[str, Any]], likeliest: Sequence[str]) -> list[dict[str, Any]]:
    """``kept`` with the executors the learned offer was trained on in its order, most likely first, in the
    places they held; the others (an MCP server's tool, a synt) keep theirs. The ranking's order is that of
    shared words, which read people's requests far worse than the classifier does."""
    place = {name: n for n, name in enumerate(likeliest)}
    ordered = iter(sorted((c for c in kept if c["name"] in place), key=lambda c: place[c["name"]]))
    return [next(ordered) if c["name"] in place else c for c in kept]


def learned_reading(model: OfferModel, index: PrefilterIndex, request_text: str) -> tuple[frozenset[str], bool, tuple[str, ...]]:
    """The catalogue's executors ``model`` names for the request, whether it reads the request as asking
    for a change, and the catalogue's executors it was trained on, most likely first."""
    known = {e.name: e for e in index.entries}
    side_effecting = frozenset(name for name, e in known.items() if e.side_effects)
    reads_world = frozenset(name for name in side_effecting if known[name].output_varies is not None)
    reading = model.read(request_text, side_effecting, reads_world)
    return (frozenset(name for name in reading.tools if name in known), reading.changes,
            tuple(name for name in reading.likeliest if name in known))


def shortlist(index: PrefilterIndex, request_text: str, *, pool_size: int, offer: str = "shortlist") -> dict[str, Any]:
    """The ranking and its completion, without the mnestome's boost (which the
    loop applies in between, through its port)."""
    return complete(index.query(request_text, pool_size=pool_size).to_json(), index, request_text,
                    offer=offer, pool_size=pool_size)
